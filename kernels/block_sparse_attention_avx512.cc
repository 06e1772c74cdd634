// The fp32 block executor on AVX-512 with the query rows in the vector lanes
// (Fp32LanesBlock<16>): scores come out as [key][row], so the keys are read
// where they lie (one broadcast per key element, no transposed copy) and the
// online softmax is vertical.
#include <immintrin.h>

#include <algorithm>
#include <limits>

#include "kernels/block_sparse_attention.h"
#include "kernels/block_sparse_attention_fp32_tile.h"
#include "kernels/vector_exp.h"

// GCC 12 warns inside its own AVX-512 headers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace docsparse {

namespace {

#define DOCSPARSE_AVX512 __attribute__((target("avx512f,avx512bw,avx512vl")))

// One group of 16·V rows: its transposed queries and outputs ([head_dim][G]
// floats, G = 16·V), and its softmax state ([G] floats each).
struct LaneGroup {
  const float* q_t;
  float* acc_t;
  float* row_max;
  float* row_sum;
  int32_t head_dim;
};

// scores[x][row] = q[row]·k[x] for KJ keys and the group's G rows: KJ·V
// accumulators, V query loads and KJ key broadcasts per dimension.
template <int V, int KJ>
DOCSPARSE_AVX512 inline void ScoreKeys(const LaneGroup& g, const float* keys, int64_t key_stride,
                                       float* scores) {
  constexpr int G = 16 * V;
  __m512 a[KJ][V];
#pragma GCC unroll 16
  for (int x = 0; x < KJ; ++x) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) a[x][v] = _mm512_setzero_ps();
  }
  for (int32_t i = 0; i < g.head_dim; ++i) {
    __m512 q[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) q[v] = _mm512_loadu_ps(g.q_t + i * G + 16 * v);
#pragma GCC unroll 16
    for (int x = 0; x < KJ; ++x) {
      const __m512 b = _mm512_set1_ps(keys[x * key_stride + i]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) a[x][v] = _mm512_fmadd_ps(b, q[v], a[x][v]);
    }
  }
#pragma GCC unroll 16
  for (int x = 0; x < KJ; ++x) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(scores + x * G + 16 * v, a[x][v]);
  }
}

// The tile's scores, 16 / V keys at a time (16 accumulators), then four,
// then one.
template <int V>
DOCSPARSE_AVX512 void Scores(const LaneGroup& g, const float* keys, int64_t key_stride,
                             int32_t tile_keys, float* scores) {
  constexpr int G = 16 * V;
  constexpr int kStep = 16 / V;
  int32_t j = 0;
  for (; j + kStep <= tile_keys; j += kStep) {
    ScoreKeys<V, kStep>(g, keys + j * key_stride, key_stride, scores + j * G);
  }
  if constexpr (kStep > 4) {
    for (; j + 4 <= tile_keys; j += 4) {
      ScoreKeys<V, 4>(g, keys + j * key_stride, key_stride, scores + j * G);
    }
  }
  for (; j < tile_keys; ++j) ScoreKeys<V, 1>(g, keys + j * key_stride, key_stride, scores + j * G);
}

// Sets the scores of the keys a row does not reach through a sliding span
// to kMaskedScore (MaskSlidingScores, with rows in the lanes).
template <int V>
DOCSPARSE_AVX512 void MaskScores(const Fp32LanesBlock<16>& b, int32_t first_row, int32_t tile_keys,
                                 float* scores) {
  constexpr int G = 16 * V;
  const __m512 masked = _mm512_set1_ps(kMaskedScore);
  for (int v = 0; v < V; ++v) {
    alignas(64) int32_t lo[16], hi[16];
    for (int lane = 0; lane < 16; ++lane) {
      SlidingRowKeys(b.mask_span, b.mask_slide, b.first_query + first_row + 16 * v + lane,
                     &lo[lane], &hi[lane]);
    }
    const __m512i lo16 = _mm512_load_si512(lo);
    const __m512i hi16 = _mm512_load_si512(hi);
    for (int32_t j = 0; j < tile_keys; ++j) {
      const __m512i key = _mm512_set1_epi32(b.tile_begin + j);
      const __mmask16 keep =
          _mm512_cmple_epi32_mask(lo16, key) & _mm512_cmplt_epi32_mask(key, hi16);
      float* s = scores + j * G + 16 * v;
      _mm512_storeu_ps(s, _mm512_mask_mov_ps(masked, keep, _mm512_loadu_ps(s)));
    }
  }
}

