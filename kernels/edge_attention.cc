#include "kernels/edge_attention.h"

#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/aligned_vector.h"
#include "kernels/cpu_features.h"
#include "kernels/edge_row_blocks.h"
#include "kernels/vector_exp.h"

namespace docsparse {
namespace {

// Keys per online-softmax step: the running maximum and the accumulator are
// rescaled once per chunk instead of once per key, and a chunk of scores
// (256 bytes) stays in L1.
constexpr int kChunk = 64;

struct RowScratch {
  float* scores;  // [kChunk]
  float* acc;     // [head_dim]
};

// One query row with std::exp, the reference the AVX2 path is tested against;
// `bias` (or null) adds bias[t] to edge t's scaled score.
void AttendRowPortable(const float* query, const float* keys, const float* values,
                       const int32_t* index, int64_t count, int32_t head_dim, float scale,
                       const float* bias, const RowScratch& scratch, float* out) {
  float running_max = -std::numeric_limits<float>::infinity();
  float denominator = 0;
  std::fill(scratch.acc, scratch.acc + head_dim, 0.0f);
  for (int64_t start = 0; start < count; start += kChunk) {
    const int n = static_cast<int>(std::min<int64_t>(kChunk, count - start));
    float chunk_max = -std::numeric_limits<float>::infinity();
    for (int t = 0; t < n; ++t) {
      const float* k = keys + static_cast<int64_t>(index[start + t]) * head_dim;
      float dot = 0;
      for (int32_t d = 0; d < head_dim; ++d) dot += query[d] * k[d];
      scratch.scores[t] = dot * scale + (bias != nullptr ? bias[start + t] : 0.0f);
      chunk_max = std::max(chunk_max, scratch.scores[t]);
    }
    if (chunk_max > running_max) {
      // exp(-inf) = 0 clears the (empty) state on the first chunk.
      const float correction = std::exp(running_max - chunk_max);
      denominator *= correction;
      for (int32_t d = 0; d < head_dim; ++d) scratch.acc[d] *= correction;
      running_max = chunk_max;
    }
    for (int t = 0; t < n; ++t) {
      const float weight = std::exp(scratch.scores[t] - running_max);
      denominator += weight;
      const float* v = values + static_cast<int64_t>(index[start + t]) * head_dim;
      for (int32_t d = 0; d < head_dim; ++d) scratch.acc[d] += weight * v[d];
    }
  }
  const float inverse = denominator > 0 ? 1.0f / denominator : 0.0f;
  for (int32_t d = 0; d < head_dim; ++d) out[d] = scratch.acc[d] * inverse;
}

#define DOCSPARSE_EDGE_AVX2 __attribute__((target("avx2,fma")))

DOCSPARSE_EDGE_AVX2 inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_shuffle_ps(s, s, 1));
  return _mm_cvtss_f32(s);
}

