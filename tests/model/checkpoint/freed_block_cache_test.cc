// The cache of freed large blocks the CPU allocator reuses
// (freed_block_cache.h): best fit within twice the request, the oldest
// dropped first past the capacity, nothing kept at capacity 0.
#include "model/checkpoint/freed_block_cache.h"

#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace docsparse {
namespace {

constexpr size_t kMiB = size_t{1} << 20;

// Distinct fake addresses: the cache never touches the memory.
void* Address(uintptr_t n) { return reinterpret_cast<void*>(n * 4096); }

// Takes a block for `bytes` and expects it to be `expected`.
void ExpectTakes(FreedBlockCache& cache, size_t bytes, void* expected) {
  const std::optional<FreedBlockCache::Block> block = cache.Take(bytes);
  ASSERT_TRUE(block.has_value()) << bytes;
  EXPECT_EQ(block->data, expected) << bytes;
}

TEST(FreedBlockCacheTest, TakesTheSmallestBlockThatFitsWithinTwiceTheRequest) {
  FreedBlockCache cache(1024 * kMiB);
  EXPECT_TRUE(cache.Keep({Address(1), 8 * kMiB}).empty());
  EXPECT_TRUE(cache.Keep({Address(2), 4 * kMiB}).empty());
  EXPECT_TRUE(cache.Keep({Address(3), 100 * kMiB}).empty());
  EXPECT_EQ(cache.kept_bytes(), 112 * kMiB);

  // 3 MiB: the 4 MiB block (8 and 100 are larger but not the best fit).
  std::optional<FreedBlockCache::Block> block = cache.Take(3 * kMiB);
  ASSERT_TRUE(block.has_value());
  EXPECT_EQ(block->data, Address(2));
  EXPECT_EQ(block->bytes, 4 * kMiB);
  // 2 MiB: only 8 and 100 are left, both more than twice as large.
  EXPECT_FALSE(cache.Take(2 * kMiB).has_value());
  // 6 MiB: the 8 MiB block; then 60 MiB takes the 100 MiB one (< 2x).
  block = cache.Take(6 * kMiB);
  ASSERT_TRUE(block.has_value());
  EXPECT_EQ(block->data, Address(1));
  block = cache.Take(60 * kMiB);
  ASSERT_TRUE(block.has_value());
  EXPECT_EQ(block->data, Address(3));
  EXPECT_EQ(cache.kept_bytes(), 0u);
  EXPECT_EQ(cache.kept_blocks(), 0u);
  // Larger than every block: none.
  EXPECT_TRUE(cache.Keep({Address(4), 4 * kMiB}).empty());
  EXPECT_FALSE(cache.Take(5 * kMiB).has_value());
}

TEST(FreedBlockCacheTest, DropsTheOldestBlocksPastTheCapacity) {
  FreedBlockCache cache(10 * kMiB);
  EXPECT_TRUE(cache.Keep({Address(1), 4 * kMiB}).empty());
  EXPECT_TRUE(cache.Keep({Address(2), 2 * kMiB}).empty());
  EXPECT_TRUE(cache.Keep({Address(3), 4 * kMiB}).empty());
  // 10 MiB kept; 4 more drops the oldest (1), which frees enough.
  std::vector<FreedBlockCache::Block> dropped = cache.Keep({Address(4), 4 * kMiB});
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].data, Address(1));
  EXPECT_EQ(dropped[0].bytes, 4 * kMiB);
  EXPECT_EQ(cache.kept_bytes(), 10 * kMiB);
  // 6 more drops 2 and 3 (the oldest two of 2, 3, 4), then fits.
  dropped = cache.Keep({Address(5), 6 * kMiB});
  ASSERT_EQ(dropped.size(), 2u);
  EXPECT_EQ(dropped[0].data, Address(2));
  EXPECT_EQ(dropped[1].data, Address(3));
  EXPECT_EQ(cache.kept_bytes(), 10 * kMiB);
  EXPECT_EQ(cache.kept_blocks(), 2u);
  ExpectTakes(cache, 5 * kMiB, Address(5));
  ExpectTakes(cache, 3 * kMiB, Address(4));
}

TEST(FreedBlockCacheTest, ABlockLargerThanTheCapacityIsHandedBack) {
  FreedBlockCache cache(10 * kMiB);
  EXPECT_TRUE(cache.Keep({Address(1), 4 * kMiB}).empty());
  const std::vector<FreedBlockCache::Block> dropped = cache.Keep({Address(2), 12 * kMiB});
  ASSERT_EQ(dropped.size(), 1u);
  EXPECT_EQ(dropped[0].data, Address(2));
  // What was kept stays.
  EXPECT_EQ(cache.kept_bytes(), 4 * kMiB);

  FreedBlockCache none(0);
  EXPECT_EQ(none.Keep({Address(3), 2 * kMiB}).size(), 1u);
  EXPECT_EQ(none.kept_blocks(), 0u);
}

}  // namespace
}  // namespace docsparse
