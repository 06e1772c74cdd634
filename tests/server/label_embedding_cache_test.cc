#include "server/label_embedding_cache.h"

#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

namespace docsparse {
namespace {

// A 4-float embedding whose values say which label it is.
at::Tensor Row(float value) { return at::full({4}, value, at::kFloat); }

class LabelEmbeddingCacheTest : public ::testing::Test {
 protected:
  // Room for exactly three one-letter labels.
  static constexpr size_t kEntry = 2 * 1 + 4 * 4 + LabelEmbeddingCache::kEntryOverheadBytes;
  c10::InferenceMode inference_mode_;
};

TEST_F(LabelEmbeddingCacheTest, CountsHitsAndMissesAndReturnsCachedRows) {
  LabelEmbeddingCache cache(3 * kEntry);
  std::vector<at::Tensor> rows = cache.Lookup({"a", "b"});
  EXPECT_FALSE(rows[0].defined());
  EXPECT_FALSE(rows[1].defined());
  cache.Insert("a", Row(1));
  rows = cache.Lookup({"a", "b"});
  ASSERT_TRUE(rows[0].defined());
  EXPECT_EQ(rows[0][0].item<float>(), 1);
  EXPECT_FALSE(rows[1].defined());
  const LabelCacheStats stats = cache.stats();
  EXPECT_EQ(stats.hits, 1u);
  EXPECT_EQ(stats.misses, 3u);
  EXPECT_EQ(stats.entries, 1u);
  EXPECT_EQ(stats.bytes, kEntry);
}

TEST_F(LabelEmbeddingCacheTest, EvictsTheLeastRecentlyUsedToStayWithinItsBytes) {
  LabelEmbeddingCache cache(3 * kEntry);
  cache.Insert("a", Row(1));
  cache.Insert("b", Row(2));
  cache.Insert("c", Row(3));
  cache.Lookup({"a"});        // b is now the least recently used
  cache.Insert("d", Row(4));  // evicts b
  std::vector<at::Tensor> rows = cache.Lookup({"a", "b", "c", "d"});
  EXPECT_TRUE(rows[0].defined());
  EXPECT_FALSE(rows[1].defined());
  EXPECT_TRUE(rows[2].defined());
  EXPECT_TRUE(rows[3].defined());
  const LabelCacheStats stats = cache.stats();
  EXPECT_EQ(stats.evictions, 1u);
  EXPECT_EQ(stats.entries, 3u);
  EXPECT_LE(stats.bytes, 3 * kEntry);
}

// The old cache stopped admitting labels once full: a label set used over
// and over was recomputed every time. Now the labels in use stay.
TEST_F(LabelEmbeddingCacheTest, ARepeatedLabelSetStaysCachedAfterManyOthers) {
  LabelEmbeddingCache cache(3 * kEntry);
  for (int i = 0; i < 100; ++i)
    cache.Insert(std::string(1, static_cast<char>('A' + i % 26)), Row(i));
  cache.Insert("x", Row(7));
  cache.Insert("y", Row(8));
  for (const at::Tensor& row : cache.Lookup({"x", "y"})) EXPECT_TRUE(row.defined());
}

TEST_F(LabelEmbeddingCacheTest, RowsStayValidAfterEvictionAndInsertKeepsTheFirstEmbedding) {
  LabelEmbeddingCache cache(kEntry);
  cache.Insert("a", Row(1));
  const at::Tensor held = cache.Lookup({"a"})[0];
  cache.Insert("a", Row(9));  // already cached: kept as it was
  EXPECT_EQ(cache.Lookup({"a"})[0][0].item<float>(), 1);
  cache.Insert("b", Row(2));  // evicts a
  EXPECT_FALSE(cache.Lookup({"a"})[0].defined());
  EXPECT_EQ(held[0].item<float>(), 1);
}

TEST_F(LabelEmbeddingCacheTest, AnEntryLargerThanTheCacheIsNotKept) {
  LabelEmbeddingCache cache(kEntry);
  cache.Insert(std::string(1000, 'l'), Row(1));
  EXPECT_EQ(cache.stats().entries, 0u);
  EXPECT_EQ(cache.stats().bytes, 0u);
}

// The cache copies what it keeps: a row of a batch's output stays as it
// was however the batch's tensor is reused.
TEST_F(LabelEmbeddingCacheTest, InsertCopiesTheEmbedding) {
  LabelEmbeddingCache cache(kEntry);
  at::Tensor batch = at::ones({2, 4}, at::kFloat);
  cache.Insert("a", batch[1]);
  batch.fill_(5);
  EXPECT_EQ(cache.Lookup({"a"})[0][0].item<float>(), 1);
}

}  // namespace
}  // namespace docsparse
