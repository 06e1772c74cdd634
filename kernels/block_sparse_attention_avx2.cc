// The fp32 block executor on AVX2+FMA with the query rows in the vector
// lanes (Fp32LanesBlock<8>), the AVX-512 executor's form on 8 lanes and 16
// registers: groups of 16 rows (two vectors), scores as [key][row], keys
// and values read where they lie, a vertical online softmax.
#include <immintrin.h>

#include <algorithm>
#include <limits>

#include "kernels/block_sparse_attention.h"
#include "kernels/block_sparse_attention_fp32_tile.h"
#include "kernels/vector_exp.h"

namespace docsparse {

namespace {

#define DOCSPARSE_AVX2 __attribute__((target("avx2,fma")))

using Block = Fp32LanesBlock<8>;

// One group of 8·V rows: its transposed queries and outputs ([head_dim][G]
// floats, G = 8·V), and its softmax state ([G] floats each).
struct LaneGroup {
  const float* q_t;
  float* acc_t;
  float* row_max;
  float* row_sum;
  int32_t head_dim;
};

// Keys per step of the score loop and output columns per pass of the p·v
// loop for a group of V vectors: 12 accumulators, which leave registers for
// the V operand loads and one broadcast (16 in all).
template <int V>
constexpr int kPerStep = V == 1 ? 12 : 6;

// scores[x][row] = q[row]·k[x] for KJ keys and the group's G rows: KJ·V
// accumulators, V query loads and KJ key broadcasts per dimension.
template <int V, int KJ>
DOCSPARSE_AVX2 inline void ScoreKeys(const LaneGroup& g, const float* keys, int64_t key_stride,
                                     float* scores) {
  constexpr int G = 8 * V;
  __m256 a[KJ][V];
#pragma GCC unroll 12
  for (int x = 0; x < KJ; ++x) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) a[x][v] = _mm256_setzero_ps();
  }
  for (int32_t i = 0; i < g.head_dim; ++i) {
    __m256 q[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) q[v] = _mm256_loadu_ps(g.q_t + i * G + 8 * v);
#pragma GCC unroll 12
    for (int x = 0; x < KJ; ++x) {
      const __m256 b = _mm256_broadcast_ss(keys + x * key_stride + i);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) a[x][v] = _mm256_fmadd_ps(b, q[v], a[x][v]);
    }
  }
#pragma GCC unroll 12
  for (int x = 0; x < KJ; ++x) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) _mm256_storeu_ps(scores + x * G + 8 * v, a[x][v]);
  }
}

// The tile's scores, kPerStep keys at a time, then three, then one.
template <int V>
DOCSPARSE_AVX2 void Scores(const LaneGroup& g, const float* keys, int64_t key_stride,
                           int32_t tile_keys, float* scores) {
  constexpr int G = 8 * V;
  constexpr int kStep = kPerStep<V>;
  int32_t j = 0;
  for (; j + kStep <= tile_keys; j += kStep) {
    ScoreKeys<V, kStep>(g, keys + j * key_stride, key_stride, scores + j * G);
  }
  for (; j + 3 <= tile_keys; j += 3) {
    ScoreKeys<V, 3>(g, keys + j * key_stride, key_stride, scores + j * G);
  }
  for (; j < tile_keys; ++j) ScoreKeys<V, 1>(g, keys + j * key_stride, key_stride, scores + j * G);
}

// Sets the scores of the keys a row does not reach through a sliding span
// to kMaskedScore (MaskSlidingScores, with rows in the lanes).
template <int V>
DOCSPARSE_AVX2 void MaskScores(const Block& b, int32_t first_row, int32_t tile_keys,
                               float* scores) {
  constexpr int G = 8 * V;
  const __m256 masked = _mm256_set1_ps(kMaskedScore);
  for (int v = 0; v < V; ++v) {
    alignas(32) int32_t lo[8], hi[8];
    for (int lane = 0; lane < 8; ++lane) {
      SlidingRowKeys(b.mask_span, b.mask_slide, b.first_query + first_row + 8 * v + lane, &lo[lane],
                     &hi[lane]);
    }
    const __m256i lo8 = _mm256_load_si256(reinterpret_cast<const __m256i*>(lo));
    const __m256i hi8 = _mm256_load_si256(reinterpret_cast<const __m256i*>(hi));
    for (int32_t j = 0; j < tile_keys; ++j) {
      const __m256i key = _mm256_set1_epi32(b.tile_begin + j);
      // lo <= key < hi: not (lo > key), and hi > key.
      const __m256 keep = _mm256_castsi256_ps(
          _mm256_andnot_si256(_mm256_cmpgt_epi32(lo8, key), _mm256_cmpgt_epi32(hi8, key)));
      float* s = scores + j * G + 8 * v;
      _mm256_storeu_ps(s, _mm256_blendv_ps(masked, _mm256_loadu_ps(s), keep));
    }
  }
}

