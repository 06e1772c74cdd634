#include "kernels/residual_layer_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/bf16.h"

namespace docsparse {
namespace {

struct Case {
  int64_t rows, width;
  std::vector<uint16_t> x, residual;
  std::vector<float> gamma, beta;
};

// Rows with a large common offset (1000 + noise), where a one-pass variance
// E[v²] − E[v]² in fp32 would cancel to garbage.
Case MakeCase(int64_t rows, int64_t width, uint32_t seed) {
  Case c{rows, width, {}, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  for (int64_t i = 0; i < rows * width; ++i) {
    c.x.push_back(FloatToBf16(1000.0f + 4 * normal(rng)));
    c.residual.push_back(FloatToBf16(normal(rng)));
  }
  for (int64_t i = 0; i < width; ++i) {
    c.gamma.push_back(1 + 0.1f * normal(rng));
    c.beta.push_back(0.1f * normal(rng));
  }
  return c;
}

// LayerNorm(x + residual) in double from the same bf16 inputs.
std::vector<double> Reference(const Case& c, bool with_residual, double eps) {
  std::vector<double> out;
  for (int64_t r = 0; r < c.rows; ++r) {
    std::vector<double> v;
    double mean = 0;
    for (int64_t i = 0; i < c.width; ++i) {
      double value = Bf16ToFloat(c.x[r * c.width + i]);
      if (with_residual) value += Bf16ToFloat(c.residual[r * c.width + i]);
      v.push_back(value);
      mean += value / c.width;
    }
    double variance = 0;
    for (double value : v) variance += (value - mean) * (value - mean) / c.width;
    for (int64_t i = 0; i < c.width; ++i) {
      out.push_back((v[i] - mean) / std::sqrt(variance + eps) * c.gamma[i] + c.beta[i]);
    }
  }
  return out;
}

using RowsFunction = void (*)(const ResidualLayerNormParams&, int64_t, int64_t);

std::vector<uint16_t> Normalize(RowsFunction rows_function, const Case& c, bool with_residual) {
  std::vector<uint16_t> out(c.x.size());
  const ResidualLayerNormParams params{c.x.data(),     with_residual ? c.residual.data() : nullptr,
                                       c.gamma.data(), c.beta.data(),
                                       out.data(),     c.width,
                                       1e-12f};
  rows_function(params, 0, c.rows);
  return out;
}

void ExpectWithinBf16(const std::vector<uint16_t>& got, const std::vector<double>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    // bf16 keeps 8 bits: half a unit in the last place is 2^-9 relative;
    // the fp32 statistics add far less.
    ASSERT_NEAR(Bf16ToFloat(got[i]), want[i], std::fabs(want[i]) * 0.004 + 1e-3) << "at " << i;
  }
}

TEST(ResidualLayerNormTest, DispatchedAndPortableMatchDoubleReferenceOnOddWidths) {
  // MiniLM (384), BERT-base (768), odd widths that leave a partial vector,
  // and one wider than the stack scratch.
  for (int64_t width : {384, 768, 37, 5, 4100}) {
    const Case c = MakeCase(3, width, static_cast<uint32_t>(width));
    for (bool with_residual : {true, false}) {
      const std::vector<double> want = Reference(c, with_residual, 1e-12);
      ExpectWithinBf16(Normalize(ResidualLayerNormBf16Rows, c, with_residual), want);
      ExpectWithinBf16(Normalize(ResidualLayerNormBf16RowsPortable, c, with_residual), want);
    }
  }
}

TEST(ResidualLayerNormTest, OutputMayAliasAnInput) {
  Case c = MakeCase(4, 384, 9);
  const std::vector<double> want = Reference(c, true, 1e-12);
  const ResidualLayerNormParams params{c.x.data(), c.residual.data(), c.gamma.data(), c.beta.data(),
                                       c.x.data(), c.width,           1e-12f};
  ResidualLayerNormBf16Rows(params, 0, c.rows);
  ExpectWithinBf16(c.x, want);
}

// fp32 rows: the same offsets, no rounding of the inputs, and a tolerance
// fp32's own 24 bits allow.
TEST(ResidualLayerNormTest, Fp32DispatchedAndPortableMatchDoubleReference) {
  for (int64_t width : {384, 768, 37, 5, 4100}) {
    const Case c = MakeCase(3, width, static_cast<uint32_t>(width) + 1);
    std::vector<float> x(c.x.size()), residual(c.residual.size());
    for (size_t i = 0; i < x.size(); ++i) {
      x[i] = Bf16ToFloat(c.x[i]) + 1e-3f * static_cast<float>(i % 7);
      residual[i] = Bf16ToFloat(c.residual[i]);
    }
    for (bool with_residual : {true, false}) {
      // The reference from the fp32 values themselves.
      std::vector<double> want;
      for (int64_t r = 0; r < c.rows; ++r) {
        double mean = 0, variance = 0;
        std::vector<double> v(static_cast<size_t>(width));
        for (int64_t i = 0; i < width; ++i) {
          v[i] = static_cast<double>(x[r * width + i]) +
                 (with_residual ? static_cast<double>(residual[r * width + i]) : 0.0);
          mean += v[i] / static_cast<double>(width);
        }
        for (double value : v) variance += (value - mean) * (value - mean) / width;
        for (int64_t i = 0; i < width; ++i) {
          want.push_back((v[i] - mean) / std::sqrt(variance + 1e-12) * c.gamma[i] + c.beta[i]);
        }
      }
      for (auto rows_function : {ResidualLayerNormFp32Rows, ResidualLayerNormFp32RowsPortable}) {
        std::vector<float> out(x.size());
        const ResidualLayerNormFp32Params params{
            x.data(),       with_residual ? residual.data() : nullptr,
            c.gamma.data(), c.beta.data(),
            out.data(),     width,
            1e-12f};
        rows_function(params, 0, c.rows);
        for (size_t i = 0; i < out.size(); ++i) {
          // The sum x + residual rounds to fp32 (relative 2^-24 of ~1000),
          // which the normalisation scales up by 1 / standard deviation (~4).
          ASSERT_NEAR(out[i], want[i], 2e-4) << "width " << width << " at " << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace docsparse