// The online-softmax update over the tile (Milakov & Gimelshein), 16 rows
// per vector: the rows' new maxima, what they accumulated rescaled, the
// scores turned into unnormalised probabilities in place, the denominators.
template <int V>
DOCSPARSE_AVX512 void SoftmaxUpdate(const LaneGroup& g, int32_t tile_keys, float* scores) {
  constexpr int G = 16 * V;
  for (int v = 0; v < V; ++v) {
    const __m512 old_max = _mm512_loadu_ps(g.row_max + 16 * v);
    __m512 m[4] = {old_max, old_max, old_max, old_max};
    int32_t j = 0;
    for (; j + 4 <= tile_keys; j += 4) {
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u)
        m[u] = _mm512_max_ps(m[u], _mm512_loadu_ps(scores + (j + u) * G + 16 * v));
    }
    for (; j < tile_keys; ++j) m[0] = _mm512_max_ps(m[0], _mm512_loadu_ps(scores + j * G + 16 * v));
    const __m512 new_max = _mm512_max_ps(_mm512_max_ps(m[0], m[1]), _mm512_max_ps(m[2], m[3]));
    // 0 for rows without a key yet (maximum -inf, whose difference is not
    // finite), else e^(old - new).
    const __mmask16 seen = _mm512_cmp_ps_mask(
        old_max, _mm512_set1_ps(-std::numeric_limits<float>::infinity()), _CMP_NEQ_OQ);
    const __m512 correction =
        _mm512_maskz_mov_ps(seen, ExpNonPositive512(_mm512_maskz_sub_ps(seen, old_max, new_max)));
    for (int32_t c = 0; c < g.head_dim; ++c) {
      float* acc = g.acc_t + c * G + 16 * v;
      _mm512_storeu_ps(acc, _mm512_mul_ps(_mm512_loadu_ps(acc), correction));
    }
    __m512 sum[2] = {_mm512_setzero_ps(), _mm512_setzero_ps()};
    for (j = 0; j + 2 <= tile_keys; j += 2) {
#pragma GCC unroll 2
      for (int u = 0; u < 2; ++u) {
        float* s = scores + (j + u) * G + 16 * v;
        const __m512 p = ExpNonPositive512(_mm512_sub_ps(_mm512_loadu_ps(s), new_max));
        _mm512_storeu_ps(s, p);
        sum[u] = _mm512_add_ps(sum[u], p);
      }
    }
    if (j < tile_keys) {
      float* s = scores + j * G + 16 * v;
      const __m512 p = ExpNonPositive512(_mm512_sub_ps(_mm512_loadu_ps(s), new_max));
      _mm512_storeu_ps(s, p);
      sum[0] = _mm512_add_ps(sum[0], p);
    }
    const __m512 old_sum = _mm512_loadu_ps(g.row_sum + 16 * v);
    _mm512_storeu_ps(g.row_sum + 16 * v,
                     _mm512_fmadd_ps(old_sum, correction, _mm512_add_ps(sum[0], sum[1])));
    _mm512_storeu_ps(g.row_max + 16 * v, new_max);
  }
}

// acc_t[c][row] += Σ_j p[j][row] · v[j][c] for the C output columns from
// c0: C·V accumulators, V probability loads and C value broadcasts per key.
template <int V, int C>
DOCSPARSE_AVX512 void AccumulateColumns(const LaneGroup& g, const float* scores,
                                        const float* values, int64_t value_stride,
                                        int32_t tile_keys, int32_t c0) {
  constexpr int G = 16 * V;
  __m512 a[C][V];
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) a[c][v] = _mm512_loadu_ps(g.acc_t + (c0 + c) * G + 16 * v);
  }
  for (int32_t j = 0; j < tile_keys; ++j) {
    __m512 p[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) p[v] = _mm512_loadu_ps(scores + j * G + 16 * v);
    const float* value = values + j * value_stride + c0;
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const __m512 b = _mm512_set1_ps(value[c]);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) a[c][v] = _mm512_fmadd_ps(b, p[v], a[c][v]);
    }
  }
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) _mm512_storeu_ps(g.acc_t + (c0 + c) * G + 16 * v, a[c][v]);
  }
}