// The same row with 8-wide FMA dot products, a vector exp over the chunk and
// prefetches of the keys a few edges ahead (edges jump around the sequence,
// so the hardware prefetcher cannot guess them). head_dim % 8 == 0.
DOCSPARSE_EDGE_AVX2 void AttendRowAvx2(const float* query, const float* keys, const float* values,
                                       const int32_t* index, int64_t count, int32_t head_dim,
                                       float scale, const float* bias, const RowScratch& scratch,
                                       float* out) {
  constexpr int kAhead = 6;
  const int32_t vectors = head_dim / 8;
  float running_max = -std::numeric_limits<float>::infinity();
  float denominator = 0;
  for (int32_t c = 0; c < vectors; ++c) _mm256_storeu_ps(scratch.acc + 8 * c, _mm256_setzero_ps());
  for (int64_t start = 0; start < count; start += kChunk) {
    const int n = static_cast<int>(std::min<int64_t>(kChunk, count - start));
    const int32_t* chunk = index + start;
    float chunk_max = -std::numeric_limits<float>::infinity();
    for (int t = 0; t < n; ++t) {
      if (start + t + kAhead < count) {
        const char* ahead = reinterpret_cast<const char*>(
            keys + static_cast<int64_t>(chunk[t + kAhead]) * head_dim);
        for (int32_t byte = 0; byte < head_dim * 4; byte += 64) {
          _mm_prefetch(ahead + byte, _MM_HINT_T0);
        }
      }
      const float* k = keys + static_cast<int64_t>(chunk[t]) * head_dim;
      __m256 even = _mm256_setzero_ps();
      __m256 odd = _mm256_setzero_ps();
      int32_t c = 0;
      for (; c + 1 < vectors; c += 2) {
        even = _mm256_fmadd_ps(_mm256_loadu_ps(query + 8 * c), _mm256_loadu_ps(k + 8 * c), even);
        odd = _mm256_fmadd_ps(_mm256_loadu_ps(query + 8 * c + 8), _mm256_loadu_ps(k + 8 * c + 8),
                              odd);
      }
      if (c < vectors) {
        even = _mm256_fmadd_ps(_mm256_loadu_ps(query + 8 * c), _mm256_loadu_ps(k + 8 * c), even);
      }
      const float score = HorizontalSum(_mm256_add_ps(even, odd)) * scale +
                          (bias != nullptr ? bias[start + t] : 0.0f);
      scratch.scores[t] = score;
      chunk_max = std::max(chunk_max, score);
    }
    if (chunk_max > running_max) {
      const float correction = std::exp(running_max - chunk_max);
      denominator *= correction;
      const __m256 factor = _mm256_set1_ps(correction);
      for (int32_t c = 0; c < vectors; ++c) {
        _mm256_storeu_ps(scratch.acc + 8 * c,
                         _mm256_mul_ps(_mm256_loadu_ps(scratch.acc + 8 * c), factor));
      }
      running_max = chunk_max;
    }
    // Pad the chunk to whole vectors with a score whose weight is ~0; the
    // padding lanes are never summed.
    const int padded = (n + 7) & ~7;
    for (int t = n; t < padded; ++t) scratch.scores[t] = running_max - 100.0f;
    const __m256 shift = _mm256_set1_ps(running_max);
    for (int t = 0; t < padded; t += 8) {
      _mm256_storeu_ps(scratch.scores + t,
                       Exp256(_mm256_sub_ps(_mm256_loadu_ps(scratch.scores + t), shift)));
    }
    for (int t = 0; t < n; ++t) {
      const float weight = scratch.scores[t];
      denominator += weight;
      const __m256 w = _mm256_set1_ps(weight);
      const float* v = values + static_cast<int64_t>(chunk[t]) * head_dim;
      if (start + t + kAhead < count) {
        _mm_prefetch(reinterpret_cast<const char*>(
                         values + static_cast<int64_t>(chunk[t + kAhead]) * head_dim),
                     _MM_HINT_T0);
      }
      for (int32_t c = 0; c < vectors; ++c) {
        _mm256_storeu_ps(
            scratch.acc + 8 * c,
            _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 8 * c), _mm256_loadu_ps(scratch.acc + 8 * c)));
      }
    }
  }
  const __m256 inverse = _mm256_set1_ps(denominator > 0 ? 1.0f / denominator : 0.0f);
  for (int32_t c = 0; c < vectors; ++c) {
    _mm256_storeu_ps(out + 8 * c, _mm256_mul_ps(_mm256_loadu_ps(scratch.acc + 8 * c), inverse));
  }
}

