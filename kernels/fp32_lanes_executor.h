// The fp32 block executor with the query rows in the vector lanes
// (Fp32LanesBlock<kLanes>), written once for every vector width: scores come
// out as [key][row], so keys are read where they lie (one broadcast per key
// element, no transposed copy) and the online softmax runs down the lanes.
//
// Included by exactly one file per instruction set
// (block_sparse_attention_avx512.cc, block_sparse_attention_avx2.cc), each
// of which first defines
//   - DOCSPARSE_LANES_TARGET, its target attribute, which every function
//     here carries (GCC inlines intrinsics only into functions compiled for
//     them), and
//   - `Simd`, the vector operations this executor needs on that instruction
//     set (a struct of static functions with the same attribute; see either
//     file).
// Everything but Fp32LanesBlock<Simd::kLanes>'s members has internal linkage,
// so the instantiations for different instruction sets never merge: an
// AVX-512 copy of a helper can never serve an AVX2-only CPU.
#ifndef DOCSPARSE_KERNELS_FP32_LANES_EXECUTOR_H_
#define DOCSPARSE_KERNELS_FP32_LANES_EXECUTOR_H_

#include <algorithm>
#include <cstdint>
#include <limits>

#include "kernels/block_sparse_attention.h"
#include "kernels/block_sparse_attention_fp32_tile.h"

#ifndef DOCSPARSE_LANES_TARGET
#error "define DOCSPARSE_LANES_TARGET and Simd before including fp32_lanes_executor.h"
#endif

namespace docsparse {
namespace {

using Block = Fp32LanesBlock<Simd::kLanes>;
using Vec = Simd::Vec;
constexpr int kLanes = Simd::kLanes;

// One group of kLanes·V rows: its transposed queries and outputs
// ([head_dim][G] floats, G = kLanes·V), and its softmax state ([G] floats
// each).
struct LaneGroup {
  const float* q_t;
  float* acc_t;
  float* row_max;
  float* row_sum;
  int32_t head_dim;
};

// Keys per step of the score loop, and output columns per pass of the p·v
// loop, for a group of V vectors: Simd::kAccumulators accumulators, which
// leave registers for the V operand loads and one broadcast.
template <int V>
constexpr int kPerStep = Simd::kAccumulators / V;

// scores[x][row] = q[row]·k[x] for KJ keys and the group's G rows: KJ·V
// accumulators, V query loads and KJ key broadcasts per dimension.
template <int V, int KJ>
DOCSPARSE_LANES_TARGET inline void ScoreKeys(const LaneGroup& g, const float* keys,
                                             int64_t key_stride, float* scores) {
  constexpr int G = kLanes * V;
  Vec a[KJ][V];
#pragma GCC unroll 16
  for (int x = 0; x < KJ; ++x) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) a[x][v] = Simd::Zero();
  }
  for (int32_t i = 0; i < g.head_dim; ++i) {
    Vec q[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) q[v] = Simd::Load(g.q_t + i * G + kLanes * v);
#pragma GCC unroll 16
    for (int x = 0; x < KJ; ++x) {
      const Vec b = Simd::Broadcast(keys + x * key_stride + i);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) a[x][v] = Simd::Fmadd(b, q[v], a[x][v]);
    }
  }
#pragma GCC unroll 16
  for (int x = 0; x < KJ; ++x) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) Simd::Store(scores + x * G + kLanes * v, a[x][v]);
  }
}

// The tile's scores, kPerStep keys at a time, then Simd::kTailKeys, then one.
template <int V>
DOCSPARSE_LANES_TARGET void Scores(const LaneGroup& g, const float* keys, int64_t key_stride,
                                   int32_t tile_keys, float* scores) {
  constexpr int G = kLanes * V;
  constexpr int kStep = kPerStep<V>;
  constexpr int kTail = Simd::kTailKeys;
  int32_t j = 0;
  for (; j + kStep <= tile_keys; j += kStep) {
    ScoreKeys<V, kStep>(g, keys + j * key_stride, key_stride, scores + j * G);
  }
  if constexpr (kStep > kTail) {
    for (; j + kTail <= tile_keys; j += kTail) {
      ScoreKeys<V, kTail>(g, keys + j * key_stride, key_stride, scores + j * G);
    }
  }
  for (; j < tile_keys; ++j) ScoreKeys<V, 1>(g, keys + j * key_stride, key_stride, scores + j * G);
}

