#include "kernels/edge_attention_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <limits>

#include "kernels/bf16.h"
#include "kernels/cpu_features.h"
#include "kernels/edge_row_blocks.h"
#include "kernels/vector_exp.h"

// GCC 12 warns inside its own AVX-512 headers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace docsparse {
namespace {

#define DOCSPARSE_EDGE_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// Keys per online-softmax step, as the fp32 executor: the running maximum
// and the accumulator are rescaled once per chunk.
constexpr int kChunk = 64;
// How many edges ahead a row's key and value rows are prefetched: the edges
// jump around the sequence, so the hardware prefetcher cannot guess them.
constexpr int kAhead = 16;
// Scores below this (after the shift by the running maximum) give
// probabilities of 0 instead of denormals, which would cost each product
// that reads them a microcode assist; next to the largest, which is 1, they
// change nothing.
constexpr float kSmallestExponent = -87.0f;

// Lane u of the result is the sum of the 16 lanes of x[u]: the partial dot
// products of 16 keys reduced to their 16 scores by 15 additions and 30
// shuffles, instead of a horizontal sum per key.
DOCSPARSE_EDGE_BF16 inline __m512 SumEachOf16(const __m512 x[16]) {
  __m512 pairs[8];
  for (int i = 0; i < 8; ++i) {
    // Per 128-bit lane: (a0+a2, b0+b2, a1+a3, b1+b3).
    pairs[i] = _mm512_add_ps(_mm512_unpacklo_ps(x[2 * i], x[2 * i + 1]),
                             _mm512_unpackhi_ps(x[2 * i], x[2 * i + 1]));
  }
  __m512 quads[4];
  for (int i = 0; i < 4; ++i) {
    // Per 128-bit lane: the four keys 4i..4i+3, summed within the lane.
    quads[i] = _mm512_add_ps(_mm512_shuffle_ps(pairs[2 * i], pairs[2 * i + 1], 0x44),
                             _mm512_shuffle_ps(pairs[2 * i], pairs[2 * i + 1], 0xEE));
  }
  __m512 halves[2];
  for (int i = 0; i < 2; ++i) {
    // Lanes (keys 8i..8i+3: lanes 0+1, 2+3; keys 8i+4..8i+7: lanes 0+1, 2+3).
    halves[i] = _mm512_add_ps(_mm512_shuffle_f32x4(quads[2 * i], quads[2 * i + 1], 0x88),
                              _mm512_shuffle_f32x4(quads[2 * i], quads[2 * i + 1], 0xDD));
  }
  return _mm512_add_ps(_mm512_shuffle_f32x4(halves[0], halves[1], 0x88),
                       _mm512_shuffle_f32x4(halves[0], halves[1], 0xDD));
}

DOCSPARSE_EDGE_BF16 inline void Prefetch(const uint16_t* row, int bytes) {
  for (int byte = 0; byte < bytes; byte += 64) {
    _mm_prefetch(reinterpret_cast<const char*>(row) + byte, _MM_HINT_T0);
  }
}

// Where one (item, head)'s rows lie.
struct HeadRows {
  const uint16_t* keys;
  int64_t key_stride;
  const uint16_t* values;
  int64_t value_stride;
};

// One query row of head_dim = 32·W: scores of 16 keys at a time (W
// VDPBF16PS each, then SumEachOf16), the chunk's online-softmax update in
// fp32 vectors, p·v with the values widened to fp32 (LoadBf16x16), the output rounded to
// bf16. `scores` holds kChunk floats.
template <int W>
DOCSPARSE_EDGE_BF16 void AttendRowBf16(const uint16_t* query, const HeadRows& head,
                                       const int32_t* index, int64_t count, float scale,
                                       const float* bias, float* scores, uint16_t* out) {
  constexpr int kAccumulators = 2 * W;  // 16 fp32 dimensions each
  constexpr int kRowBytes = 64 * W;
  __m512bh q[W];
  for (int w = 0; w < W; ++w) q[w] = (__m512bh)_mm512_loadu_si512(query + 32 * w);
  __m512 acc[kAccumulators];
  for (int c = 0; c < kAccumulators; ++c) acc[c] = _mm512_setzero_ps();
  const __m512 scale16 = _mm512_set1_ps(scale);
  const __m512 minus_inf = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  float running_max = -std::numeric_limits<float>::infinity();
  float denominator = 0;
  for (int64_t start = 0; start < count; start += kChunk) {
    const int n = static_cast<int>(std::min<int64_t>(kChunk, count - start));
    const int32_t* chunk = index + start;
    __m512 max16 = minus_inf;
    for (int t = 0; t < n; t += 16) {
      __m512 partial[16];
      for (int u = 0; u < 16; ++u) {
        if (t + u >= n) {
          partial[u] = _mm512_setzero_ps();
          continue;
        }
        if (start + t + u + kAhead < count) {
          Prefetch(head.keys + chunk[t + u + kAhead] * head.key_stride, kRowBytes);
        }
        // The value row is read after the chunk's scores: fetch it now.
        Prefetch(head.values + chunk[t + u] * head.value_stride, kRowBytes);
        const uint16_t* k = head.keys + chunk[t + u] * head.key_stride;
        __m512 dot = _mm512_setzero_ps();
        for (int w = 0; w < W; ++w) {
          dot = _mm512_dpbf16_ps(dot, q[w], (__m512bh)_mm512_loadu_si512(k + 32 * w));
        }
        partial[u] = dot;
      }
      const __mmask16 real = FirstLanes(n - t);
      __m512 s = _mm512_mul_ps(SumEachOf16(partial), scale16);
      if (bias != nullptr) s = _mm512_add_ps(s, _mm512_maskz_loadu_ps(real, bias + start + t));
      s = _mm512_mask_mov_ps(minus_inf, real, s);
      _mm512_storeu_ps(scores + t, s);
      max16 = _mm512_max_ps(max16, s);
    }
    const float chunk_max = _mm512_reduce_max_ps(max16);
    if (chunk_max > running_max) {
      // exp(-inf) = 0 clears the (empty) state on the first chunk.
      const float correction = std::exp(running_max - chunk_max);
      denominator *= correction;
      const __m512 factor = _mm512_set1_ps(correction);
      for (int c = 0; c < kAccumulators; ++c) acc[c] = _mm512_mul_ps(acc[c], factor);
      running_max = chunk_max;
    }
    const __m512 shift = _mm512_set1_ps(running_max);
    const __m512 floor = _mm512_set1_ps(kSmallestExponent);
    __m512 sum16 = _mm512_setzero_ps();
    for (int t = 0; t < n; t += 16) {
      // -inf (past the chunk) minus a finite maximum stays -inf: no lane
      // below the floor is kept, and the exponential never sees it.
      const __m512 x = _mm512_sub_ps(_mm512_loadu_ps(scores + t), shift);
      const __mmask16 kept = _mm512_cmp_ps_mask(x, floor, _CMP_GT_OQ);
      const __m512 p = _mm512_maskz_mov_ps(kept, ExpNonPositive512(_mm512_max_ps(x, floor)));
      _mm512_storeu_ps(scores + t, p);
      sum16 = _mm512_add_ps(sum16, p);
    }
    denominator += _mm512_reduce_add_ps(sum16);
    for (int t = 0; t < n; ++t) {
      const __m512 p = _mm512_set1_ps(scores[t]);
      const uint16_t* v = head.values + chunk[t] * head.value_stride;
      for (int c = 0; c < kAccumulators; ++c) {
        acc[c] = _mm512_fmadd_ps(p, LoadBf16x16(v + 16 * c, 0xFFFF), acc[c]);
      }
    }
  }
  const __m512 inverse = _mm512_set1_ps(denominator > 0 ? 1.0f / denominator : 0.0f);
  for (int c = 0; c < kAccumulators; ++c) {
    StoreBf16x16(out + 16 * c, _mm512_mul_ps(acc[c], inverse), 0xFFFF);
  }
}

using RowKernel = void (*)(const uint16_t*, const HeadRows&, const int32_t*, int64_t, float,
                           const float*, float*, uint16_t*);

RowKernel ChooseRowKernel(int32_t head_dim) {
  switch (head_dim) {
    case 32:
      return &AttendRowBf16<1>;
    case 64:
      return &AttendRowBf16<2>;
    case 96:
      return &AttendRowBf16<3>;
    case 128:
      return &AttendRowBf16<4>;
    default:
      return nullptr;
  }
}

}  // namespace