// The online-softmax update over the tile (Milakov & Gimelshein), 8 rows
// per vector: the rows' new maxima, what they accumulated rescaled, the
// scores turned into unnormalised probabilities in place, the denominators.
template <int V>
DOCSPARSE_AVX2 void SoftmaxUpdate(const LaneGroup& g, int32_t tile_keys, float* scores) {
  constexpr int G = 8 * V;
  const __m256 minus_infinity = _mm256_set1_ps(-std::numeric_limits<float>::infinity());
  for (int v = 0; v < V; ++v) {
    const __m256 old_max = _mm256_loadu_ps(g.row_max + 8 * v);
    __m256 m[4] = {old_max, old_max, old_max, old_max};
    int32_t j = 0;
    for (; j + 4 <= tile_keys; j += 4) {
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u)
        m[u] = _mm256_max_ps(m[u], _mm256_loadu_ps(scores + (j + u) * G + 8 * v));
    }
    for (; j < tile_keys; ++j) m[0] = _mm256_max_ps(m[0], _mm256_loadu_ps(scores + j * G + 8 * v));
    const __m256 new_max = _mm256_max_ps(_mm256_max_ps(m[0], m[1]), _mm256_max_ps(m[2], m[3]));
    // 0 for rows without a key yet (maximum -inf, which the exponential's
    // clamp keeps finite), else e^(old - new).
    const __m256 seen = _mm256_cmp_ps(old_max, minus_infinity, _CMP_NEQ_OQ);
    const __m256 correction =
        _mm256_and_ps(seen, ExpNonPositive256(_mm256_sub_ps(old_max, new_max)));
    for (int32_t c = 0; c < g.head_dim; ++c) {
      float* acc = g.acc_t + c * G + 8 * v;
      _mm256_storeu_ps(acc, _mm256_mul_ps(_mm256_loadu_ps(acc), correction));
    }
    __m256 sum[2] = {_mm256_setzero_ps(), _mm256_setzero_ps()};
    for (j = 0; j + 2 <= tile_keys; j += 2) {
#pragma GCC unroll 2
      for (int u = 0; u < 2; ++u) {
        float* s = scores + (j + u) * G + 8 * v;
        const __m256 p = ExpNonPositive256(_mm256_sub_ps(_mm256_loadu_ps(s), new_max));
        _mm256_storeu_ps(s, p);
        sum[u] = _mm256_add_ps(sum[u], p);
      }
    }
    if (j < tile_keys) {
      float* s = scores + j * G + 8 * v;
      const __m256 p = ExpNonPositive256(_mm256_sub_ps(_mm256_loadu_ps(s), new_max));
      _mm256_storeu_ps(s, p);
      sum[0] = _mm256_add_ps(sum[0], p);
    }
    const __m256 old_sum = _mm256_loadu_ps(g.row_sum + 8 * v);
    _mm256_storeu_ps(g.row_sum + 8 * v,
                     _mm256_fmadd_ps(old_sum, correction, _mm256_add_ps(sum[0], sum[1])));
    _mm256_storeu_ps(g.row_max + 8 * v, new_max);
  }
}

// acc_t[c][row] += Σ_j p[j][row] · v[j][c] for the C output columns from
// c0: C·V accumulators, V probability loads and C value broadcasts per key.
template <int V, int C>
DOCSPARSE_AVX2 void AccumulateColumns(const LaneGroup& g, const float* scores, const float* values,
                                      int64_t value_stride, int32_t tile_keys, int32_t c0) {
  constexpr int G = 8 * V;
  __m256 a[C][V];
#pragma GCC unroll 12
  for (int c = 0; c < C; ++c) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) a[c][v] = _mm256_loadu_ps(g.acc_t + (c0 + c) * G + 8 * v);
  }
  for (int32_t j = 0; j < tile_keys; ++j) {
    __m256 p[V];
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) p[v] = _mm256_loadu_ps(scores + j * G + 8 * v);
    const float* value = values + j * value_stride + c0;
#pragma GCC unroll 12
    for (int c = 0; c < C; ++c) {
      const __m256 b = _mm256_broadcast_ss(value + c);
#pragma GCC unroll 2
      for (int v = 0; v < V; ++v) a[c][v] = _mm256_fmadd_ps(b, p[v], a[c][v]);
    }
  }
#pragma GCC unroll 12
  for (int c = 0; c < C; ++c) {
#pragma GCC unroll 2
    for (int v = 0; v < V; ++v) _mm256_storeu_ps(g.acc_t + (c0 + c) * G + 8 * v, a[c][v]);
  }
}