// Sets the scores of the keys a row does not reach through a sliding span
// to kMaskedScore (MaskSlidingScores, with rows in the lanes).
template <int V>
DOCSPARSE_LANES_TARGET void MaskScores(const Block& b, int32_t first_row, int32_t tile_keys,
                                       float* scores) {
  constexpr int G = kLanes * V;
  const Vec masked = Simd::Set1(kMaskedScore);
  for (int v = 0; v < V; ++v) {
    alignas(64) int32_t lo[kLanes], hi[kLanes];
    for (int lane = 0; lane < kLanes; ++lane) {
      SlidingRowKeys(b.mask_span, b.mask_slide, b.first_query + first_row + kLanes * v + lane,
                     &lo[lane], &hi[lane]);
    }
    const Simd::Keys lo_keys = Simd::LoadKeys(lo);
    const Simd::Keys hi_keys = Simd::LoadKeys(hi);
    for (int32_t j = 0; j < tile_keys; ++j) {
      float* s = scores + j * G + kLanes * v;
      Simd::Store(s, Simd::KeepInRange(Simd::Load(s), masked, lo_keys, hi_keys, b.tile_begin + j));
    }
  }
}

// The online-softmax update over the tile (Milakov & Gimelshein), kLanes
// rows per vector: the rows' new maxima, what they accumulated rescaled, the
// scores turned into unnormalised probabilities in place, the denominators.
template <int V>
DOCSPARSE_LANES_TARGET void SoftmaxUpdate(const LaneGroup& g, int32_t tile_keys, float* scores) {
  constexpr int G = kLanes * V;
  for (int v = 0; v < V; ++v) {
    const Vec old_max = Simd::Load(g.row_max + kLanes * v);
    Vec m[4] = {old_max, old_max, old_max, old_max};
    int32_t j = 0;
    for (; j + 4 <= tile_keys; j += 4) {
#pragma GCC unroll 4
      for (int u = 0; u < 4; ++u)
        m[u] = Simd::Max(m[u], Simd::Load(scores + (j + u) * G + kLanes * v));
    }
    for (; j < tile_keys; ++j) m[0] = Simd::Max(m[0], Simd::Load(scores + j * G + kLanes * v));
    const Vec new_max = Simd::Max(Simd::Max(m[0], m[1]), Simd::Max(m[2], m[3]));
    const Vec correction = Simd::Correction(old_max, new_max);
    for (int32_t c = 0; c < g.head_dim; ++c) {
      float* acc = g.acc_t + c * G + kLanes * v;
      Simd::Store(acc, Simd::Mul(Simd::Load(acc), correction));
    }
    Vec sum[2] = {Simd::Zero(), Simd::Zero()};
    for (j = 0; j + 2 <= tile_keys; j += 2) {
#pragma GCC unroll 2
      for (int u = 0; u < 2; ++u) {
        float* s = scores + (j + u) * G + kLanes * v;
        const Vec p = Simd::Exp(Simd::Sub(Simd::Load(s), new_max));
        Simd::Store(s, p);
        sum[u] = Simd::Add(sum[u], p);
      }
    }
    if (j < tile_keys) {
      float* s = scores + j * G + kLanes * v;
      const Vec p = Simd::Exp(Simd::Sub(Simd::Load(s), new_max));
      Simd::Store(s, p);
      sum[0] = Simd::Add(sum[0], p);
    }
    const Vec old_sum = Simd::Load(g.row_sum + kLanes * v);
    Simd::Store(g.row_sum + kLanes * v,
                Simd::Fmadd(old_sum, correction, Simd::Add(sum[0], sum[1])));
    Simd::Store(g.row_max + kLanes * v, new_max);
  }
}

// acc_t[c][row] += Σ_j p[j][row] · v[j][c] for the C output columns from
// c0: C·V accumulators, V probability loads and C value broadcasts per key.
template <int V, int C>
DOCSPARSE_LANES_TARGET void AccumulateColumns(const LaneGroup& g, const float* scores,
                                              const float* values, int64_t value_stride,
                                              int32_t tile_keys, int32_t c0) {
  constexpr int G = kLanes * V;
  Vec a[C][V];
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) a[c][v] = Simd::Load(g.acc_t + (c0 + c) * G + kLanes * v);
  }
  for (int32_t j = 0; j < tile_keys; ++j) {
    Vec p[V];
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) p[v] = Simd::Load(scores + j * G + kLanes * v);
    const float* value = values + j * value_stride + c0;
#pragma GCC unroll 16
    for (int c = 0; c < C; ++c) {
      const Vec b = Simd::Broadcast(value + c);
#pragma GCC unroll 4
      for (int v = 0; v < V; ++v) a[c][v] = Simd::Fmadd(b, p[v], a[c][v]);
    }
  }
