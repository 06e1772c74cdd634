// The fp32 tile loops on AVX-512: the AVX2 loops' structure with 16 lanes,
// 4 rows x 32 keys of scores and 4 rows x 32 output columns in registers,
// and the softmax's exponential by ExpNonPositive512.
#include <immintrin.h>

#include "kernels/block_sparse_attention_fp32_tile.h"
#include "kernels/online_softmax_avx512.h"

// GCC 12 warns inside its own AVX-512 headers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace docsparse {

namespace {

#define DOCSPARSE_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

// scores[r][j] = q[r]·k[j] for 4 rows x 32 keys (16 at the tail) at a time.
DOCSPARSE_AVX512 void Scores(const Fp32Tile& t, int32_t padded_keys) {
  const int32_t d = t.head_dim;
  for (int32_t r = 0; r < t.rows; r += 4) {
    const float* q0 = t.q + static_cast<int64_t>(r) * d;
    const float* q1 = q0 + d;
    const float* q2 = q1 + d;
    const float* q3 = q2 + d;
    float* s = t.scores + static_cast<int64_t>(r) * t.stride;
    int32_t j = 0;
    for (; j + 32 <= padded_keys; j += 32) {
      __m512 a00 = _mm512_setzero_ps(), a01 = _mm512_setzero_ps();
      __m512 a10 = _mm512_setzero_ps(), a11 = _mm512_setzero_ps();
      __m512 a20 = _mm512_setzero_ps(), a21 = _mm512_setzero_ps();
      __m512 a30 = _mm512_setzero_ps(), a31 = _mm512_setzero_ps();
      for (int32_t i = 0; i < d; ++i) {
        const float* kt = t.keys_t + static_cast<int64_t>(i) * t.stride + j;
        const __m512 k0 = _mm512_loadu_ps(kt);
        const __m512 k1 = _mm512_loadu_ps(kt + 16);
        __m512 b = _mm512_set1_ps(q0[i]);
        a00 = _mm512_fmadd_ps(b, k0, a00);
        a01 = _mm512_fmadd_ps(b, k1, a01);
        b = _mm512_set1_ps(q1[i]);
        a10 = _mm512_fmadd_ps(b, k0, a10);
        a11 = _mm512_fmadd_ps(b, k1, a11);
        b = _mm512_set1_ps(q2[i]);
        a20 = _mm512_fmadd_ps(b, k0, a20);
        a21 = _mm512_fmadd_ps(b, k1, a21);
        b = _mm512_set1_ps(q3[i]);
        a30 = _mm512_fmadd_ps(b, k0, a30);
        a31 = _mm512_fmadd_ps(b, k1, a31);
      }
      _mm512_storeu_ps(s + j, a00);
      _mm512_storeu_ps(s + j + 16, a01);
      _mm512_storeu_ps(s + t.stride + j, a10);
      _mm512_storeu_ps(s + t.stride + j + 16, a11);
      _mm512_storeu_ps(s + 2 * t.stride + j, a20);
      _mm512_storeu_ps(s + 2 * t.stride + j + 16, a21);
      _mm512_storeu_ps(s + 3 * t.stride + j, a30);
      _mm512_storeu_ps(s + 3 * t.stride + j + 16, a31);
    }
    if (j < padded_keys) {  // the last 16
      __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
      __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
      for (int32_t i = 0; i < d; ++i) {
        const __m512 k = _mm512_loadu_ps(t.keys_t + static_cast<int64_t>(i) * t.stride + j);
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(q0[i]), k, a0);
        a1 = _mm512_fmadd_ps(_mm512_set1_ps(q1[i]), k, a1);
        a2 = _mm512_fmadd_ps(_mm512_set1_ps(q2[i]), k, a2);
        a3 = _mm512_fmadd_ps(_mm512_set1_ps(q3[i]), k, a3);
      }
      _mm512_storeu_ps(s + j, a0);
      _mm512_storeu_ps(s + t.stride + j, a1);
      _mm512_storeu_ps(s + 2 * t.stride + j, a2);
      _mm512_storeu_ps(s + 3 * t.stride + j, a3);
    }
  }
}

// Online-softmax update of every row over the tile's first tile_keys scores;
// the padding keys up to padded_keys get probability 0.
DOCSPARSE_AVX512 void SoftmaxUpdate(const Fp32Tile& t, int32_t tile_keys, int32_t padded_keys) {
  for (int32_t r = 0; r < t.rows; ++r) {
    OnlineSoftmaxRowAvx512(t.scores + static_cast<int64_t>(r) * t.stride, tile_keys, padded_keys,
                           t.acc + static_cast<int64_t>(r) * t.head_dim, t.head_dim, t.row_max + r,
                           t.row_sum + r);
  }
}