// The same row for head_dim = 8·kVectors, the common sizes: dot products
// eight keys at a time, reduced to one vector of eight scores by a transpose
// (no horizontal sum per key), the values of a chunk prefetched while its
// scores are computed, and the accumulator in registers while the chunk's
// values are added. The loops over vectors and over the eight keys are
// unrolled by pragma: our builds are -O2, which leaves them rolled, and then
// the accumulator and the eight dot products live on the stack, each edge's
// p·v waiting on a store-to-load round trip (1.3-1.65x slower at head_dim 32,
// docs/BENCHMARKS.md "SBM's edge executor and freed blocks kept").
template <int kVectors>
DOCSPARSE_EDGE_AVX2 void AttendRowFixed(const float* query, const float* keys, const float* values,
                                        const int32_t* index, int64_t count, float scale,
                                        const float* bias, const RowScratch& scratch, float* out) {
  constexpr int kDim = 8 * kVectors;
  constexpr int kAhead = 16;
  float running_max = -std::numeric_limits<float>::infinity();
  float denominator = 0;
  for (int c = 0; c < kVectors; ++c) _mm256_storeu_ps(scratch.acc + 8 * c, _mm256_setzero_ps());
  for (int64_t start = 0; start < count; start += kChunk) {
    const int n = static_cast<int>(std::min<int64_t>(kChunk, count - start));
    const int32_t* chunk = index + start;
    {
      __m256 q[kVectors];
#pragma GCC unroll 16
      for (int c = 0; c < kVectors; ++c) {
        q[c] = _mm256_mul_ps(_mm256_loadu_ps(query + 8 * c), _mm256_set1_ps(scale));
      }
      for (int t = 0; t < n; t += 8) {
        __m256 dots[8];
#pragma GCC unroll 16
        for (int u = 0; u < 8; ++u) {
          if (t + u >= n) {
            dots[u] = _mm256_setzero_ps();
            continue;
          }
          if (start + t + u + kAhead < count) {
            const float* ahead = keys + static_cast<int64_t>(chunk[t + u + kAhead]) * kDim;
#pragma GCC unroll 16
            for (int line = 0; line < kDim; line += 16) {
              _mm_prefetch(reinterpret_cast<const char*>(ahead + line), _MM_HINT_T0);
            }
          }
          const float* v = values + static_cast<int64_t>(chunk[t + u]) * kDim;
#pragma GCC unroll 16
          for (int line = 0; line < kDim; line += 16) {
            _mm_prefetch(reinterpret_cast<const char*>(v + line), _MM_HINT_T0);
          }
          const float* k = keys + static_cast<int64_t>(chunk[t + u]) * kDim;
          __m256 sum = _mm256_mul_ps(q[0], _mm256_loadu_ps(k));
#pragma GCC unroll 16
          for (int c = 1; c < kVectors; ++c) {
            sum = _mm256_fmadd_ps(q[c], _mm256_loadu_ps(k + 8 * c), sum);
          }
          dots[u] = sum;
        }
        // Transpose-reduce: lane u of the result is the sum of dots[u].
        const __m256 t0 = _mm256_hadd_ps(dots[0], dots[1]);
        const __m256 t1 = _mm256_hadd_ps(dots[2], dots[3]);
        const __m256 t2 = _mm256_hadd_ps(dots[4], dots[5]);
        const __m256 t3 = _mm256_hadd_ps(dots[6], dots[7]);
        const __m256 u0 = _mm256_hadd_ps(t0, t1);
        const __m256 u1 = _mm256_hadd_ps(t2, t3);
        _mm256_storeu_ps(scratch.scores + t, _mm256_add_ps(_mm256_permute2f128_ps(u0, u1, 0x20),
                                                           _mm256_permute2f128_ps(u0, u1, 0x31)));
      }
    }
    if (bias != nullptr) {
      for (int t = 0; t < n; ++t) scratch.scores[t] += bias[start + t];
    }
    float chunk_max = -std::numeric_limits<float>::infinity();
    for (int t = 0; t < n; ++t) chunk_max = std::max(chunk_max, scratch.scores[t]);
    const int padded = (n + 7) & ~7;
    for (int t = n; t < padded; ++t) scratch.scores[t] = chunk_max - 100.0f;
    __m256 acc[kVectors];
#pragma GCC unroll 16
    for (int c = 0; c < kVectors; ++c) acc[c] = _mm256_loadu_ps(scratch.acc + 8 * c);
    if (chunk_max > running_max) {
      const float correction = std::exp(running_max - chunk_max);
      const __m256 factor = _mm256_set1_ps(correction);
      denominator *= correction;
#pragma GCC unroll 16
      for (int c = 0; c < kVectors; ++c) acc[c] = _mm256_mul_ps(acc[c], factor);
      running_max = chunk_max;
    }
    const __m256 shift = _mm256_set1_ps(running_max);
    for (int t = 0; t < padded; t += 8) {
      _mm256_storeu_ps(scratch.scores + t,
                       Exp256(_mm256_sub_ps(_mm256_loadu_ps(scratch.scores + t), shift)));
    }
    for (int t = 0; t < n; ++t) {
      const float weight = scratch.scores[t];
      denominator += weight;
      const __m256 w = _mm256_set1_ps(weight);
      const float* v = values + static_cast<int64_t>(chunk[t]) * kDim;
#pragma GCC unroll 16
      for (int c = 0; c < kVectors; ++c)
        acc[c] = _mm256_fmadd_ps(w, _mm256_loadu_ps(v + 8 * c), acc[c]);
    }
#pragma GCC unroll 16
    for (int c = 0; c < kVectors; ++c) _mm256_storeu_ps(scratch.acc + 8 * c, acc[c]);
  }
  const __m256 inverse = _mm256_set1_ps(denominator > 0 ? 1.0f / denominator : 0.0f);
  for (int c = 0; c < kVectors; ++c) {
    _mm256_storeu_ps(out + 8 * c, _mm256_mul_ps(_mm256_loadu_ps(scratch.acc + 8 * c), inverse));
  }
}