template <int V>
DOCSPARSE_AVX512 void RunGroup(const Fp32LanesBlock<16>& b, int32_t first_row, const float* keys,
                               int64_t key_stride, const float* values, int64_t value_stride,
                               int32_t tile_keys) {
  const int32_t d = b.head_dim;
  const LaneGroup g{b.q_t + first_row * d, b.acc_t + first_row * d, b.row_max + first_row,
                    b.row_sum + first_row, d};
  Scores<V>(g, keys, key_stride, tile_keys, b.scores);
  if (b.mask_slide.width != 0) MaskScores<V>(b, first_row, tile_keys, b.scores);
  SoftmaxUpdate<V>(g, tile_keys, b.scores);
  constexpr int kColumns = 16 / V;  // 16 accumulators
  for (int32_t c0 = 0; c0 < d; c0 += kColumns) {
    AccumulateColumns<V, kColumns>(g, b.scores, values, value_stride, tile_keys, c0);
  }
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

// The width (rows) of the group that starts at `first_row`: 32, or what is
// left at the end (16, padded_rows being a multiple of 16). The loops below
// step by kGroupRows and Run dispatches only these two widths.
int32_t GroupRows(int32_t padded_rows, int32_t first_row) {
  return std::min(Fp32LanesBlock<16>::kGroupRows, padded_rows - first_row);
}

}  // namespace

template <>
DOCSPARSE_AVX512 void Fp32LanesBlock<16>::LoadQueries(const float* q, int64_t row_stride,
                                                      int32_t rows, float scale) const {
  const __m512 s = _mm512_set1_ps(scale);
  for (int32_t first = 0; first < padded_rows; first += kGroupRows) {
    const int32_t group = GroupRows(padded_rows, first);
    float* q_group = q_t + first * head_dim;
    for (int32_t r0 = 0; r0 < group; r0 += 16) {
      for (int32_t i0 = 0; i0 < head_dim; i0 += 16) {
        __m512 r[16];
        for (int x = 0; x < 16; ++x) {
          const int32_t row = first + r0 + x;
          r[x] = row < rows ? _mm512_mul_ps(_mm512_loadu_ps(q + row * row_stride + i0), s)
                            : _mm512_setzero_ps();
        }
        Transpose16x16(r);
        for (int x = 0; x < 16; ++x) _mm512_storeu_ps(q_group + (i0 + x) * group + r0, r[x]);
      }
    }
  }
}

template <>
DOCSPARSE_AVX512 void Fp32LanesBlock<16>::Run(const float* keys, int64_t key_stride,
                                              const float* values, int64_t value_stride,
                                              int32_t tile_keys) const {
  for (int32_t first = 0; first < padded_rows; first += kGroupRows) {
    if (GroupRows(padded_rows, first) == 32) {
      RunGroup<2>(*this, first, keys, key_stride, values, value_stride, tile_keys);
    } else {
      RunGroup<1>(*this, first, keys, key_stride, values, value_stride, tile_keys);
    }
  }
}

template <>
DOCSPARSE_AVX512 void Fp32LanesBlock<16>::StoreOutput(float* out, int64_t row_stride,
                                                      int32_t rows) const {
  for (int32_t first = 0; first < padded_rows; first += kGroupRows) {
    const int32_t group = GroupRows(padded_rows, first);
    const float* acc_group = acc_t + first * head_dim;
    for (int32_t r0 = 0; r0 < group && first + r0 < rows; r0 += 16) {
      for (int32_t c0 = 0; c0 < head_dim; c0 += 16) {
        __m512 r[16];
        for (int x = 0; x < 16; ++x) r[x] = _mm512_loadu_ps(acc_group + (c0 + x) * group + r0);
        Transpose16x16(r);
        for (int x = 0; x < 16 && first + r0 + x < rows; ++x) {
          const float sum = row_sum[first + r0 + x];
          const __m512 inverse = _mm512_set1_ps(sum > 0 ? 1.0f / sum : 0.0f);
          _mm512_storeu_ps(out + (first + r0 + x) * row_stride + c0, _mm512_mul_ps(r[x], inverse));
        }
      }
    }
  }
}

}  // namespace docsparse
