#include "kernels/int8_weight_gemv.h"

#include <immintrin.h>

#include <algorithm>
#include <cassert>

#include "kernels/cpu_features.h"

#define DOCSPARSE_AVX2 __attribute__((target("avx2,fma")))

namespace docsparse {

namespace {

constexpr int64_t kPanel = kInt8GemvPanel;

// The panel holding channel n, and where its weights start.
const int8_t* PanelWeights(const Int8WeightGemvParams& p, int64_t n) {
  return p.packed_weights + n / kPanel * kPanel * p.in_features;
}

// Eight int8 weights widened to fp32.
DOCSPARSE_AVX2 inline __m256 LoadWeights8(const int8_t* w) {
  const __m128i bytes = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(w));
  return _mm256_cvtepi32_ps(_mm256_cvtepi8_epi32(bytes));
}

// Rows [first_row, first_row + R) against the panel from channel n0 (of
// which `valid` are real): 2·R accumulators, two widened weight vectors and
// R broadcasts per input.
template <int R>
DOCSPARSE_AVX2 void PanelRows(const Int8WeightGemvParams& p, int64_t n0, int64_t valid,
                              int64_t first_row, const float* scales, const float* bias) {
  const int8_t* w = PanelWeights(p, n0);
  const float* x = p.x + first_row * p.in_features;
  __m256 acc[R][2];
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  const int64_t in = p.in_features;
  for (int64_t k = 0; k < in; ++k) {
    const __m256 w0 = LoadWeights8(w + k * kPanel);
    const __m256 w1 = LoadWeights8(w + k * kPanel + 8);
#pragma GCC unroll 8
    for (int r = 0; r < R; ++r) {
      const __m256 xv = _mm256_broadcast_ss(x + r * in + k);
      acc[r][0] = _mm256_fmadd_ps(w0, xv, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(w1, xv, acc[r][1]);
    }
  }
  const __m256 s0 = _mm256_loadu_ps(scales), s1 = _mm256_loadu_ps(scales + 8);
  const __m256 b0 = _mm256_loadu_ps(bias), b1 = _mm256_loadu_ps(bias + 8);
#pragma GCC unroll 8
  for (int r = 0; r < R; ++r) {
    float* y = p.y + (first_row + r) * p.out_features + n0;
    const __m256 y0 = _mm256_fmadd_ps(acc[r][0], s0, b0);
    const __m256 y1 = _mm256_fmadd_ps(acc[r][1], s1, b1);
    if (valid == kPanel) {
      _mm256_storeu_ps(y, y0);
      _mm256_storeu_ps(y + 8, y1);
    } else {
      alignas(32) float last[kPanel];
      _mm256_store_ps(last, y0);
      _mm256_store_ps(last + 8, y1);
      std::copy(last, last + valid, y);
    }
  }
}

// The 1-5 rows left after the passes of six, as PanelRows of that many.
template <int R>
DOCSPARSE_AVX2 void LastRows(const Int8WeightGemvParams& p, int64_t n0, int64_t valid,
                             int64_t first_row, const float* scales, const float* bias) {
  if (p.rows - first_row == R) return PanelRows<R>(p, n0, valid, first_row, scales, bias);
  if constexpr (R > 1) LastRows<R - 1>(p, n0, valid, first_row, scales, bias);
}

DOCSPARSE_AVX2 void GemvAvx2(const Int8WeightGemvParams& p, int64_t begin, int64_t end) {
  for (int64_t n0 = begin; n0 < end; n0 += kPanel) {
    const int64_t valid = std::min(kPanel, end - n0);
    // The panel's scales and biases, zero past the last channel.
    alignas(32) float scales[kPanel] = {};
    alignas(32) float bias[kPanel] = {};
    for (int64_t c = 0; c < valid; ++c) {
      scales[c] = p.channel_scales[n0 + c];
      bias[c] = p.bias != nullptr ? p.bias[n0 + c] : 0.0f;
    }
    // Six rows a pass (12 accumulators, two weight vectors, a broadcast),
    // the panel's weights staying in L1 across the passes.
    int64_t row = 0;
    for (; row + 6 <= p.rows; row += 6) PanelRows<6>(p, n0, valid, row, scales, bias);
    if (row < p.rows) LastRows<5>(p, n0, valid, row, scales, bias);
  }
}

}  // namespace

std::vector<int8_t> PackInt8GemvWeights(const int8_t* weights, int64_t out_features,
                                        int64_t in_features) {
  const int64_t panels = (out_features + kPanel - 1) / kPanel;
  std::vector<int8_t> packed(static_cast<size_t>(panels * kPanel * in_features), 0);
  for (int64_t n = 0; n < out_features; ++n) {
    int8_t* panel = packed.data() + n / kPanel * kPanel * in_features;
    for (int64_t k = 0; k < in_features; ++k) {
      panel[k * kPanel + n % kPanel] = weights[n * in_features + k];
    }
  }
  return packed;
}

void Int8WeightGemvPortable(const Int8WeightGemvParams& p, int64_t begin, int64_t end) {
  assert(begin % kPanel == 0);
  for (int64_t r = 0; r < p.rows; ++r) {
    const float* x = p.x + r * p.in_features;
    for (int64_t n = begin; n < end; ++n) {
      const int8_t* w = PanelWeights(p, n) + n % kPanel;
      float sum = 0.0f;
      for (int64_t k = 0; k < p.in_features; ++k) sum += static_cast<float>(w[k * kPanel]) * x[k];
      p.y[r * p.out_features + n] =
          sum * p.channel_scales[n] + (p.bias != nullptr ? p.bias[n] : 0.0f);
    }
  }
}

void Int8WeightGemv(const Int8WeightGemvParams& params, int64_t begin, int64_t end) {
  assert(begin % kPanel == 0);
  if (HostCpuFeatures().avx2_fma) return GemvAvx2(params, begin, end);
  Int8WeightGemvPortable(params, begin, end);
}

}  // namespace docsparse