using RowKernel = void (*)(const float*, const float*, const float*, const int32_t*, int64_t,
                           int32_t, float, const float*, const RowScratch&, float*);

template <int kVectors>
void AttendRowFixedAdapter(const float* query, const float* keys, const float* values,
                           const int32_t* index, int64_t count, int32_t /*head_dim*/, float scale,
                           const float* bias, const RowScratch& scratch, float* out) {
  AttendRowFixed<kVectors>(query, keys, values, index, count, scale, bias, scratch, out);
}

// The row kernel for this call: fixed-size AVX2 kernels for the usual head
// sizes, the generic AVX2 one for other multiples of 8, portable otherwise.
RowKernel ChooseRowKernel(const EdgeAttentionParams& p) {
  if (p.isa == EdgeKernelIsa::kPortable || p.head_dim <= 0 || p.head_dim % 8 != 0 ||
      !HostCpuFeatures().avx2_fma) {
    return &AttendRowPortable;
  }
  switch (p.head_dim) {
    case 16:
      return &AttendRowFixedAdapter<2>;
    case 32:
      return &AttendRowFixedAdapter<4>;
    case 64:
      return &AttendRowFixedAdapter<8>;
    case 128:
      return &AttendRowFixedAdapter<16>;
    default:
      return &AttendRowAvx2;
  }
}

}  // namespace

void EdgeAttentionCpu(const EdgeAttentionParams& p, int num_threads) {
  const RowKernel attend_row = ChooseRowKernel(p);
  ForEachEdgeRowBlock(int64_t{p.batch} * p.heads, p.q_len, num_threads, [&]() {
    return [&p, attend_row, buffer = CacheLineVector<float>(kChunk + p.head_dim)](
               int64_t batch_head, int32_t first, int32_t last) mutable {
      const RowScratch scratch{buffer.data(), buffer.data() + kChunk};
      const EdgeListView& view = p.edges[batch_head];
      const float* keys = p.k + batch_head * p.k_len * p.head_dim;
      const float* values = p.v + batch_head * p.k_len * p.head_dim;
      for (int32_t row = first; row < last; ++row) {
        const int64_t offset = (batch_head * p.q_len + row) * p.head_dim;
        float* out = p.out + offset;
        if (row >= view.rows) {
          std::memset(out, 0, sizeof(float) * p.head_dim);
          continue;
        }
        const int64_t begin = view.row_offsets[row];
        const int64_t count = view.row_offsets[row + 1] - begin;
        attend_row(p.q + offset, keys, values, view.keys + begin, count, p.head_dim, p.scale,
                   view.logit_bias != nullptr ? view.logit_bias + begin : nullptr, scratch, out);
      }
    };
  });
}

}  // namespace docsparse
