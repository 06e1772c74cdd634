// The int8 passes around a product (kernels/int8_rows.h): dispatched and
// portable give the same bytes, the quantization follows its definition
// (round(x · 127 / max|x|), a zero row stays zero), and scaling the sums
// back matches the double computation.
#include "kernels/int8_rows.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/bf16.h"

namespace docsparse {
namespace {

struct Rows {
  std::vector<float> fp32;
  std::vector<uint16_t> bf16;  // the same values, rounded
};

Rows RandomRows(int64_t rows, int64_t width, uint32_t seed) {
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 2);
  Rows r;
  for (int64_t i = 0; i < rows * width; ++i) {
    const float value = i / width == 1 ? 0.0f : normal(rng);  // row 1 is all zeros
    r.fp32.push_back(value);
    r.bf16.push_back(FloatToBf16(value));
  }
  return r;
}

TEST(Int8RowsTest, QuantizationFollowsItsDefinitionOnBothPaths) {
  for (int64_t width : {384, 37, 5}) {
    const int64_t rows = 4;
    const Rows x = RandomRows(rows, width, static_cast<uint32_t>(width));
    for (bool bf16 : {false, true}) {
      const void* data = bf16 ? static_cast<const void*>(x.bf16.data()) : x.fp32.data();
      std::vector<int8_t> q(rows * width), q_portable(rows * width);
      std::vector<float> scales(rows), scales_portable(rows);
      QuantizeRowsInt8({data, bf16, q.data(), scales.data(), width}, 0, rows);
      QuantizeRowsInt8Portable({data, bf16, q_portable.data(), scales_portable.data(), width}, 0,
                               rows);
      EXPECT_EQ(q, q_portable) << "width " << width << " bf16 " << bf16;
      EXPECT_EQ(scales, scales_portable);
      for (int64_t r = 0; r < rows; ++r) {
        double max_abs = 0;
        for (int64_t c = 0; c < width; ++c) {
          const double v = bf16 ? Bf16ToFloat(x.bf16[r * width + c]) : x.fp32[r * width + c];
          max_abs = std::max(max_abs, std::fabs(v));
        }
        EXPECT_NEAR(scales[r], max_abs / 127, 1e-6 * max_abs);
        for (int64_t c = 0; c < width; ++c) {
          const double v = bf16 ? Bf16ToFloat(x.bf16[r * width + c]) : x.fp32[r * width + c];
          const double want = max_abs > 0 ? std::nearbyint(v * 127 / max_abs) : 0;
          EXPECT_LE(std::fabs(q[r * width + c] - want), 1.0)
              << r << "," << c;  // ties may round apart
          EXPECT_LE(std::abs(static_cast<int>(q[r * width + c])), 127);
        }
      }
      EXPECT_EQ(scales[1], 0.0f);  // the zero row
    }
  }
}

TEST(Int8RowsTest, DequantizationMatchesDoubleOnBothPaths) {
  for (int64_t width : {1536, 37, 5}) {
    const int64_t rows = 3;
    std::mt19937 rng(static_cast<uint32_t>(width));
    std::uniform_int_distribution<int32_t> sum(-200000, 200000);
    std::uniform_real_distribution<float> positive(1e-4f, 1e-2f);
    std::vector<int32_t> sums(rows * width);
    for (int32_t& s : sums) s = sum(rng);
    std::vector<float> row_scales(rows), channel_scales(width), bias(width);
    for (float& s : row_scales) s = positive(rng);
    for (float& s : channel_scales) s = positive(rng);
    for (float& b : bias) b = positive(rng) * 100 - 0.5f;
    for (bool bf16 : {false, true}) {
      for (bool with_bias : {false, true}) {
        std::vector<float> y(rows * width), y_portable(rows * width);
        std::vector<uint16_t> y16(rows * width), y16_portable(rows * width);
        void* out = bf16 ? static_cast<void*>(y16.data()) : y.data();
        void* out_portable = bf16 ? static_cast<void*>(y16_portable.data()) : y_portable.data();
        const float* b = with_bias ? bias.data() : nullptr;
        DequantizeRowsInt8(
            {sums.data(), row_scales.data(), channel_scales.data(), b, out, bf16, width}, 0, rows);
        DequantizeRowsInt8Portable(
            {sums.data(), row_scales.data(), channel_scales.data(), b, out_portable, bf16, width},
            0, rows);
        for (int64_t i = 0; i < rows * width; ++i) {
          const int64_t c = i % width;
          const double want =
              static_cast<double>(sums[i]) * row_scales[i / width] * channel_scales[c] +
              (with_bias ? bias[c] : 0.0);
          const double got = bf16 ? Bf16ToFloat(y16[i]) : y[i];
          const double got_portable = bf16 ? Bf16ToFloat(y16_portable[i]) : y_portable[i];
          const double tolerance = std::fabs(want) * (bf16 ? 0.004 : 1e-6) + 1e-6;
          ASSERT_NEAR(got, want, tolerance) << i;
          ASSERT_NEAR(got_portable, want, tolerance) << i;
        }
      }
    }
  }
}

}  // namespace
}  // namespace docsparse
