#include "kernels/block_sparse_attention_avx512_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/aligned_vector.h"
#include "kernels/bf16.h"
#include "kernels/cpu_features.h"
#include "kernels/key_segments.h"
#include "kernels/online_softmax_avx512.h"

// GCC 12 warns inside its own AVX-512 headers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace docsparse {
namespace {

#define DOCSPARSE_AVX512_BF16 __attribute__((target("avx512f,avx512bw,avx512vl,avx512bf16")))

// Keys per tile, as in the fp32 executor: the score tile stays in L2.
constexpr int32_t kKeyTile = 256;

// A pair of bf16 values as VDPBF16PS reads them: `low` in the low half.
uint32_t Pair(uint16_t low, uint16_t high) {
  return static_cast<uint32_t>(low) | static_cast<uint32_t>(high) << 16;
}

// Per-thread buffers, reused across work items. Rows are padded to a
// multiple of 4 (spare rows are zero queries whose results are dropped).
struct Scratch {
  CacheLineVector<uint32_t> q;              // [rows, d/2]: query pairs along head_dim
  CacheLineVector<uint32_t> key_pairs;      // [d/2, kKeyTile]: key j's dims 2i, 2i+1 at [i][j]
  CacheLineVector<uint32_t> value_pairs;    // [kKeyTile/2, d]: keys 2j, 2j+1 of column c at [j][c]
  CacheLineVector<float> scores;            // [rows, kKeyTile]
  CacheLineVector<uint16_t> probabilities;  // [rows, kKeyTile] bf16, padding keys zero
  CacheLineVector<float> acc;               // [rows, d]
  CacheLineVector<float> row_max, row_sum;  // [rows]
};

// Packs one tile of keys and values (rows `stride` elements apart) into the
// pair layouts; spare keys up to the padded count are zero. Keys: 16 keys'
// pair i at a time, by a gather (their rows lie a stride apart); values: two
// rows' 16 columns widened to 32 bits and merged.
DOCSPARSE_AVX512_BF16 void PackTile(const uint16_t* keys, int64_t key_stride,
                                    const uint16_t* values, int64_t value_stride, int32_t tile_keys,
                                    int32_t d, Scratch& s) {
  const int32_t padded_keys = (tile_keys + 15) / 16 * 16;
  const int32_t pairs = d / 2;
  // Row j's pair i is 32-bit element j * key_stride / 2 + i from the tile's
  // start; key_stride is even (Bf16AttentionParams).
  const __m512i rows =
      _mm512_mullo_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                         _mm512_set1_epi32(static_cast<int>(key_stride / 2)));
  for (int32_t j = 0; j < padded_keys; j += 16) {
    const __mmask16 real = j < tile_keys ? FirstLanes(tile_keys - j) : __mmask16{0};
    const void* base = keys + j * key_stride;
    for (int32_t i = 0; i < pairs; ++i) {
      const __m512i pair = _mm512_mask_i32gather_epi32(
          _mm512_setzero_si512(), real, _mm512_add_epi32(rows, _mm512_set1_epi32(i)), base, 4);
      _mm512_storeu_si512(s.key_pairs.data() + static_cast<size_t>(i) * kKeyTile + j, pair);
    }
  }
  const __m256i zero = _mm256_setzero_si256();
  for (int32_t j = 0; 2 * j < tile_keys; ++j) {
    const uint16_t* first = values + (2 * j) * value_stride;
    const uint16_t* second = first + value_stride;
    const bool has_second = 2 * j + 1 < tile_keys;
    uint32_t* out = s.value_pairs.data() + static_cast<size_t>(j) * d;
    for (int32_t c = 0; c < d; c += 16) {
      const __m512i low =
          _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(first + c)));
      const __m512i high = _mm512_cvtepu16_epi32(
          has_second ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(second + c)) : zero);
      _mm512_storeu_si512(out + c, _mm512_or_si512(low, _mm512_slli_epi32(high, 16)));
    }
  }
}

