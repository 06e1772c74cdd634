// kernels/embedding_layer_norm against LayerNorm(word + position + type) in
// double: both output types, optional tables, odd widths, a strided output,
// and the dispatched (AVX-512) and portable paths.
#include "kernels/embedding_layer_norm.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>
#include <vector>

#include "kernels/bf16.h"

namespace docsparse {
namespace {

struct Tables {
  int64_t width;
  std::vector<float> word, position, token_type, gamma, beta;
};

// Word rows with a large common offset (500 + noise), where a one-pass
// variance in fp32 would cancel.
Tables MakeTables(int64_t width, uint32_t seed) {
  Tables t{width, {}, {}, {}, {}, {}};
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0, 1);
  for (int64_t i = 0; i < 50 * width; ++i) t.word.push_back(500 + 3 * normal(rng));
  for (int64_t i = 0; i < 20 * width; ++i) t.position.push_back(normal(rng));
  for (int64_t i = 0; i < 2 * width; ++i) t.token_type.push_back(normal(rng));
  for (int64_t i = 0; i < width; ++i) {
    t.gamma.push_back(1 + 0.1f * normal(rng));
    t.beta.push_back(0.1f * normal(rng));
  }
  return t;
}

struct Rows {
  std::vector<int64_t> ids{7, 0, 49, 7, 13}, positions{0, 1, 2, 19, 4}, types{0, 1, 1, 0, 1};
};

std::vector<double> Reference(const Tables& t, const Rows& rows, bool with_position,
                              bool with_type, double eps) {
  std::vector<double> out;
  for (size_t r = 0; r < rows.ids.size(); ++r) {
    std::vector<double> v;
    double mean = 0;
    for (int64_t i = 0; i < t.width; ++i) {
      double value = t.word[rows.ids[r] * t.width + i];
      if (with_position) value += t.position[rows.positions[r] * t.width + i];
      if (with_type) value += t.token_type[rows.types[r] * t.width + i];
      v.push_back(value);
      mean += value / static_cast<double>(t.width);
    }
    double variance = 0;
    for (double value : v) variance += (value - mean) * (value - mean) / t.width;
    for (int64_t i = 0; i < t.width; ++i) {
      out.push_back((v[i] - mean) / std::sqrt(variance + eps) * t.gamma[i] + t.beta[i]);
    }
  }
  return out;
}

using RowsFunction = void (*)(const EmbeddingLayerNormParams&, int64_t, int64_t);

// Runs into rows `stride` elements apart (stride >= width); returns the rows
// as fp32 and checks the gap between rows was left alone.
std::vector<float> Normalize(RowsFunction run, const Tables& t, const Rows& rows, bool with_position,
                       bool with_type, bool bf16, int64_t stride) {
  const int64_t n = static_cast<int64_t>(rows.ids.size());
  std::vector<float> out32(static_cast<size_t>(n * stride), -7.0f);
  std::vector<uint16_t> out16(static_cast<size_t>(n * stride), FloatToBf16(-7.0f));
  const EmbeddingLayerNormParams params{t.word.data(),
                                        rows.ids.data(),
                                        with_position ? t.position.data() : nullptr,
                                        rows.positions.data(),
                                        with_type ? t.token_type.data() : nullptr,
                                        rows.types.data(),
                                        t.gamma.data(),
                                        t.beta.data(),
                                        bf16 ? static_cast<void*>(out16.data()) : out32.data(),
                                        stride,
                                        bf16,
                                        t.width,
                                        1e-12f};
  run(params, 0, 2);
  run(params, 2, n);
  std::vector<float> got;
  for (int64_t r = 0; r < n; ++r) {
    for (int64_t i = 0; i < stride; ++i) {
      const float value = bf16 ? Bf16ToFloat(out16[r * stride + i]) : out32[r * stride + i];
      if (i < t.width) {
        got.push_back(value);
      } else {
        EXPECT_EQ(value, -7.0f) << "wrote past the row, row " << r << " column " << i;
      }
    }
  }
  return got;
}

TEST(EmbeddingLayerNormTest, DispatchedAndPortableMatchDoubleReference) {
  const Rows rows;
  for (int64_t width : {384, 37, 16, 1}) {
    const Tables t = MakeTables(width, static_cast<uint32_t>(width));
    for (bool with_position : {true, false}) {
      for (bool with_type : {true, false}) {
        const std::vector<double> want = Reference(t, rows, with_position, with_type, 1e-12);
        for (RowsFunction run : {EmbeddingLayerNormRows, EmbeddingLayerNormRowsPortable}) {
          for (bool bf16 : {false, true}) {
            const std::vector<float> got =
                Normalize(run, t, rows, with_position, with_type, bf16, width + 5);
            ASSERT_EQ(got.size(), want.size());
            for (size_t i = 0; i < got.size(); ++i) {
              // Statistics in fp32 over rows offset by 500 (its ulp is 3e-5), and
              // for bf16 half an ulp of 8 bits on top.
              const double tolerance = 2e-4 + (bf16 ? std::fabs(want[i]) / 256 : 0.0);
              EXPECT_NEAR(got[i], want[i], tolerance) << "width " << width << " element " << i;
            }
            if (width > 1) {
              EXPECT_GT(std::fabs(want[0]), 1e-3);  // the test is not all zeros
            }
          }
        }
      }
    }
  }
}

}  // namespace
}  // namespace docsparse
