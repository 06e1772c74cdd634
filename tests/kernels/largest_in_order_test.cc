#include "kernels/largest_in_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

namespace docsparse {
namespace {

// The definition: positions sorted by (key, position), the last `keep`.
std::vector<int32_t> BySorting(const std::vector<uint32_t>& keys, int32_t keep) {
  std::vector<int32_t> order(keys.size());
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(),
                   [&keys](int32_t a, int32_t b) { return keys[a] < keys[b]; });
  return {order.end() - keep, order.end()};
}

// Lengths around the 16-key blocks and past the counting limit (512); keys
// from a small range (many ties, which go by position) and from the whole
// range (norms' bits, top bit included).
TEST(LargestInOrderTest, KeepsTheLargestInAscendingOrderWithTiesByPosition) {
  std::mt19937 rng(5);
  for (const int32_t count : {1, 2, 15, 16, 17, 31, 128, 130, 512, 600}) {
    for (const uint32_t range : {4u, 0xFFFFFFFFu}) {
      std::uniform_int_distribution<uint32_t> draw(0, range);
      std::vector<uint32_t> keys(static_cast<size_t>(count));
      for (uint32_t& key : keys) key = draw(rng);
      for (const int32_t keep : {0, 1, count / 2, count - 1, count}) {
        if (keep < 0) continue;
        const std::vector<int32_t> expected = BySorting(keys, keep);
        std::vector<int32_t> kept(static_cast<size_t>(keep), -1);
        LargestInOrder(keys.data(), count, keep, kept.data());
        EXPECT_EQ(kept, expected) << "count " << count << " range " << range << " keep " << keep;
        std::fill(kept.begin(), kept.end(), -1);
        LargestInOrderPortable(keys.data(), count, keep, kept.data());
        EXPECT_EQ(kept, expected) << "portable: count " << count << " keep " << keep;
      }
    }
  }
}

TEST(LargestInOrderTest, EqualKeysKeepTheLastPositions) {
  const std::vector<uint32_t> keys(40, 7u);
  std::vector<int32_t> kept(10);
  LargestInOrder(keys.data(), 40, 10, kept.data());
  std::vector<int32_t> expected(10);
  std::iota(expected.begin(), expected.end(), 30);
  EXPECT_EQ(kept, expected);
}

}  // namespace
}  // namespace docsparse