// scores[r][j] = scale · q[r]·k[j], 4 rows x 32 keys (16 at the tail).
DOCSPARSE_AVX512_BF16 void Scores(Scratch& s, int32_t rows, int32_t d, int32_t padded_keys,
                                  float scale) {
  const int32_t pairs = d / 2;
  const __m512 scale16 = _mm512_set1_ps(scale);
  for (int32_t r = 0; r < rows; r += 4) {
    const uint32_t* q0 = s.q.data() + static_cast<size_t>(r) * pairs;
    const uint32_t* q1 = q0 + pairs;
    const uint32_t* q2 = q1 + pairs;
    const uint32_t* q3 = q2 + pairs;
    float* out = s.scores.data() + static_cast<size_t>(r) * kKeyTile;
    int32_t j = 0;
    for (; j + 32 <= padded_keys; j += 32) {
      __m512 a00 = _mm512_setzero_ps(), a01 = _mm512_setzero_ps();
      __m512 a10 = _mm512_setzero_ps(), a11 = _mm512_setzero_ps();
      __m512 a20 = _mm512_setzero_ps(), a21 = _mm512_setzero_ps();
      __m512 a30 = _mm512_setzero_ps(), a31 = _mm512_setzero_ps();
      for (int32_t i = 0; i < pairs; ++i) {
        const uint32_t* kp = s.key_pairs.data() + static_cast<size_t>(i) * kKeyTile + j;
        const __m512bh k0 = (__m512bh)_mm512_loadu_si512(kp);
        const __m512bh k1 = (__m512bh)_mm512_loadu_si512(kp + 16);
        __m512bh b = (__m512bh)_mm512_set1_epi32(static_cast<int>(q0[i]));
        a00 = _mm512_dpbf16_ps(a00, k0, b);
        a01 = _mm512_dpbf16_ps(a01, k1, b);
        b = (__m512bh)_mm512_set1_epi32(static_cast<int>(q1[i]));
        a10 = _mm512_dpbf16_ps(a10, k0, b);
        a11 = _mm512_dpbf16_ps(a11, k1, b);
        b = (__m512bh)_mm512_set1_epi32(static_cast<int>(q2[i]));
        a20 = _mm512_dpbf16_ps(a20, k0, b);
        a21 = _mm512_dpbf16_ps(a21, k1, b);
        b = (__m512bh)_mm512_set1_epi32(static_cast<int>(q3[i]));
        a30 = _mm512_dpbf16_ps(a30, k0, b);
        a31 = _mm512_dpbf16_ps(a31, k1, b);
      }
      _mm512_storeu_ps(out + j, _mm512_mul_ps(a00, scale16));
      _mm512_storeu_ps(out + j + 16, _mm512_mul_ps(a01, scale16));
      _mm512_storeu_ps(out + kKeyTile + j, _mm512_mul_ps(a10, scale16));
      _mm512_storeu_ps(out + kKeyTile + j + 16, _mm512_mul_ps(a11, scale16));
      _mm512_storeu_ps(out + 2 * kKeyTile + j, _mm512_mul_ps(a20, scale16));
      _mm512_storeu_ps(out + 2 * kKeyTile + j + 16, _mm512_mul_ps(a21, scale16));
      _mm512_storeu_ps(out + 3 * kKeyTile + j, _mm512_mul_ps(a30, scale16));
      _mm512_storeu_ps(out + 3 * kKeyTile + j + 16, _mm512_mul_ps(a31, scale16));
    }
    if (j < padded_keys) {  // the last 16
      __m512 a0 = _mm512_setzero_ps(), a1 = _mm512_setzero_ps();
      __m512 a2 = _mm512_setzero_ps(), a3 = _mm512_setzero_ps();
      for (int32_t i = 0; i < pairs; ++i) {
        const __m512bh k = (__m512bh)_mm512_loadu_si512(s.key_pairs.data() +
                                                        static_cast<size_t>(i) * kKeyTile + j);
        a0 = _mm512_dpbf16_ps(a0, k, (__m512bh)_mm512_set1_epi32(static_cast<int>(q0[i])));
        a1 = _mm512_dpbf16_ps(a1, k, (__m512bh)_mm512_set1_epi32(static_cast<int>(q1[i])));
        a2 = _mm512_dpbf16_ps(a2, k, (__m512bh)_mm512_set1_epi32(static_cast<int>(q2[i])));
        a3 = _mm512_dpbf16_ps(a3, k, (__m512bh)_mm512_set1_epi32(static_cast<int>(q3[i])));
      }
      _mm512_storeu_ps(out + j, _mm512_mul_ps(a0, scale16));
      _mm512_storeu_ps(out + kKeyTile + j, _mm512_mul_ps(a1, scale16));
      _mm512_storeu_ps(out + 2 * kKeyTile + j, _mm512_mul_ps(a2, scale16));
      _mm512_storeu_ps(out + 3 * kKeyTile + j, _mm512_mul_ps(a3, scale16));
    }
  }
}

// Online-softmax update of every row over the tile's first tile_keys
// scores, then the probabilities rounded to bf16 (zero at the padding keys)
// for p·v.
DOCSPARSE_AVX512_BF16 void SoftmaxUpdate(Scratch& s, int32_t rows, int32_t d, int32_t tile_keys,
                                         int32_t padded_keys) {
  for (int32_t r = 0; r < rows; ++r) {
    float* row = s.scores.data() + static_cast<size_t>(r) * kKeyTile;
    OnlineSoftmaxRowAvx512(row, tile_keys, padded_keys, s.acc.data() + static_cast<size_t>(r) * d,
                           d, &s.row_max[r], &s.row_sum[r]);
    uint16_t* probabilities = s.probabilities.data() + static_cast<size_t>(r) * kKeyTile;
    for (int32_t j = 0; j < padded_keys; j += 16) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(probabilities + j),
                          (__m256i)_mm512_cvtneps_pbh(_mm512_loadu_ps(row + j)));
    }
  }
}

