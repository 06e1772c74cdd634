#include "model/attention/mask_map.h"

#include <gtest/gtest.h>

namespace docsparse {
namespace {

TEST(MaskMapTest, OneWindowIsDenseEverywhere) {
  int cells = 0;
  const std::vector<float> map = DenseWindowsMaskMap({100}, 8, &cells);
  ASSERT_EQ(cells, 8);
  for (float d : map) EXPECT_FLOAT_EQ(d, 1.0f);
}

TEST(MaskMapTest, WindowsGiveABlockDiagonal) {
  int cells = 0;
  // Two windows of 4 tokens over 4 cells of 2 tokens each.
  const std::vector<float> map = DenseWindowsMaskMap({4, 4}, 4, &cells);
  ASSERT_EQ(cells, 4);
  const std::vector<float> want = {1, 1, 0, 0, 1, 1, 0, 0, 0, 0, 1, 1, 0, 0, 1, 1};
  EXPECT_EQ(map, want);
}

TEST(MaskMapTest, CellsStraddlingWindowsArePartlyDense) {
  int cells = 0;
  // Windows of 3 and 3 tokens, 2 cells of 3 tokens... use 3 cells of 2 tokens.
  const std::vector<float> map = DenseWindowsMaskMap({3, 3}, 3, &cells);
  ASSERT_EQ(cells, 3);
  // Cell 1 holds token 2 (window 0) and token 3 (window 1): with itself,
  // 2 of 4 pairs share a window.
  EXPECT_FLOAT_EQ(map[1 * 3 + 1], 0.5f);
  EXPECT_FLOAT_EQ(map[0 * 3 + 2], 0.0f);
  EXPECT_FLOAT_EQ(map[0 * 3 + 1], 0.5f);  // tokens {0,1} x {2,3}: pairs (0,2),(1,2)
}

TEST(MaskMapTest, FewerTokensThanResolution) {
  int cells = 0;
  const std::vector<float> map = DenseWindowsMaskMap({5}, 64, &cells);
  EXPECT_EQ(cells, 5);
  EXPECT_EQ(map.size(), 25u);
}

}  // namespace
}  // namespace docsparse
