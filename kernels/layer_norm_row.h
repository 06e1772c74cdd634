// The second half of every LayerNorm kernel here (residual_layer_norm,
// embedding_layer_norm): given a row's fp32 values (the sum of its inputs,
// already in a scratch row) and their mean, the variance in a second pass
// (no cancellation) and (v - mean) / sqrt(variance + eps) · gamma + beta,
// written as bf16 bits (rounded to nearest even) or fp32.
//
// The AVX-512 and AVX2 forms carry their own target attributes (as bf16.h):
// callers compiled for the same instruction set inline them.
#ifndef DOCSPARSE_KERNELS_LAYER_NORM_ROW_H_
#define DOCSPARSE_KERNELS_LAYER_NORM_ROW_H_

#include <immintrin.h>

#include <cmath>
#include <cstdint>

#include "kernels/bf16.h"

namespace docsparse {

namespace layer_norm_row {

__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void Store16(uint16_t* dst, __m512 v,
                                                                         __mmask16 mask) {
  StoreBf16x16(dst, v, mask);
}
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void Store16(float* dst, __m512 v,
                                                                         __mmask16 mask) {
  _mm512_mask_storeu_ps(dst, mask, v);
}
inline void Store1(uint16_t* dst, float v) { *dst = FloatToBf16(v); }
inline void Store1(float* dst, float v) { *dst = v; }

}  // namespace layer_norm_row

// GCC 12 warns inside its own AVX-512 headers (GCC bug 105593).
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

// `Element`: uint16_t (bf16 bits) or float.
template <typename Element>
__attribute__((target("avx512f,avx512bw,avx512vl"))) inline void WriteLayerNormRowAvx512(
    const float* row, float mean, int64_t width, const float* gamma, const float* beta, float eps,
    Element* out) {
  const __m512 mean16 = _mm512_set1_ps(mean);
  // Two independent sums of squares (even and odd vectors): one chain of
  // dependent FMAs waits 4 cycles a vector. Whole vectors unmasked, the
  // rest masked (a mask computed per vector cost as much as the FMA).
  __m512 even = _mm512_setzero_ps();
  __m512 odd = _mm512_setzero_ps();
  int64_t c = 0;
  for (; c + 32 <= width; c += 32) {
    const __m512 a = _mm512_sub_ps(_mm512_loadu_ps(row + c), mean16);
    const __m512 b = _mm512_sub_ps(_mm512_loadu_ps(row + c + 16), mean16);
    even = _mm512_fmadd_ps(a, a, even);
    odd = _mm512_fmadd_ps(b, b, odd);
  }
  for (; c < width; c += 16) {
    const __mmask16 mask = FirstLanes(width - c);
    const __m512 centred = _mm512_maskz_sub_ps(mask, _mm512_maskz_loadu_ps(mask, row + c), mean16);
    even = _mm512_fmadd_ps(centred, centred, even);
  }
  const float variance = _mm512_reduce_add_ps(_mm512_add_ps(even, odd)) / static_cast<float>(width);
  const __m512 scale16 = _mm512_set1_ps(1.0f / std::sqrt(variance + eps));
  const auto write16 = [&](int64_t c, __mmask16 mask)
      __attribute__((target("avx512f,avx512bw,avx512vl"))) {
    const __m512 centred = _mm512_sub_ps(_mm512_maskz_loadu_ps(mask, row + c), mean16);
    const __m512 y =
        _mm512_fmadd_ps(_mm512_mul_ps(centred, scale16), _mm512_maskz_loadu_ps(mask, gamma + c),
                        _mm512_maskz_loadu_ps(mask, beta + c));
    layer_norm_row::Store16(out + c, y, mask);
  };
  for (c = 0; c + 16 <= width; c += 16) write16(c, 0xffff);
  if (c < width) write16(c, FirstLanes(width - c));
}

#pragma GCC diagnostic pop

// The AVX2 form (the AVX2 kind of machine): 8 columns at a time, the
// columns past the last multiple of 8 one by one.
template <typename Element>
__attribute__((target("avx2,fma"))) inline void WriteLayerNormRowAvx2(const float* row, float mean,
                                                                      int64_t width,
                                                                      const float* gamma,
                                                                      const float* beta, float eps,
                                                                      Element* out) {
  const __m256 mean8 = _mm256_set1_ps(mean);
  const int64_t full = width / 8 * 8;
  // Two independent sums of squares, as in the AVX-512 form.
  __m256 even = _mm256_setzero_ps();
  __m256 odd = _mm256_setzero_ps();
  int64_t c = 0;
  for (; c + 16 <= full; c += 16) {
    const __m256 a = _mm256_sub_ps(_mm256_loadu_ps(row + c), mean8);
    const __m256 b = _mm256_sub_ps(_mm256_loadu_ps(row + c + 8), mean8);
    even = _mm256_fmadd_ps(a, a, even);
    odd = _mm256_fmadd_ps(b, b, odd);
  }
  if (c < full) {
    const __m256 a = _mm256_sub_ps(_mm256_loadu_ps(row + c), mean8);
    even = _mm256_fmadd_ps(a, a, even);
  }
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, _mm256_add_ps(even, odd));
  float squares = 0;
  for (float lane : lanes) squares += lane;
  for (c = full; c < width; ++c) squares += (row[c] - mean) * (row[c] - mean);
  const float scale = 1.0f / std::sqrt(squares / static_cast<float>(width) + eps);
  const __m256 scale8 = _mm256_set1_ps(scale);
  for (c = 0; c < full; c += 8) {
    const __m256 centred = _mm256_sub_ps(_mm256_loadu_ps(row + c), mean8);
    StoreElements8(out + c, _mm256_fmadd_ps(_mm256_mul_ps(centred, scale8),
                                            _mm256_loadu_ps(gamma + c), _mm256_loadu_ps(beta + c)));
  }
  for (c = full; c < width; ++c) {
    layer_norm_row::Store1(out + c, (row[c] - mean) * scale * gamma[c] + beta[c]);
  }
}

// The portable form: the variance accumulated in double.
template <typename Element>
inline void WriteLayerNormRowPortable(const float* row, float mean, int64_t width,
                                      const float* gamma, const float* beta, float eps,
                                      Element* out) {
  double squares = 0;
  for (int64_t c = 0; c < width; ++c) {
    const float centred = row[c] - mean;
    squares += static_cast<double>(centred) * centred;
  }
  const float variance = static_cast<float>(squares / static_cast<double>(width));
  const float scale = 1.0f / std::sqrt(variance + eps);
  for (int64_t c = 0; c < width; ++c) {
    layer_norm_row::Store1(out + c, (row[c] - mean) * scale * gamma[c] + beta[c]);
  }
}

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_LAYER_NORM_ROW_H_
