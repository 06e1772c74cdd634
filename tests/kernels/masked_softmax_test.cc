#include "kernels/masked_softmax.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/bf16.h"
#include "kernels/cpu_features.h"

namespace docsparse {
namespace {

struct Case {
  int64_t items, rows_per_item, cols;
  std::vector<int64_t> valid;
};

using Kernel = void (*)(const MaskedSoftmaxParams&, int64_t, int64_t);

// Runs `kernel` in place on random scores and checks every row against a
// double-precision softmax of the same bf16 scores.
void CheckAgainstReference(const Case& c, Kernel kernel, const char* name) {
  std::mt19937 rng(static_cast<uint32_t>(c.cols * 131 + c.rows_per_item));
  std::normal_distribution<float> normal(0.0f, 4.0f);
  const int64_t rows = c.items * c.rows_per_item;
  std::vector<uint16_t> scores(static_cast<size_t>(rows * c.cols));
  for (uint16_t& s : scores) s = FloatToBf16(normal(rng));
  const std::vector<uint16_t> original = scores;
  const float scale = 0.35f;
  const MaskedSoftmaxParams params{scores.data(),   scores.data(), c.valid.data(),
                                   c.rows_per_item, c.cols,        scale};
  // Two ranges, as two threads would call it.
  kernel(params, 0, rows / 2);
  kernel(params, rows / 2, rows);
  for (int64_t row = 0; row < rows; ++row) {
    const int64_t valid = c.valid[row / c.rows_per_item];
    const uint16_t* in = original.data() + row * c.cols;
    const uint16_t* out = scores.data() + row * c.cols;
    double max = -1e30, sum = 0;
    for (int64_t k = 0; k < valid; ++k) max = std::max(max, double{Bf16ToFloat(in[k])} * scale);
    for (int64_t k = 0; k < valid; ++k) sum += std::exp(double{Bf16ToFloat(in[k])} * scale - max);
    for (int64_t k = 0; k < c.cols; ++k) {
      if (k >= valid) {
        ASSERT_EQ(out[k], 0) << name << " row " << row << " masked col " << k;
        continue;
      }
      const double want = std::exp(double{Bf16ToFloat(in[k])} * scale - max) / sum;
      // One bf16 rounding of the probability: relative 2^-8, plus tiny slack.
      ASSERT_NEAR(Bf16ToFloat(out[k]), want, want * (1.0 / 256) + 1e-7)
          << name << " row " << row << " col " << k << " of " << c.cols;
    }
  }
}

const std::vector<Case>& Cases() {
  static const std::vector<Case> cases = {
      {1, 1, 1, {1}},           // one key
      {2, 3, 37, {37, 1}},      // odd width, a row with one valid key
      {3, 4, 16, {16, 9, 15}},  // exactly one vector, partial masks
      {2, 2, 513, {513, 300}},  // past a multiple of 16
      {1, 2, 5000, {4999}},     // wider than the stack scratch
  };
  return cases;
}

TEST(MaskedSoftmaxTest, PortableMatchesDoublePrecisionSoftmax) {
  for (const Case& c : Cases()) CheckAgainstReference(c, MaskedSoftmaxBf16RowsPortable, "portable");
}

TEST(MaskedSoftmaxTest, DispatchedMatchesDoublePrecisionSoftmax) {
  if (!HostCpuFeatures().avx512bw_vl) {
    GTEST_SKIP() << "no AVX-512 on this CPU: the dispatched kernel is the portable one";
  }
  for (const Case& c : Cases()) CheckAgainstReference(c, MaskedSoftmaxBf16Rows, "avx512");
}

}  // namespace
}  // namespace docsparse
