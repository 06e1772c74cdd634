#include "kernels/row_norms.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/bf16.h"

namespace docsparse {
namespace {

// Against norms in double, for head sizes the vector path takes (32, 64)
// and ones it leaves to the scalar loop (20, 48 is a multiple of 16 too),
// rows apart by more than their length, as heads in a projection's output.
TEST(RowNormsTest, MatchNormsInDoubleForEveryRowLengthAndStride) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0, 2);
  for (const int64_t d : {20, 32, 48, 64}) {
    const int64_t count = 37, stride = 3 * d + 16;
    std::vector<uint16_t> rows(static_cast<size_t>(count * stride));
    for (uint16_t& bits : rows) bits = FloatToBf16(normal(rng));
    std::vector<float> out(count, -1.0f);
    Bf16RowNorms(rows.data(), count, stride, d, out.data());
    for (int64_t i = 0; i < count; ++i) {
      double sum = 0;
      for (int64_t e = 0; e < d; ++e) {
        const double value = Bf16ToFloat(rows[i * stride + e]);
        sum += value * value;
      }
      EXPECT_NEAR(out[i], std::sqrt(sum), 1e-5 * std::sqrt(sum)) << "d " << d << " row " << i;
    }
  }
}

// Head-major norms over tokens are Bf16RowNorms' values bit for bit: token
// counts around the 16 reduced together, heads apart within a token's row
// (as in the projection's output), head sizes of both paths.
TEST(RowNormsTest, HeadNormsAreEachRowsNormBitForBit) {
  std::mt19937 rng(4);
  std::normal_distribution<float> normal(0, 2);
  for (const int64_t d : {20, 32, 64}) {
    for (const int64_t tokens : {1, 15, 16, 17, 40, 128}) {
      const int64_t heads = 3, head_stride = d + 8, token_stride = heads * head_stride + 16;
      std::vector<uint16_t> rows(static_cast<size_t>(tokens * token_stride));
      for (uint16_t& bits : rows) bits = FloatToBf16(normal(rng));
      std::vector<float> out(static_cast<size_t>(heads * tokens), -1.0f);
      Bf16HeadNorms(rows.data(), tokens, token_stride, heads, head_stride, d, out.data());
      for (int64_t h = 0; h < heads; ++h) {
        for (int64_t t = 0; t < tokens; ++t) {
          float expected = -1;
          Bf16RowNorms(rows.data() + t * token_stride + h * head_stride, 1, 0, d, &expected);
          EXPECT_EQ(out[h * tokens + t], expected) << "d " << d << " head " << h << " token " << t;
        }
      }
    }
  }
}

}  // namespace
}  // namespace docsparse
