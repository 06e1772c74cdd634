// The fp32 tile loops on AVX-512: the AVX2 loops' structure with 16 lanes,
// 8 rows x 32 keys of scores and 8 rows x 32 output columns in registers,
// and the softmax's exponential by ExpNonPositive512.
#include <immintrin.h>

#include <algorithm>

#include "kernels/block_sparse_attention_fp32_tile.h"
#include "kernels/online_softmax_avx512.h"

// GCC 12 warns inside its own AVX-512 headers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace docsparse {

namespace {

#define DOCSPARSE_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

// scores[r + x][j] = q[r + x]·k[j] for R rows x 32 keys (16 at the tail)
// at a time: 2R accumulators, so that the FMAs' latency (4 cycles, two
// ports) is covered; four rows (8 accumulators) left the ports idle.
template <int R>
DOCSPARSE_AVX512 void ScoreRows(const Fp32Tile& t, int32_t r, int32_t padded_keys) {
  const int32_t d = t.head_dim;
  const float* q = t.q + static_cast<int64_t>(r) * d;
  float* s = t.scores + static_cast<int64_t>(r) * t.stride;
  int32_t j = 0;
  for (; j + 32 <= padded_keys; j += 32) {
    __m512 a[R][2];
#pragma GCC unroll 8
    for (int x = 0; x < R; ++x) a[x][0] = a[x][1] = _mm512_setzero_ps();
    for (int32_t i = 0; i < d; ++i) {
      const float* kt = t.keys_t + static_cast<int64_t>(i) * t.stride + j;
      const __m512 k0 = _mm512_loadu_ps(kt);
      const __m512 k1 = _mm512_loadu_ps(kt + 16);
#pragma GCC unroll 8
      for (int x = 0; x < R; ++x) {
        const __m512 b = _mm512_set1_ps(q[x * d + i]);
        a[x][0] = _mm512_fmadd_ps(b, k0, a[x][0]);
        a[x][1] = _mm512_fmadd_ps(b, k1, a[x][1]);
      }
    }
#pragma GCC unroll 8
    for (int x = 0; x < R; ++x) {
      _mm512_storeu_ps(s + x * t.stride + j, a[x][0]);
      _mm512_storeu_ps(s + x * t.stride + j + 16, a[x][1]);
    }
  }
  if (j < padded_keys) {  // the last 16
    __m512 a[R];
#pragma GCC unroll 8
    for (int x = 0; x < R; ++x) a[x] = _mm512_setzero_ps();
    for (int32_t i = 0; i < d; ++i) {
      const __m512 k = _mm512_loadu_ps(t.keys_t + static_cast<int64_t>(i) * t.stride + j);
#pragma GCC unroll 8
      for (int x = 0; x < R; ++x) a[x] = _mm512_fmadd_ps(_mm512_set1_ps(q[x * d + i]), k, a[x]);
    }
#pragma GCC unroll 8
    for (int x = 0; x < R; ++x) _mm512_storeu_ps(s + x * t.stride + j, a[x]);
  }
}

// Eight rows at a time, then the last four (rows is a multiple of 4).
DOCSPARSE_AVX512 void Scores(const Fp32Tile& t, int32_t padded_keys) {
  int32_t r = 0;
  for (; r + 8 <= t.rows; r += 8) ScoreRows<8>(t, r, padded_keys);
  if (r < t.rows) ScoreRows<4>(t, r, padded_keys);
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

// acc[r + x] += Σ_j p[r + x][j] · v[j], R rows x 32 output columns (16 at
// the tail) in registers, as ScoreRows.
template <int R>
DOCSPARSE_AVX512 void AccumulateRows(const Fp32Tile& t, int32_t r, const float* values,
                                     int64_t value_stride, int32_t tile_keys) {
  const int32_t d = t.head_dim;
  const float* p = t.scores + static_cast<int64_t>(r) * t.stride;
  float* acc = t.acc + static_cast<int64_t>(r) * d;
  int32_t c = 0;
  for (; c + 32 <= d; c += 32) {
    __m512 a[R][2];
#pragma GCC unroll 8
    for (int x = 0; x < R; ++x) {
      a[x][0] = _mm512_loadu_ps(acc + x * d + c);
      a[x][1] = _mm512_loadu_ps(acc + x * d + c + 16);
    }
    for (int32_t j = 0; j < tile_keys; ++j) {
      const float* v = values + j * value_stride + c;
      const __m512 v0 = _mm512_loadu_ps(v);
      const __m512 v1 = _mm512_loadu_ps(v + 16);
#pragma GCC unroll 8
      for (int x = 0; x < R; ++x) {
        const __m512 b = _mm512_set1_ps(p[x * t.stride + j]);
        a[x][0] = _mm512_fmadd_ps(b, v0, a[x][0]);
        a[x][1] = _mm512_fmadd_ps(b, v1, a[x][1]);
      }
    }
#pragma GCC unroll 8
    for (int x = 0; x < R; ++x) {
      _mm512_storeu_ps(acc + x * d + c, a[x][0]);
      _mm512_storeu_ps(acc + x * d + c + 16, a[x][1]);
    }
  }
  if (c < d) {  // the last 16 columns
    __m512 a[R];
#pragma GCC unroll 8
    for (int x = 0; x < R; ++x) a[x] = _mm512_loadu_ps(acc + x * d + c);
    for (int32_t j = 0; j < tile_keys; ++j) {
      const __m512 v = _mm512_loadu_ps(values + j * value_stride + c);
#pragma GCC unroll 8
      for (int x = 0; x < R; ++x)
        a[x] = _mm512_fmadd_ps(_mm512_set1_ps(p[x * t.stride + j]), v, a[x]);
    }
#pragma GCC unroll 8
    for (int x = 0; x < R; ++x) _mm512_storeu_ps(acc + x * d + c, a[x]);
  }
}

DOCSPARSE_AVX512 void Accumulate(const Fp32Tile& t, const float* values, int64_t value_stride,
                                 int32_t tile_keys) {
  int32_t r = 0;
  for (; r + 8 <= t.rows; r += 8) AccumulateRows<8>(t, r, values, value_stride, tile_keys);
  if (r < t.rows) AccumulateRows<4>(t, r, values, value_stride, tile_keys);
}

// out[i] = the 16 values of rows[0..15] at column i, for 16 rows of 16
// floats: the usual unpack / shuffle / 128-bit-lane permutes.
DOCSPARSE_AVX512 inline void Transpose16x16(__m512 r[16]) {
  __m512 t[16];
  for (int i = 0; i < 16; i += 2) {
    t[i] = _mm512_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm512_unpackhi_ps(r[i], r[i + 1]);
  }
  for (int i = 0; i < 16; i += 4) {
    r[i] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 1] = _mm512_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    r[i + 2] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    r[i + 3] = _mm512_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    t[i] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0x88);
    t[i + 4] = _mm512_shuffle_f32x4(r[i], r[i + 4], 0xdd);
    t[i + 8] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0x88);
    t[i + 12] = _mm512_shuffle_f32x4(r[i + 8], r[i + 12], 0xdd);
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0x88);
    r[i + 8] = _mm512_shuffle_f32x4(t[i], t[i + 8], 0xdd);
    r[i + 4] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0x88);
    r[i + 12] = _mm512_shuffle_f32x4(t[i + 4], t[i + 12], 0xdd);
  }
}

}  // namespace