// Two bf16 values at `p` broadcast to every lane.
DOCSPARSE_AVX512_BF16 inline __m512bh BroadcastPair(const uint16_t* p) {
  uint32_t bits;
  std::memcpy(&bits, p, sizeof(bits));
  return (__m512bh)_mm512_set1_epi32(static_cast<int>(bits));
}

// acc[r] += Σ_j p[r][j] · v[j] over key pairs, 4 rows x 32 columns (16 at
// the tail) in registers: each broadcast probability pair feeds two products.
DOCSPARSE_AVX512_BF16 void Accumulate(Scratch& s, int32_t rows, int32_t d, int32_t tile_keys) {
  const int32_t key_pairs = (tile_keys + 1) / 2;
  for (int32_t r = 0; r < rows; r += 4) {
    // The probabilities of consecutive keys are pairs already, in memory.
    const uint16_t* p0 = s.probabilities.data() + static_cast<size_t>(r) * kKeyTile;
    const uint16_t* p1 = p0 + kKeyTile;
    const uint16_t* p2 = p1 + kKeyTile;
    const uint16_t* p3 = p2 + kKeyTile;
    float* acc = s.acc.data() + static_cast<size_t>(r) * d;
    int32_t c = 0;
    for (; c + 32 <= d; c += 32) {
      __m512 a00 = _mm512_loadu_ps(acc + c), a01 = _mm512_loadu_ps(acc + c + 16);
      __m512 a10 = _mm512_loadu_ps(acc + d + c), a11 = _mm512_loadu_ps(acc + d + c + 16);
      __m512 a20 = _mm512_loadu_ps(acc + 2 * d + c), a21 = _mm512_loadu_ps(acc + 2 * d + c + 16);
      __m512 a30 = _mm512_loadu_ps(acc + 3 * d + c), a31 = _mm512_loadu_ps(acc + 3 * d + c + 16);
      for (int32_t j = 0; j < key_pairs; ++j) {
        const uint32_t* v = s.value_pairs.data() + static_cast<size_t>(j) * d + c;
        const __m512bh v0 = (__m512bh)_mm512_loadu_si512(v);
        const __m512bh v1 = (__m512bh)_mm512_loadu_si512(v + 16);
        __m512bh b = BroadcastPair(p0 + 2 * j);
        a00 = _mm512_dpbf16_ps(a00, v0, b);
        a01 = _mm512_dpbf16_ps(a01, v1, b);
        b = BroadcastPair(p1 + 2 * j);
        a10 = _mm512_dpbf16_ps(a10, v0, b);
        a11 = _mm512_dpbf16_ps(a11, v1, b);
        b = BroadcastPair(p2 + 2 * j);
        a20 = _mm512_dpbf16_ps(a20, v0, b);
        a21 = _mm512_dpbf16_ps(a21, v1, b);
        b = BroadcastPair(p3 + 2 * j);
        a30 = _mm512_dpbf16_ps(a30, v0, b);
        a31 = _mm512_dpbf16_ps(a31, v1, b);
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
      for (int32_t j = 0; j < key_pairs; ++j) {
        const __m512bh v =
            (__m512bh)_mm512_loadu_si512(s.value_pairs.data() + static_cast<size_t>(j) * d + c);
        a0 = _mm512_dpbf16_ps(a0, v, BroadcastPair(p0 + 2 * j));
        a1 = _mm512_dpbf16_ps(a1, v, BroadcastPair(p1 + 2 * j));
        a2 = _mm512_dpbf16_ps(a2, v, BroadcastPair(p2 + 2 * j));
        a3 = _mm512_dpbf16_ps(a3, v, BroadcastPair(p3 + 2 * j));
      }
      _mm512_storeu_ps(acc + c, a0);
      _mm512_storeu_ps(acc + d + c, a1);
      _mm512_storeu_ps(acc + 2 * d + c, a2);
      _mm512_storeu_ps(acc + 3 * d + c, a3);
    }
  }
}

// One (item, head, query block): queries [first, last) against its spans.
void AttendBlock(const Bf16AttentionParams& p, int64_t batch_head, int32_t first, int32_t last,
                 const KeySpan* spans, const KeySlide* slides, int32_t num_spans, Scratch& s) {
  const int32_t rows = last - first;
  const int32_t d = p.head_dim;
  const int32_t pairs = d / 2;
  const int32_t padded_rows = (rows + 3) / 4 * 4;
  s.q.assign(static_cast<size_t>(padded_rows) * pairs, 0u);
  s.acc.assign(static_cast<size_t>(padded_rows) * d, 0.0f);
  s.scores.resize(static_cast<size_t>(padded_rows) * kKeyTile);
  s.probabilities.resize(static_cast<size_t>(padded_rows) * kKeyTile);
  s.row_max.assign(padded_rows, -std::numeric_limits<float>::infinity());
  s.row_sum.assign(padded_rows, 0.0f);
  s.key_pairs.resize(static_cast<size_t>(pairs) * kKeyTile);
  s.value_pairs.resize(static_cast<size_t>(kKeyTile / 2) * d);

  const RowLayout q_layout = p.q_layout.Resolve(p.heads, p.q_len, d);
  const RowLayout k_layout = p.k_layout.Resolve(p.heads, p.k_len, d);
  const RowLayout v_layout = p.v_layout.Resolve(p.heads, p.k_len, d);
  const RowLayout out_layout = p.out_layout.Resolve(p.heads, p.q_len, d);
  const uint16_t* q = p.q + q_layout.Start(batch_head, p.heads) + first * q_layout.row_stride;
  for (int32_t r = 0; r < rows; ++r) {
    const uint16_t* row = q + r * q_layout.row_stride;
    for (int32_t i = 0; i < pairs; ++i) s.q[r * pairs + i] = Pair(row[2 * i], row[2 * i + 1]);
  }
  const uint16_t* keys = p.k + k_layout.Start(batch_head, p.heads);
  const uint16_t* values = p.v + v_layout.Start(batch_head, p.heads);

  for (int32_t span = 0; span < num_spans; ++span) {
    const KeySlide slide = slides != nullptr ? slides[span] : KeySlide{0, 0};
    // A sliding span: the keys any row of the block reaches, each row's
    // others masked tile by tile.
    int32_t begin = 0, end = 0;
    SlidingBlockKeys(spans[span], slide, first, last, &begin, &end);
    for (int32_t tile = begin; tile < end; tile += kKeyTile) {
      const int32_t tile_keys = std::min(kKeyTile, end - tile);
      const int32_t padded_keys = (tile_keys + 15) / 16 * 16;
      PackTile(keys + tile * k_layout.row_stride, k_layout.row_stride,
               values + tile * v_layout.row_stride, v_layout.row_stride, tile_keys, d, s);
      Scores(s, padded_rows, d, padded_keys, p.scale);
      if (slide.width != 0) {
        MaskSlidingScores(s.scores.data(), kKeyTile, rows, first, tile, tile_keys, spans[span],
                          slide);
      }
      SoftmaxUpdate(s, padded_rows, d, tile_keys, padded_keys);
      Accumulate(s, padded_rows, d, tile_keys);
    }
  }

  const int64_t out_start = out_layout.Start(batch_head, p.heads) + first * out_layout.row_stride;
  for (int32_t r = 0; r < rows; ++r) {
    const float inverse = s.row_sum[r] > 0 ? 1.0f / s.row_sum[r] : 0.0f;
    const float* acc = s.acc.data() + static_cast<size_t>(r) * d;
    const int64_t row = out_start + r * out_layout.row_stride;
    for (int32_t i = 0; i < d; ++i) {
      if (p.out != nullptr) {
        p.out[row + i] = acc[i] * inverse;
      } else {
        p.out_bf16[row + i] = FloatToBf16(acc[i] * inverse);
      }
    }
  }
}

}  // namespace

bool Avx512Bf16BlockSparseAttentionAvailable(int32_t head_dim) {
  const CpuFeatures& cpu = HostCpuFeatures();
  return cpu.avx512f && cpu.avx512bw_vl && cpu.avx512_bf16 && head_dim > 0 && head_dim % 16 == 0;
}

void BlockSparseAttentionAvx512Bf16(const Bf16AttentionParams& params,
                                    const BlockSparsePlanView& plan, int num_threads) {
  // Key segments become one sequence first (a copy; only the AMX executor
  // reads them in place).
  const AssembledKeys assembled = AssembleKeySegments(params);
  const Bf16AttentionParams& p = assembled.params;
  ForEachQueryBlock(plan, static_cast<int64_t>(p.batch) * p.heads, num_threads, [&p]() {
    return [&p, scratch = Scratch{}](int64_t batch_head, int32_t first, int32_t last,
                                     const KeySpan* spans, const KeySlide* slides,
                                     int32_t num_spans) mutable {
      AttendBlock(p, batch_head, first, last, spans, slides, num_spans, scratch);
    };
  });
}

}  // namespace docsparse
