// kernels/packed_linear: products over any row count, run as chunks of a few
// compiled row counts, against a double product written out here; and the
// compiled products stay bounded however many row counts a server sees.
#include "kernels/packed_linear.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <random>
#include <vector>

namespace docsparse {
namespace {

struct Problem {
  int64_t in = 48;
  int64_t out = 40;
  std::vector<float> weight;  // [out, in]
  std::vector<float> bias;    // [out]
};

Problem MakeProblem(std::mt19937& rng) {
  Problem p;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  p.weight.resize(p.in * p.out);
  for (float& w : p.weight) w = 0.1f * normal(rng);
  p.bias.resize(p.out);
  for (float& b : p.bias) b = normal(rng);
  return p;
}

// Max |y - (x·Wᵀ + b)| over rows, the product in double.
double MaxError(const Problem& p, const std::vector<float>& x, const std::vector<float>& y,
                int64_t rows) {
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < p.out; ++o) {
      double sum = p.bias[o];
      for (int64_t i = 0; i < p.in; ++i) {
        sum += static_cast<double>(x[r * p.in + i]) * p.weight[o * p.in + i];
      }
      worst = std::max(worst, std::abs(sum - y[r * p.out + o]));
    }
  }
  return worst;
}

TEST(PackedLinearTest, EveryRowCountMatchesTheDoubleProduct) {
  std::mt19937 rng(11);
  const Problem p = MakeProblem(rng);
  const auto linear =
      PackedLinear::Create(p.weight.data(), p.bias.data(), p.out, p.in, LinearElement::kFp32);
  ASSERT_NE(linear, nullptr);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Below, at and across the chunk sizes (64 ... 2,048): one chunk, several,
  // and a remainder of every kind.
  for (int64_t rows : {1, 63, 64, 65, 127, 700, 1000, 2047, 2048, 2049, 4097, 6000}) {
    std::vector<float> x(rows * p.in), y(rows * p.out, NAN);
    for (float& v : x) v = normal(rng);
    linear->Run(x.data(), rows, y.data());
    EXPECT_LT(MaxError(p, x, y, rows), 1e-4) << rows << " rows";
  }
}

TEST(PackedLinearTest, CompiledProductsStayBoundedOverManyRowCounts) {
  std::mt19937 rng(12);
  const Problem p = MakeProblem(rng);
  for (LinearWeights weights : {LinearWeights::kElementType, LinearWeights::kInt8}) {
    const auto linear = PackedLinear::Create(p.weight.data(), p.bias.data(), p.out, p.in,
                                             LinearElement::kFp32, weights);
    ASSERT_NE(linear, nullptr);
    std::uniform_int_distribution<int64_t> length(1, 5000);
    std::vector<float> x(5000 * p.in, 0.5f), y(5000 * p.out);
    for (int call = 0; call < 300; ++call) linear->Run(x.data(), length(rng), y.data());
    for (int64_t rows = 1; rows <= 200; ++rows) linear->Run(x.data(), rows, y.data());
    // 63 exact remainders and the chunks 64, 128, ..., 2,048.
    EXPECT_LE(linear->compiled_row_counts(), 69u);
    EXPECT_GE(linear->compiled_row_counts(), 63u);
  }
}

}  // namespace
}  // namespace docsparse