template <int V>
DOCSPARSE_AVX2 void RunGroup(const Block& b, int32_t first_row, const float* keys,
                             int64_t key_stride, const float* values, int64_t value_stride,
                             int32_t tile_keys) {
  const int32_t d = b.head_dim;
  const LaneGroup g{b.q_t + first_row * d, b.acc_t + first_row * d, b.row_max + first_row,
                    b.row_sum + first_row, d};
  Scores<V>(g, keys, key_stride, tile_keys, b.scores);
  if (b.mask_slide.width != 0) MaskScores<V>(b, first_row, tile_keys, b.scores);
  SoftmaxUpdate<V>(g, tile_keys, b.scores);
  // Passes of kPerStep columns; head_dim being a multiple of 8, what is left
  // is 8 (two passes of 4) or 2 or 4.
  constexpr int kColumns = kPerStep<V>;
  int32_t c0 = 0;
  for (; c0 + kColumns <= d && d - c0 != 8; c0 += kColumns) {
    AccumulateColumns<V, kColumns>(g, b.scores, values, value_stride, tile_keys, c0);
  }
  for (; c0 + 4 <= d; c0 += 4) {
    AccumulateColumns<V, 4>(g, b.scores, values, value_stride, tile_keys, c0);
  }
  for (; c0 < d; c0 += 2) AccumulateColumns<V, 2>(g, b.scores, values, value_stride, tile_keys, c0);
}

// out[i] = the 8 values of rows[0..7] at column i, for 8 rows of 8 floats.
DOCSPARSE_AVX2 inline void Transpose8x8(__m256 r[8]) {
  __m256 t[8];
  for (int i = 0; i < 8; i += 2) {
    t[i] = _mm256_unpacklo_ps(r[i], r[i + 1]);
    t[i + 1] = _mm256_unpackhi_ps(r[i], r[i + 1]);
  }
  __m256 u[8];
  for (int i = 0; i < 8; i += 4) {
    u[i] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 1] = _mm256_shuffle_ps(t[i], t[i + 2], _MM_SHUFFLE(3, 2, 3, 2));
    u[i + 2] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(1, 0, 1, 0));
    u[i + 3] = _mm256_shuffle_ps(t[i + 1], t[i + 3], _MM_SHUFFLE(3, 2, 3, 2));
  }
  for (int i = 0; i < 4; ++i) {
    r[i] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x20);
    r[i + 4] = _mm256_permute2f128_ps(u[i], u[i + 4], 0x31);
  }
}

// The width (rows) of the group that starts at `first_row`: 16, or 8 at
// the end (padded_rows being a multiple of 8). Run dispatches these two.
int32_t GroupRows(int32_t padded_rows, int32_t first_row) {
  return std::min(Block::kGroupRows, padded_rows - first_row);
}

}  // namespace

template <>
DOCSPARSE_AVX2 void Fp32LanesBlock<8>::LoadQueries(const float* q, int64_t row_stride, int32_t rows,
                                                   float scale) const {
  const __m256 s = _mm256_set1_ps(scale);
  for (int32_t first = 0; first < padded_rows; first += kGroupRows) {
    const int32_t group = GroupRows(padded_rows, first);
    float* q_group = q_t + first * head_dim;
    for (int32_t r0 = 0; r0 < group; r0 += 8) {
      for (int32_t i0 = 0; i0 < head_dim; i0 += 8) {
        __m256 r[8];
        for (int x = 0; x < 8; ++x) {
          const int32_t row = first + r0 + x;
          r[x] = row < rows ? _mm256_mul_ps(_mm256_loadu_ps(q + row * row_stride + i0), s)
                            : _mm256_setzero_ps();
        }
        Transpose8x8(r);
        for (int x = 0; x < 8; ++x) _mm256_storeu_ps(q_group + (i0 + x) * group + r0, r[x]);
      }
    }
  }
}

template <>
DOCSPARSE_AVX2 void Fp32LanesBlock<8>::Run(const float* keys, int64_t key_stride,
                                           const float* values, int64_t value_stride,
                                           int32_t tile_keys) const {
  for (int32_t first = 0; first < padded_rows; first += kGroupRows) {
    if (GroupRows(padded_rows, first) == kGroupRows) {
      RunGroup<2>(*this, first, keys, key_stride, values, value_stride, tile_keys);
    } else {
      RunGroup<1>(*this, first, keys, key_stride, values, value_stride, tile_keys);
    }
  }
}

template <>
DOCSPARSE_AVX2 void Fp32LanesBlock<8>::StoreOutput(float* out, int64_t row_stride,
                                                   int32_t rows) const {
  for (int32_t first = 0; first < padded_rows; first += kGroupRows) {
    const int32_t group = GroupRows(padded_rows, first);
    const float* acc_group = acc_t + first * head_dim;
    for (int32_t r0 = 0; r0 < group && first + r0 < rows; r0 += 8) {
      for (int32_t c0 = 0; c0 < head_dim; c0 += 8) {
        __m256 r[8];
        for (int x = 0; x < 8; ++x) r[x] = _mm256_loadu_ps(acc_group + (c0 + x) * group + r0);
        Transpose8x8(r);
        for (int x = 0; x < 8 && first + r0 + x < rows; ++x) {
          const float sum = row_sum[first + r0 + x];
          const __m256 inverse = _mm256_set1_ps(sum > 0 ? 1.0f / sum : 0.0f);
          _mm256_storeu_ps(out + (first + r0 + x) * row_stride + c0, _mm256_mul_ps(r[x], inverse));
        }
      }
    }
  }
}

}  // namespace docsparse
