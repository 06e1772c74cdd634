#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/block_sparse_attention_fp32_tile.h"
#include "kernels/vector_exp.h"

namespace docsparse {

namespace {

#define DOCSPARSE_AVX2 __attribute__((target("avx2,fma")))

DOCSPARSE_AVX2 inline float HorizontalMax(__m256 v) {
  __m128 m = _mm_max_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  m = _mm_max_ps(m, _mm_movehl_ps(m, m));
  m = _mm_max_ss(m, _mm_shuffle_ps(m, m, 1));
  return _mm_cvtss_f32(m);
}

DOCSPARSE_AVX2 inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// a[x][·] += row_x[0] · (v0, v1) for four rows `stride` floats apart: a
// rank-1 update of a 4 x 16 block held in 8 registers, the inner step of
// both products.
DOCSPARSE_AVX2 inline void Rank1Update4x16(const float* rows, int64_t stride, __m256 v0, __m256 v1,
                                           __m256 a[4][2]) {
#pragma GCC unroll 4
  for (int x = 0; x < 4; ++x) {
    const __m256 b = _mm256_broadcast_ss(rows + x * stride);
    a[x][0] = _mm256_fmadd_ps(b, v0, a[x][0]);
    a[x][1] = _mm256_fmadd_ps(b, v1, a[x][1]);
  }
}

// Stores a 4 x 16 block to rows `stride` floats apart.
DOCSPARSE_AVX2 inline void Store4x16(float* out, int64_t stride, __m256 a[4][2]) {
#pragma GCC unroll 4
  for (int x = 0; x < 4; ++x) {
    _mm256_storeu_ps(out + x * stride, a[x][0]);
    _mm256_storeu_ps(out + x * stride + 8, a[x][1]);
  }
}

// scores[r][j] = q[r]·k[j] for 4 rows x 16 keys at a time: 8 accumulators
// stay in registers across the head dimension.
DOCSPARSE_AVX2 void Scores(const Fp32Tile& t, int32_t padded_keys) {
  const int32_t d = t.head_dim;
  for (int32_t r = 0; r < t.rows; r += 4) {
    const float* q = t.q + static_cast<int64_t>(r) * d;
    for (int32_t j = 0; j < padded_keys; j += 16) {
      __m256 a[4][2];
#pragma GCC unroll 4
      for (int x = 0; x < 4; ++x) a[x][0] = a[x][1] = _mm256_setzero_ps();
      for (int32_t i = 0; i < d; ++i) {
        const float* kt = t.keys_t + static_cast<int64_t>(i) * t.stride + j;
        Rank1Update4x16(q + i, d, _mm256_loadu_ps(kt), _mm256_loadu_ps(kt + 8), a);
      }
      Store4x16(t.scores + static_cast<int64_t>(r) * t.stride + j, t.stride, a);
    }
  }
}

// Online-softmax update of every row over the tile's first tile_keys scores
// (the padding keys beyond get probability 0).
DOCSPARSE_AVX2 void SoftmaxUpdate(const Fp32Tile& t, int32_t tile_keys, int32_t padded_keys) {
  const int32_t full = tile_keys / 8 * 8;
  for (int32_t r = 0; r < t.rows; ++r) {
    float* row = t.scores + static_cast<int64_t>(r) * t.stride;
    __m256 vmax = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
    for (int32_t j = 0; j < full; j += 8) vmax = _mm256_max_ps(vmax, _mm256_loadu_ps(row + j));
    float tile_max = HorizontalMax(vmax);
    for (int32_t j = full; j < tile_keys; ++j) tile_max = std::max(tile_max, row[j]);
    const float new_max = std::max(t.row_max[r], tile_max);
    const float correction = std::exp(t.row_max[r] - new_max);  // 0 on the first tile
    for (int32_t j = tile_keys; j < padded_keys; ++j) row[j] = -INFINITY;
    const __m256 shift = _mm256_set1_ps(new_max);
    const __m256 floor = _mm256_set1_ps(-INFINITY);
    __m256 vsum = _mm256_setzero_ps();
    for (int32_t j = 0; j < padded_keys; j += 8) {
      const __m256 x = _mm256_loadu_ps(row + j);
      // Padding keys (-inf) must give exactly 0, not Exp256's floor.
      __m256 e = Exp256(_mm256_sub_ps(x, shift));
      e = _mm256_and_ps(e, _mm256_cmp_ps(x, floor, _CMP_NEQ_OQ));
      _mm256_storeu_ps(row + j, e);
      vsum = _mm256_add_ps(vsum, e);
    }
    float* acc = t.acc + static_cast<int64_t>(r) * t.head_dim;
    const __m256 c = _mm256_set1_ps(correction);
    for (int32_t i = 0; i < t.head_dim; i += 8) {
      _mm256_storeu_ps(acc + i, _mm256_mul_ps(_mm256_loadu_ps(acc + i), c));
    }
    t.row_sum[r] = t.row_sum[r] * correction + HorizontalSum(vsum);
    t.row_max[r] = new_max;
  }
}

// acc[r] += Σ_j p[r][j] · v[j], 4 rows x 16 output columns in registers (8
// at the tail): 8 accumulators cover the FMAs' latency on two ports, where
// 4 rows x 8 columns (4 accumulators) ran at half their rate.
DOCSPARSE_AVX2 void Accumulate(const Fp32Tile& t, const float* values, int64_t value_stride,
                               int32_t tile_keys) {
  const int32_t d = t.head_dim;
  for (int32_t r = 0; r < t.rows; r += 4) {
    const float* p0 = t.scores + static_cast<int64_t>(r) * t.stride;
    const float* p1 = p0 + t.stride;
    const float* p2 = p1 + t.stride;
    const float* p3 = p2 + t.stride;
    int32_t c = 0;
    for (; c + 16 <= d; c += 16) {
      float* acc = t.acc + static_cast<int64_t>(r) * d + c;
      __m256 a[4][2];
#pragma GCC unroll 4
      for (int x = 0; x < 4; ++x) {
        a[x][0] = _mm256_loadu_ps(acc + x * d);
        a[x][1] = _mm256_loadu_ps(acc + x * d + 8);
      }
      for (int32_t j = 0; j < tile_keys; ++j) {
        const float* v = values + j * value_stride + c;
        Rank1Update4x16(p0 + j, t.stride, _mm256_loadu_ps(v), _mm256_loadu_ps(v + 8), a);
      }
      Store4x16(acc, d, a);
    }
    if (c < d) {  // the last 8 columns
      float* acc = t.acc + static_cast<int64_t>(r) * d + c;
      __m256 a0 = _mm256_loadu_ps(acc);
      __m256 a1 = _mm256_loadu_ps(acc + d);
      __m256 a2 = _mm256_loadu_ps(acc + 2 * d);
      __m256 a3 = _mm256_loadu_ps(acc + 3 * d);
      for (int32_t j = 0; j < tile_keys; ++j) {
        const __m256 v = _mm256_loadu_ps(values + j * value_stride + c);
        a0 = _mm256_fmadd_ps(_mm256_broadcast_ss(p0 + j), v, a0);
        a1 = _mm256_fmadd_ps(_mm256_broadcast_ss(p1 + j), v, a1);
        a2 = _mm256_fmadd_ps(_mm256_broadcast_ss(p2 + j), v, a2);
        a3 = _mm256_fmadd_ps(_mm256_broadcast_ss(p3 + j), v, a3);
      }
      _mm256_storeu_ps(acc, a0);
      _mm256_storeu_ps(acc + d, a1);
      _mm256_storeu_ps(acc + 2 * d, a2);
      _mm256_storeu_ps(acc + 3 * d, a3);
    }
  }
}

}  // namespace

DOCSPARSE_AVX2 void Fp32Tile::RunAvx2(const float* values, int64_t value_stride,
                                      int32_t tile_keys) const {
  const int32_t padded_keys = (tile_keys + 15) / 16 * 16;
  Scores(*this, padded_keys);
  if (mask_slide.width != 0) MaskScores(tile_keys);
  SoftmaxUpdate(*this, tile_keys, padded_keys);
  Accumulate(*this, values, value_stride, tile_keys);
}

}  // namespace docsparse
