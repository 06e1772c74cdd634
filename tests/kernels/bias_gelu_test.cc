#include "kernels/bias_gelu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/bf16.h"

namespace docsparse {
namespace {

using RowsFunction = void (*)(const BiasGeluParams&, int64_t, int64_t);

// Inputs over the range GELU bends in (and its tails), against GELU in double
// on the same bf16 inputs: only the final rounding to bf16 (2^-9 relative)
// and the erf/tanh approximations (< 1e-6) remain.
void ExpectMatchesReference(RowsFunction rows_function, bool tanh_form, int64_t width) {
  const int64_t rows = 3;
  std::mt19937 rng(static_cast<uint32_t>(width) + (tanh_form ? 1 : 0));
  std::normal_distribution<float> normal(0, 3);
  std::vector<uint16_t> x, bias;
  for (int64_t i = 0; i < rows * width; ++i) x.push_back(FloatToBf16(normal(rng)));
  for (int64_t i = 0; i < width; ++i) bias.push_back(FloatToBf16(0.5f * normal(rng)));
  std::vector<uint16_t> got = x;
  rows_function(BiasGeluParams{got.data(), bias.data(), width, tanh_form}, 0, rows);
  for (int64_t i = 0; i < rows * width; ++i) {
    const double v = static_cast<double>(Bf16ToFloat(x[i])) + Bf16ToFloat(bias[i % width]);
    const double inner = tanh_form ? std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))
                                   : std::erf(v / std::sqrt(2.0));
    const double want = 0.5 * v * (1 + inner);
    ASSERT_NEAR(Bf16ToFloat(got[i]), want, std::fabs(want) * 0.004 + 1e-5)
        << "v " << v << " (tanh form " << tanh_form << ", width " << width << ")";
  }
}

TEST(BiasGeluTest, DispatchedAndPortableMatchGeluInDoubleOnOddWidths) {
  for (bool tanh_form : {false, true}) {
    for (int64_t width : {1536, 37, 5}) {
      ExpectMatchesReference(BiasGeluBf16Rows, tanh_form, width);
      ExpectMatchesReference(BiasGeluBf16RowsPortable, tanh_form, width);
    }
  }
}

}  // namespace
}  // namespace docsparse
