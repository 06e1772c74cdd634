#include "kernels/int8_weight_gemv.h"

#include <immintrin.h>

#include <algorithm>

#include "kernels/cpu_features.h"

#define DOCSPARSE_AVX2 __attribute__((target("avx2,fma")))

namespace docsparse {

namespace {

DOCSPARSE_AVX2 inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

// Eight int8 weights widened to fp32.
DOCSPARSE_AVX2 inline __m256 LoadWeights8(const int8_t* w) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
}

// kOut channels from `channel` on, against R rows of x (R · kOut
// accumulators; each widened weight vector serves every row).
template <int kOut, int R>
DOCSPARSE_AVX2 void Channels(const Int8WeightGemvParams& p, int64_t channel, int64_t first_row) {
  const int64_t k_end = p.in_features - p.in_features % 8;
  const int8_t* w[kOut];
#pragma GCC unroll 4
  for (int o = 0; o < kOut; ++o) w[o] = p.weights + (channel + o) * p.in_features;
  const float* x[R];
#pragma GCC unroll 4
  for (int r = 0; r < R; ++r) x[r] = p.x + (first_row + r) * p.in_features;
  __m256 acc[kOut][R];
#pragma GCC unroll 4
  for (int o = 0; o < kOut; ++o) {
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) acc[o][r] = _mm256_setzero_ps();
  }
  for (int64_t k = 0; k < k_end; k += 8) {
    __m256 xv[R];
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) xv[r] = _mm256_loadu_ps(x[r] + k);
#pragma GCC unroll 4
    for (int o = 0; o < kOut; ++o) {
      const __m256 wv = LoadWeights8(w[o] + k);
#pragma GCC unroll 4
      for (int r = 0; r < R; ++r) acc[o][r] = _mm256_fmadd_ps(wv, xv[r], acc[o][r]);
    }
  }
#pragma GCC unroll 4
  for (int o = 0; o < kOut; ++o) {
    const int64_t n = channel + o;
    const float scale = p.channel_scales[n];
    const float bias = p.bias != nullptr ? p.bias[n] : 0.0f;
#pragma GCC unroll 4
    for (int r = 0; r < R; ++r) {
      float sum = HorizontalSum(acc[o][r]);
      for (int64_t k = k_end; k < p.in_features; ++k) sum += static_cast<float>(w[o][k]) * x[r][k];
      p.y[(first_row + r) * p.out_features + n] = sum * scale + bias;
    }
  }
}

// Channels [begin, end) against rows [first_row, first_row + R).
template <int R>
DOCSPARSE_AVX2 void RowGroup(const Int8WeightGemvParams& p, int64_t begin, int64_t end,
                             int64_t first_row) {
  // Four channels a step with one or two rows, two with three or four: at
  // most 8 accumulators, beside R rows of x and one weight vector.
  constexpr int kOut = R <= 2 ? 4 : 2;
  int64_t n = begin;
  for (; n + kOut <= end; n += kOut) Channels<kOut, R>(p, n, first_row);
  for (; n < end; ++n) Channels<1, R>(p, n, first_row);
}

DOCSPARSE_AVX2 void GemvAvx2(const Int8WeightGemvParams& p, int64_t begin, int64_t end) {
  int64_t row = 0;
  for (; row + 4 <= p.rows; row += 4) RowGroup<4>(p, begin, end, row);
  switch (p.rows - row) {
    case 3:
      return RowGroup<3>(p, begin, end, row);
    case 2:
      return RowGroup<2>(p, begin, end, row);
    case 1:
      return RowGroup<1>(p, begin, end, row);
    default:
      return;
  }
}

}  // namespace

void Int8WeightGemvPortable(const Int8WeightGemvParams& p, int64_t begin, int64_t end) {
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* x = p.x + r * p.in_features;
    for (int64_t n = begin; n < end; ++n) {
      const int8_t* w = p.weights + n * p.in_features;
      float sum = 0.0f;
      for (int64_t k = 0; k < p.in_features; ++k) sum += static_cast<float>(w[k]) * x[k];
      p.y[r * p.out_features + n] =
          sum * p.channel_scales[n] + (p.bias != nullptr ? p.bias[n] : 0.0f);
    }
  }
}

void Int8WeightGemv(const Int8WeightGemvParams& params, int64_t begin, int64_t end) {
  if (HostCpuFeatures().avx2_fma) return GemvAvx2(params, begin, end);
  Int8WeightGemvPortable(params, begin, end);
}

}  // namespace docsparse
