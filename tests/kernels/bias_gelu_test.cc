#include "kernels/bias_gelu.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/bf16.h"

namespace docsparse {
namespace {

template <typename Element>
using RowsFunction = void (*)(const BiasGeluRowsParams<Element>&, int64_t, int64_t);

double GeluInDouble(double v, bool tanh_form) {
  const double inner = tanh_form ? std::tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * v * v * v))
                                 : std::erf(v / std::sqrt(2.0));
  return 0.5 * v * (1 + inner);
}

// Inputs over the range GELU bends in (and its tails), against GELU in double
// on the same bf16 inputs: only the final rounding to bf16 (2^-9 relative)
// and the erf/tanh approximations (< 1e-6) remain.
void ExpectBf16MatchesReference(RowsFunction<uint16_t> rows_function, bool tanh_form,
                                int64_t width) {
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
    const double want = GeluInDouble(v, tanh_form);
    ASSERT_NEAR(Bf16ToFloat(got[i]), want, std::fabs(want) * 0.004 + 1e-5)
        << "v " << v << " (tanh form " << tanh_form << ", width " << width << ")";
  }
}

// fp32 keeps the approximation's own error: the tail table's (< 1e-6 of v,
// absolute, in F) and fp32 rounding. Inputs include the table's edges (0,
// 1/4 steps, 8) and values past it.
void ExpectFp32MatchesReference(RowsFunction<float> rows_function, bool tanh_form, int64_t width) {
  const int64_t rows = 3;
  std::mt19937 rng(static_cast<uint32_t>(width) + (tanh_form ? 7 : 5));
  std::normal_distribution<float> normal(0, 3);
  std::vector<float> x, bias;
  for (int64_t i = 0; i < rows * width; ++i) {
    x.push_back(i % 7 == 0 ? static_cast<float>(i % 97) * 0.25f - 12.0f : normal(rng));
  }
  for (int64_t i = 0; i < width; ++i) bias.push_back(i % 3 == 0 ? 0.0f : 0.5f * normal(rng));
  std::vector<float> got = x;
  rows_function(BiasGeluFp32Params{got.data(), bias.data(), width, tanh_form}, 0, rows);
  for (int64_t i = 0; i < rows * width; ++i) {
    const double v = static_cast<double>(x[i] + bias[i % width]);
    const double want = GeluInDouble(v, tanh_form);
    ASSERT_NEAR(got[i], want, 1e-6 * std::fabs(v) + 1e-6 * std::fabs(want) + 1e-7)
        << "v " << v << " (tanh form " << tanh_form << ", width " << width << ")";
  }
}

TEST(BiasGeluTest, DispatchedAndPortableMatchGeluInDoubleOnOddWidths) {
  for (bool tanh_form : {false, true}) {
    for (int64_t width : {1536, 37, 5}) {
      ExpectBf16MatchesReference(BiasGeluBf16Rows, tanh_form, width);
      ExpectBf16MatchesReference(BiasGeluBf16RowsPortable, tanh_form, width);
    }
  }
}

TEST(BiasGeluTest, Fp32DispatchedAndPortableMatchGeluInDouble) {
  for (bool tanh_form : {false, true}) {
    for (int64_t width : {1536, 37, 5}) {
      ExpectFp32MatchesReference(BiasGeluFp32Rows, tanh_form, width);
      ExpectFp32MatchesReference(BiasGeluFp32RowsPortable, tanh_form, width);
    }
  }
}

}  // namespace
}  // namespace docsparse