bool EdgeAttentionBf16Available(int32_t head_dim) {
  const CpuFeatures& cpu = HostCpuFeatures();
  return cpu.avx512f && cpu.avx512bw_vl && cpu.avx512_bf16 && ChooseRowKernel(head_dim) != nullptr;
}

void EdgeAttentionCpuBf16(const EdgeAttentionBf16Params& p, int num_threads) {
  const RowKernel attend_row = ChooseRowKernel(p.head_dim);
  const RowLayout q_layout = p.q_layout.Resolve(p.heads, p.q_len, p.head_dim);
  const RowLayout k_layout = p.k_layout.Resolve(p.heads, p.k_len, p.head_dim);
  const RowLayout v_layout = p.v_layout.Resolve(p.heads, p.k_len, p.head_dim);
  const RowLayout out_layout = p.out_layout.Resolve(p.heads, p.q_len, p.head_dim);
  ForEachEdgeRowBlock(int64_t{p.batch} * p.heads, p.q_len, num_threads, [&]() {
    return [&, scores = std::array<float, kChunk>{}](int64_t batch_head, int32_t first,
                                                     int32_t last) mutable {
      const EdgeListView& view = p.edges[batch_head];
      const HeadRows head{p.k + k_layout.Start(batch_head, p.heads), k_layout.row_stride,
                          p.v + v_layout.Start(batch_head, p.heads), v_layout.row_stride};
      const uint16_t* queries = p.q + q_layout.Start(batch_head, p.heads);
      uint16_t* outs = p.out + out_layout.Start(batch_head, p.heads);
      for (int32_t row = first; row < last; ++row) {
        uint16_t* out = outs + row * out_layout.row_stride;
        if (row >= view.rows) {
          std::fill(out, out + p.head_dim, uint16_t{0});
          continue;
        }
        const int64_t begin = view.row_offsets[row];
        attend_row(queries + row * q_layout.row_stride, head, view.keys + begin,
                   view.row_offsets[row + 1] - begin, p.scale,
                   view.logit_bias != nullptr ? view.logit_bias + begin : nullptr, scores.data(),
                   out);
      }
    };
  });
}

}  // namespace docsparse