DOCSPARSE_AVX512 void Fp32Tile::TransposeKeysAvx512(const float* keys, int64_t key_stride,
                                                    int32_t tile_keys) const {
  const int32_t padded_keys = (tile_keys + 15) / 16 * 16;
  // 16 keys x 16 dimensions at a time; keys past tile_keys load as zeros,
  // which also clears the spare columns.
  for (int32_t j = 0; j < padded_keys; j += 16) {
    const int32_t real = std::min<int32_t>(16, tile_keys - j);
    for (int32_t i = 0; i < head_dim; i += 16) {
      __m512 r[16];
      for (int x = 0; x < 16; ++x) {
        r[x] = x < real ? _mm512_loadu_ps(keys + (j + x) * key_stride + i) : _mm512_setzero_ps();
      }
      Transpose16x16(r);
      for (int x = 0; x < 16; ++x) {
        _mm512_storeu_ps(keys_t + static_cast<int64_t>(i + x) * stride + j, r[x]);
      }
    }
  }
}

DOCSPARSE_AVX512 void Fp32Tile::RunAvx512(const float* values, int64_t value_stride,
                                          int32_t tile_keys) const {
  const int32_t padded_keys = (tile_keys + 15) / 16 * 16;
  Scores(*this, padded_keys);
  if (mask_slide.width != 0) MaskScores(tile_keys);
  SoftmaxUpdate(*this, tile_keys, padded_keys);
  Accumulate(*this, values, value_stride, tile_keys);
}

}  // namespace docsparse
