// kernels/int8_weight_gemv: the dispatched kernel (AVX2 where the CPU has it)
// and the portable one against a double product of the same int8 weights
// (row-major, packed into panels for the kernels), over row counts that take
// every pass of up to six rows, depths of every size, and channel counts
// that end in a part of a panel.
#include "kernels/int8_weight_gemv.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

namespace docsparse {
namespace {

struct Case {
  int64_t rows;
  int64_t in;
  int64_t out;
};

// `w`: the row-major weights that p's panels were packed from.
double MaxRelativeError(const Int8WeightGemvParams& p, const std::vector<int8_t>& w, int64_t begin,
                        int64_t end) {
  double worst = 0;
  for (int64_t r = 0; r < p.rows; ++r) {
    for (int64_t n = begin; n < end; ++n) {
      double sum = 0, magnitude = 0;
      for (int64_t k = 0; k < p.in_features; ++k) {
        const double term =
            static_cast<double>(w[n * p.in_features + k]) * p.x[r * p.in_features + k];
        sum += term;
        magnitude += std::abs(term);
      }
      const double want = sum * p.channel_scales[n] + (p.bias ? p.bias[n] : 0.0);
      const double scale = magnitude * p.channel_scales[n] + 1.0;
      worst = std::max(worst, std::abs(want - p.y[r * p.out_features + n]) / scale);
    }
  }
  return worst;
}

TEST(Int8WeightGemvTest, MatchesTheDoubleProductOnEveryShape) {
  std::mt19937 rng(31);
  std::uniform_int_distribution<int> weight(-63, 63);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (const Case c : {Case{1, 64, 40}, Case{2, 67, 13}, Case{3, 8, 5}, Case{4, 96, 33},
                       Case{5, 103, 7}, Case{6, 1, 16}, Case{7, 3, 9}, Case{8, 50, 32},
                       Case{9, 17, 49}, Case{11, 33, 17}, Case{16, 768, 70}}) {
    for (const bool with_bias : {true, false}) {
      std::vector<int8_t> w(c.out * c.in);
      for (int8_t& v : w) v = static_cast<int8_t>(weight(rng));
      std::vector<float> scales(c.out), bias(c.out), x(c.rows * c.in);
      for (float& s : scales) s = 0.01f * (1.0f + std::abs(normal(rng)));
      for (float& b : bias) b = normal(rng);
      for (float& v : x) v = normal(rng);
      const std::vector<int8_t> packed = PackInt8GemvWeights(w.data(), c.out, c.in);
      for (const bool portable : {false, true}) {
        std::vector<float> y(c.rows * c.out, NAN);
        const Int8WeightGemvParams p{
            packed.data(), scales.data(), with_bias ? bias.data() : nullptr,
            x.data(),      y.data(),      c.rows,
            c.in,          c.out};
        // Two ranges split at a panel, as two threads would take them; every
        // channel written.
        const int64_t split = std::min(c.out, kInt8GemvPanel);
        for (const auto& [begin, end] : {std::pair{int64_t{0}, split}, std::pair{split, c.out}}) {
          if (portable) {
            Int8WeightGemvPortable(p, begin, end);
          } else {
            Int8WeightGemv(p, begin, end);
          }
        }
        EXPECT_LT(MaxRelativeError(p, w, 0, c.out), 1e-5)
            << c.rows << " x " << c.in << " x " << c.out << (portable ? " portable" : "");
        EXPECT_TRUE(std::none_of(y.begin(), y.end(), [](float v) { return std::isnan(v); }));
      }
    }
  }
}

TEST(Int8WeightGemvTest, AnEmptyRangeWritesNothing) {
  const std::vector<int8_t> w = PackInt8GemvWeights(std::vector<int8_t>(4 * 8, 1).data(), 4, 8);
  const std::vector<float> scales(4, 1.0f), x(8, 1.0f);
  std::vector<float> y(4, -1.0f);
  const Int8WeightGemvParams p{w.data(), scales.data(), nullptr, x.data(), y.data(), 1, 8, 4};
  Int8WeightGemv(p, 0, 0);
  EXPECT_EQ(y, std::vector<float>(4, -1.0f));
  Int8WeightGemv(p, 0, 4);
  EXPECT_EQ(y, std::vector<float>(4, 8.0f));
}

}  // namespace
}  // namespace docsparse
