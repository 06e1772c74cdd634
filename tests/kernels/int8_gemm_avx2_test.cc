// kernels/int8_gemm_avx2: the VPMADDUBSW product against an exact integer
// product of the same quantized rows and weights (row-major, packed by the
// test's own loop), scaled in double; on row counts that take every pass and
// tail, depths that end in part of a group of four, channel counts that end
// in part of a panel, rows that span several of the kernel's row blocks,
// and panels split between callers. And the quantizer's q + 128 form
// (int8_rows.h), dispatched against portable, which the product reads.
#include "kernels/int8_gemm_avx2.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <random>
#include <vector>

#include "kernels/cpu_features.h"
#include "kernels/int8_rows.h"

namespace docsparse {
namespace {

struct Case {
  int64_t rows;
  int64_t in;
  int64_t out;
};

struct Problem {
  Case shape;
  std::vector<int8_t> w;          // [out, in], |w| <= 63
  std::vector<uint8_t> x;         // [rows, in] q + 128, and 3 bytes more
  std::vector<float> row_scales;  // [rows]
  std::vector<float> channel_scales;
  std::vector<float> bias;
};

Problem MakeProblem(const Case& c, std::mt19937& rng) {
  std::uniform_int_distribution<int> weight(-63, 63), value(-127, 127);
  std::uniform_real_distribution<float> scale(0.001f, 0.02f), offset(-1.0f, 1.0f);
  Problem p{c,
            std::vector<int8_t>(c.out * c.in),
            std::vector<uint8_t>(c.rows * c.in + 3),
            std::vector<float>(c.rows),
            std::vector<float>(c.out),
            std::vector<float>(c.out)};
  for (int8_t& v : p.w) v = static_cast<int8_t>(weight(rng));
  for (uint8_t& v : p.x) v = static_cast<uint8_t>(value(rng) + 128);
  // The extreme rows every pair of products can meet: all 255 against 63s.
  if (c.rows > 1) std::fill(p.x.begin() + c.in, p.x.begin() + 2 * c.in, 255);
  if (c.out > 1) std::fill(p.w.begin() + c.in, p.w.begin() + 2 * c.in, 63);
  for (float& s : p.row_scales) s = scale(rng);
  for (float& s : p.channel_scales) s = scale(rng);
  for (float& b : p.bias) b = offset(rng);
  return p;
}

// Worst |got − want| / (|sum|·scales + |bias| + 1e-3) over channels [begin, end).
double MaxRelativeError(const Problem& p, const std::vector<float>& y, bool with_bias,
                        int64_t begin, int64_t end) {
  const Case& c = p.shape;
  double worst = 0;
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int64_t n = begin; n < end; ++n) {
      int64_t sum = 0;
      for (int64_t k = 0; k < c.in; ++k) {
        sum += int64_t{p.w[n * c.in + k]} * (int64_t{p.x[r * c.in + k]} - 128);
      }
      const double scaled = static_cast<double>(sum) * p.row_scales[r] * p.channel_scales[n];
      const double bias = with_bias ? p.bias[n] : 0.0;
      const double magnitude = std::abs(scaled) + std::abs(bias) + 1e-3;
      worst = std::max(worst, std::abs(scaled + bias - y[r * c.out + n]) / magnitude);
    }
  }
  return worst;
}

TEST(Int8GemmAvx2Test, MatchesTheExactIntegerProductOnEveryShape) {
  if (!HostCpuFeatures().avx2_fma) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(47);
  for (const Case c :
       {Case{1, 64, 16}, Case{2, 67, 13}, Case{3, 8, 5}, Case{4, 96, 33}, Case{5, 103, 7},
        Case{6, 1, 16}, Case{7, 3, 9}, Case{8, 50, 32}, Case{9, 17, 49}, Case{13, 384, 40},
        Case{37, 5, 17}, Case{300, 1536, 24}, Case{261, 1538, 19}}) {
    const Problem p = MakeProblem(c, rng);
    const Int8GemmWeights packed = PackInt8GemmWeights(p.w.data(), c.out, c.in);
    for (const bool with_bias : {true, false}) {
      std::vector<float> y(c.rows * c.out, std::nanf(""));
      const Int8GemmParams params{&packed,
                                  p.x.data(),
                                  p.row_scales.data(),
                                  p.channel_scales.data(),
                                  with_bias ? p.bias.data() : nullptr,
                                  y.data(),
                                  c.rows};
      // Two callers, as two threads take the panels.
      const int64_t middle = packed.panels() / 2;
      Int8GemmAvx2(params, 0, middle);
      Int8GemmAvx2(params, middle, packed.panels());
      EXPECT_LT(MaxRelativeError(p, y, with_bias, 0, c.out), 1e-6)
          << c.rows << " x " << c.in << " -> " << c.out << (with_bias ? " with bias" : "");
    }
  }
}

TEST(Int8GemmAvx2Test, WritesOnlyItsPanelsChannels) {
  if (!HostCpuFeatures().avx2_fma) GTEST_SKIP() << "no AVX2 on this CPU";
  std::mt19937 rng(5);
  const Case c{11, 40, 50};  // panels of channels 0-15, 16-31, 32-47, 48-49
  const Problem p = MakeProblem(c, rng);
  const Int8GemmWeights packed = PackInt8GemmWeights(p.w.data(), c.out, c.in);
  std::vector<float> y(c.rows * c.out, -7.0f);
  const Int8GemmParams params{
      &packed,  p.x.data(), p.row_scales.data(), p.channel_scales.data(), p.bias.data(),
      y.data(), c.rows};
  Int8GemmAvx2(params, 1, 3);
  EXPECT_LT(MaxRelativeError(p, y, true, 16, 48), 1e-6);
  for (int64_t r = 0; r < c.rows; ++r) {
    for (int64_t n : {0, 15, 48, 49}) EXPECT_EQ(y[r * c.out + n], -7.0f) << r << ", " << n;
  }
}

TEST(Int8GemmAvx2Test, QuantizerPlus128IsTheSignedCodeShifted) {
  std::mt19937 rng(9);
  std::normal_distribution<float> normal(0.0f, 2.0f);
  for (const int64_t width : {1, 7, 31, 32, 33, 100, 384}) {
    const int64_t rows = 5;
    std::vector<float> x(rows * width);
    for (float& v : x) v = normal(rng);
    std::fill(x.begin(), x.begin() + width, 0.0f);  // a row of zeros
    std::vector<int8_t> signed_q(x.size()), dispatched(x.size()), portable(x.size());
    std::vector<float> scales(rows), dispatched_scales(rows), portable_scales(rows);
    QuantizeRowsInt8({x.data(), false, signed_q.data(), scales.data(), width}, 0, rows);
    QuantizeRowsParams plus{x.data(), false, dispatched.data(), dispatched_scales.data(), width};
    plus.plus_128 = true;
    QuantizeRowsInt8(plus, 0, rows);
    plus.q = portable.data();
    plus.scales = portable_scales.data();
    QuantizeRowsInt8Portable(plus, 0, rows);
    EXPECT_EQ(dispatched, portable) << width;
    EXPECT_EQ(dispatched_scales, scales) << width;
    EXPECT_EQ(portable_scales, scales) << width;
    for (size_t i = 0; i < x.size(); ++i) {
      ASSERT_EQ(static_cast<uint8_t>(dispatched[i]), signed_q[i] + 128) << width << ", " << i;
    }
  }
}

}  // namespace
}  // namespace docsparse