#pragma GCC unroll 16
  for (int c = 0; c < C; ++c) {
#pragma GCC unroll 4
    for (int v = 0; v < V; ++v) Simd::Store(g.acc_t + (c0 + c) * G + kLanes * v, a[c][v]);
  }
}

template <int V>
DOCSPARSE_LANES_TARGET void RunGroup(const Block& b, int32_t first_row, const float* keys,
                                     int64_t key_stride, const float* values, int64_t value_stride,
                                     int32_t tile_keys) {
  const int32_t d = b.head_dim;
  const LaneGroup g{b.q_t + first_row * d, b.acc_t + first_row * d, b.row_max + first_row,
                    b.row_sum + first_row, d};
  Scores<V>(g, keys, key_stride, tile_keys, b.scores);
  if (b.mask_slide.width != 0) MaskScores<V>(b, first_row, tile_keys, b.scores);
  SoftmaxUpdate<V>(g, tile_keys, b.scores);
  // Passes of kPerStep columns while they leave nothing or at least four;
  // then four, then two (head_dim is a multiple of kLanes, so even).
  constexpr int kColumns = kPerStep<V>;
  int32_t c0 = 0;
  for (; d - c0 == kColumns || d - c0 >= kColumns + 4; c0 += kColumns) {
    AccumulateColumns<V, kColumns>(g, b.scores, values, value_stride, tile_keys, c0);
  }
  if constexpr (kColumns > 4) {
    for (; c0 + 4 <= d; c0 += 4) {
      AccumulateColumns<V, 4>(g, b.scores, values, value_stride, tile_keys, c0);
    }
  }
  for (; c0 < d; c0 += 2) AccumulateColumns<V, 2>(g, b.scores, values, value_stride, tile_keys, c0);
}

// The width (rows) of the group that starts at `first_row`: two vectors, or
// one at the end (padded_rows being a multiple of kLanes). Run dispatches
// these two.
int32_t GroupRows(int32_t padded_rows, int32_t first_row) {
  return std::min(Block::kGroupRows, padded_rows - first_row);
}

}  // namespace

template <>
DOCSPARSE_LANES_TARGET void Block::LoadQueries(const float* q, int64_t row_stride, int32_t rows,
                                               float scale) const {
  const Vec s = Simd::Set1(scale);
  for (int32_t first = 0; first < padded_rows; first += kGroupRows) {
    const int32_t group = GroupRows(padded_rows, first);
    float* q_group = q_t + first * head_dim;
    for (int32_t r0 = 0; r0 < group; r0 += kLanes) {
      for (int32_t i0 = 0; i0 < head_dim; i0 += kLanes) {
        Vec r[kLanes];
        for (int x = 0; x < kLanes; ++x) {
          const int32_t row = first + r0 + x;
          r[x] = row < rows ? Simd::Mul(Simd::Load(q + row * row_stride + i0), s) : Simd::Zero();
        }
        Simd::Transpose(r);
        for (int x = 0; x < kLanes; ++x) Simd::Store(q_group + (i0 + x) * group + r0, r[x]);
      }
    }
  }
}

template <>
DOCSPARSE_LANES_TARGET void Block::Run(const float* keys, int64_t key_stride, const float* values,
                                       int64_t value_stride, int32_t tile_keys) const {
  for (int32_t first = 0; first < padded_rows; first += kGroupRows) {
    if (GroupRows(padded_rows, first) == kGroupRows) {
      RunGroup<2>(*this, first, keys, key_stride, values, value_stride, tile_keys);
    } else {
      RunGroup<1>(*this, first, keys, key_stride, values, value_stride, tile_keys);
    }
  }
}

template <>
DOCSPARSE_LANES_TARGET void Block::StoreOutput(float* out, int64_t row_stride, int32_t rows) const {
  for (int32_t first = 0; first < padded_rows; first += kGroupRows) {
    const int32_t group = GroupRows(padded_rows, first);
    const float* acc_group = acc_t + first * head_dim;
    for (int32_t r0 = 0; r0 < group && first + r0 < rows; r0 += kLanes) {
      for (int32_t c0 = 0; c0 < head_dim; c0 += kLanes) {
        Vec r[kLanes];
        for (int x = 0; x < kLanes; ++x) r[x] = Simd::Load(acc_group + (c0 + x) * group + r0);
        Simd::Transpose(r);
        for (int x = 0; x < kLanes && first + r0 + x < rows; ++x) {
          const float sum = row_sum[first + r0 + x];
          const Vec inverse = Simd::Set1(sum > 0 ? 1.0f / sum : 0.0f);
          Simd::Store(out + (first + r0 + x) * row_stride + c0, Simd::Mul(r[x], inverse));
        }
      }
    }
  }
}

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_FP32_LANES_EXECUTOR_H_
