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

}  // namespace
}  // namespace docsparse