// acc[r] += Σ_j p[r][j] · v[j], 4 rows x 32 output columns (16 at the tail)
// in registers.
DOCSPARSE_AVX512 void Accumulate(const Fp32Tile& t, const float* values, int64_t value_stride,
                                 int32_t tile_keys) {
  const int32_t d = t.head_dim;
  for (int32_t r = 0; r < t.rows; r += 4) {
    const float* p0 = t.scores + static_cast<int64_t>(r) * t.stride;
    const float* p1 = p0 + t.stride;
    const float* p2 = p1 + t.stride;
    const float* p3 = p2 + t.stride;
    float* acc = t.acc + static_cast<int64_t>(r) * d;
    int32_t c = 0;
    for (; c + 32 <= d; c += 32) {
      __m512 a00 = _mm512_loadu_ps(acc + c), a01 = _mm512_loadu_ps(acc + c + 16);
      __m512 a10 = _mm512_loadu_ps(acc + d + c), a11 = _mm512_loadu_ps(acc + d + c + 16);
      __m512 a20 = _mm512_loadu_ps(acc + 2 * d + c), a21 = _mm512_loadu_ps(acc + 2 * d + c + 16);
      __m512 a30 = _mm512_loadu_ps(acc + 3 * d + c), a31 = _mm512_loadu_ps(acc + 3 * d + c + 16);
      for (int32_t j = 0; j < tile_keys; ++j) {
        const float* v = values + j * value_stride + c;
        const __m512 v0 = _mm512_loadu_ps(v);
        const __m512 v1 = _mm512_loadu_ps(v + 16);
        __m512 b = _mm512_set1_ps(p0[j]);
        a00 = _mm512_fmadd_ps(b, v0, a00);
        a01 = _mm512_fmadd_ps(b, v1, a01);
        b = _mm512_set1_ps(p1[j]);
        a10 = _mm512_fmadd_ps(b, v0, a10);
        a11 = _mm512_fmadd_ps(b, v1, a11);
        b = _mm512_set1_ps(p2[j]);
        a20 = _mm512_fmadd_ps(b, v0, a20);
        a21 = _mm512_fmadd_ps(b, v1, a21);
        b = _mm512_set1_ps(p3[j]);
        a30 = _mm512_fmadd_ps(b, v0, a30);
        a31 = _mm512_fmadd_ps(b, v1, a31);
      }
      _mm512_storeu_ps(acc + c, a00);
      _mm512_storeu_ps(acc + c + 16, a01);
      _mm512_storeu_ps(acc + d + c, a10);
      _mm512_storeu_ps(acc + d + c + 16, a11);
      _mm512_storeu_ps(acc + 2 * d + c, a20);
      _mm512_storeu_ps(acc + 2 * d + c + 16, a21);
      _mm512_storeu_ps(acc + 3 * d + c, a30);
      _mm512_storeu_ps(acc + 3 * d + c + 16, a31);
    }
    if (c < d) {  // the last 16 columns
      __m512 a0 = _mm512_loadu_ps(acc + c), a1 = _mm512_loadu_ps(acc + d + c);
      __m512 a2 = _mm512_loadu_ps(acc + 2 * d + c), a3 = _mm512_loadu_ps(acc + 3 * d + c);
      for (int32_t j = 0; j < tile_keys; ++j) {
        const __m512 v = _mm512_loadu_ps(values + j * value_stride + c);
        a0 = _mm512_fmadd_ps(_mm512_set1_ps(p0[j]), v, a0);
        a1 = _mm512_fmadd_ps(_mm512_set1_ps(p1[j]), v, a1);
        a2 = _mm512_fmadd_ps(_mm512_set1_ps(p2[j]), v, a2);
        a3 = _mm512_fmadd_ps(_mm512_set1_ps(p3[j]), v, a3);
      }
      _mm512_storeu_ps(acc + c, a0);
      _mm512_storeu_ps(acc + d + c, a1);
      _mm512_storeu_ps(acc + 2 * d + c, a2);
      _mm512_storeu_ps(acc + 3 * d + c, a3);
    }
  }
}

}  // namespace

DOCSPARSE_AVX512 void Fp32Tile::RunAvx512(const float* values, int64_t value_stride,
                                          int32_t tile_keys) const {
  const int32_t padded_keys = (tile_keys + 15) / 16 * 16;
  Scores(*this, padded_keys);
  if (mask_slide.width != 0) MaskScores(tile_keys);
  SoftmaxUpdate(*this, tile_keys, padded_keys);
  Accumulate(*this, values, value_stride, tile_keys);
}

}  // namespace docsparse
