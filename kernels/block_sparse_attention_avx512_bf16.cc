#include "kernels/block_sparse_attention_avx512_bf16.h"

#include <immintrin.h>

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/aligned_vector.h"
#include "kernels/bf16.h"
#include "kernels/block_sparse_plan.h"
#include "kernels/cpu_features.h"
#include "kernels/transpose_avx512.h"
#include "kernels/vector_exp.h"

// GCC 12 warns inside its own AVX-512 headers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace docsparse {
namespace {

#define DOCSPARSE_AVX512_BF16 \
  __attribute__((target("avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

// Keys per tile: its packed keys and values (16 KiB each at d = 32) and a
// group's probabilities stay in L1 while the group takes the tile.
constexpr int32_t kKeyTile = 256;

// Keys per packed chunk, the unit in which a head's keys are packed and
// cached (one q·k product's lanes).
constexpr int32_t kChunkKeys = 16;

// Rows computed together. Rows are padded to a multiple of it (spare rows
// are zero queries whose results are dropped).
constexpr int32_t kGroupRows = 8;

// Per-thread buffers, reused across work items.
struct Scratch {
  CacheLineVector<uint32_t> q;              // [rows, d/2]: query pairs along head_dim
  CacheLineVector<uint16_t> probabilities;  // [rows, kKeyTile] bf16, unreached keys zero
  CacheLineVector<float> acc;               // [rows, d], relative to the row's shift
  CacheLineVector<float> shift;             // [rows], log2 (GroupProbabilities)
  CacheLineVector<float> sums;              // [rows, 16]: partial sums of the probabilities
  std::vector<int32_t> reach_lo, reach_hi;  // [rows]: a sliding span's keys in the tile
  CacheLineVector<uint32_t> edge_values;    // [kKeyTile/2, d]: ValuePairsWithinReach
};

// Where key segment i's keys [begin, begin + count) lie among a head's
// packed keys: from packed_begin, a multiple of kChunkKeys, so that a chunk
// holds keys of one segment only and a span that starts where its segment's
// blocks start (LSG's global, derived and token keys) starts a chunk.
struct PackedSegment {
  int32_t begin = 0;
  int32_t count = 0;
  int32_t packed_begin = 0;
};

int32_t RoundUpToChunk(int32_t keys) { return (keys + kChunkKeys - 1) / kChunkKeys * kChunkKeys; }

// The params' key segments (the whole key sequence where it has none), each
// from its packed position.
std::vector<PackedSegment> PackedSegmentsOf(const Bf16AttentionParams& p) {
  if (p.num_key_segments == 0) return {{0, p.k_len, 0}};
  std::vector<PackedSegment> segments;
  int32_t packed = 0;
  for (int32_t i = 0; i < p.num_key_segments; ++i) {
    segments.push_back({p.key_segments[i].begin, p.key_segments[i].count, packed});
    packed += RoundUpToChunk(p.key_segments[i].count);
  }
  return segments;
}

int32_t PackedKeyCount(const std::vector<PackedSegment>& segments) {
  return segments.back().packed_begin + RoundUpToChunk(segments.back().count);
}

// A thread's packed copy of the (item, head) it works on, chunk by chunk,
// each packed the first time one of its blocks reaches it. Chunk c holds
// packed positions [16c, 16c + 16): q·k's key pairs ([d/2][16], key m's dims
// 2i, 2i+1 at [i][m]) and p·v's value pairs ([8][d], keys 2j, 2j+1 of column
// c at [j][c]), zero past its segment's keys. Neighbouring query blocks reach
// mostly the same keys (LSG's local and sparse windows; every key in dense
// attention) and threads take runs of consecutive blocks (ForEachQueryBlock),
// so most chunks are packed once a head instead of once a block (packing was
// ~15% of the executor at 4,096-token LSG; "CPU engine, twenty-third part").
class HeadPack {
 public:
  // Forgets what it holds and makes room for (item, head)s of `chunks` chunks
  // at head size `d`.
  void Reset(int32_t chunks, int32_t d) {
    const size_t values = static_cast<size_t>(chunks) * kChunkKeys * d / 2;
    if (stamps_.size() < static_cast<size_t>(chunks)) stamps_.resize(chunks, 0);
    if (keys_.size() < values) {
      keys_.resize(values);
      values_.resize(values);
    }
    d_ = d;
    batch_head_ = -1;
  }

  // Chunks [first, last) of (item, head) `batch_head` packed, by
  // pack(chunk, keys, values) where they are not yet.
  template <typename Pack>
  void Ensure(int64_t batch_head, int32_t first, int32_t last, Pack pack) {
    if (batch_head != batch_head_) {  // a new head: every stamp is stale
      batch_head_ = batch_head;
      ++generation_;
    }
    for (int32_t chunk = first; chunk < last; ++chunk) {
      if (stamps_[chunk] == generation_) continue;
      pack(chunk, Keys(chunk), Values(chunk));
      stamps_[chunk] = generation_;
    }
  }

  uint32_t* Keys(int32_t chunk) { return keys_.data() + ChunkOffset(chunk); }
  uint32_t* Values(int32_t chunk) { return values_.data() + ChunkOffset(chunk); }

  // The calling thread's: kept across calls, since a fresh one per call
  // would fault its pages in again (4·d bytes per key of the longest
  // sequence the thread has seen).
  static HeadPack& OfThisThread() {
    thread_local HeadPack pack;
    return pack;
  }

 private:
  size_t ChunkOffset(int32_t chunk) const {
    return static_cast<size_t>(chunk) * kChunkKeys * d_ / 2;
  }

  int32_t d_ = 0;
  int64_t batch_head_ = -1;
  uint64_t generation_ = 0;
  std::vector<uint64_t> stamps_;  // generation in which each chunk was packed
  CacheLineVector<uint32_t> keys_, values_;
};

// Packs chunk `chunk` of (item, head) `batch_head` into `keys` and `values`
// (HeadPack's layouts). Keys: 16 keys' 16 pairs at a time, each key's pairs as
// they lie in memory (dims 2i, 2i+1 are adjacent) transposed into pair-major
// rows (a gather per 16 keys was slower); values: two rows' 16 columns
// widened to 32 bits and merged.
DOCSPARSE_AVX512_BF16 void PackChunk(const Bf16AttentionParams& p,
                                     const std::vector<PackedSegment>& segments, int64_t batch_head,
                                     int32_t chunk, uint32_t* keys, uint32_t* values) {
  const int32_t position = chunk * kChunkKeys;
  size_t i = 0;
  while (i + 1 < segments.size() && segments[i + 1].packed_begin <= position) ++i;
  const int32_t offset = position - segments[i].packed_begin;
  const int32_t real = std::min(kChunkKeys, segments[i].count - offset);
  const SegmentRows<uint16_t> rows = FindKeyRows(p, batch_head, segments[i].begin + offset);
  const int32_t d = p.head_dim;
  // The keys come from L3 or memory, once a head: their values now, and the
  // next two chunks (which Ensure packs next), asked for ahead.
  const int32_t ahead = std::min(3 * kChunkKeys, segments[i].count - offset);
  for (int32_t m = 0; m < ahead; ++m) {
    for (int32_t c = 0; c < d; c += 32) {  // 64-byte lines
      if (m >= kChunkKeys) {
        _mm_prefetch(reinterpret_cast<const char*>(rows.k + m * rows.k_stride + c), _MM_HINT_T0);
      }
      _mm_prefetch(reinterpret_cast<const char*>(rows.v + m * rows.v_stride + c), _MM_HINT_T0);
    }
  }
  const int32_t pairs = d / 2;
  for (int32_t first_pair = 0; first_pair < pairs; first_pair += 16) {
    const int32_t count = std::min(16, pairs - first_pair);
    const __mmask16 lanes = FirstLanes(count);
    __m512 block[16];
    for (int32_t m = 0; m < 16; ++m) {
      block[m] = m < real ? _mm512_castsi512_ps(_mm512_maskz_loadu_epi32(
                                lanes, rows.k + m * rows.k_stride + 2 * first_pair))
                          : _mm512_setzero_ps();
    }
    Transpose16x16Avx512(block);
    for (int32_t r = 0; r < count; ++r) {
      _mm512_storeu_si512(keys + (first_pair + r) * kChunkKeys, _mm512_castps_si512(block[r]));
    }
  }
  const __m256i zero = _mm256_setzero_si256();
  for (int32_t j = 0; j < kChunkKeys / 2; ++j) {
    const uint16_t* first = 2 * j < real ? rows.v + (2 * j) * rows.v_stride : nullptr;
    const uint16_t* second = 2 * j + 1 < real ? rows.v + (2 * j + 1) * rows.v_stride : nullptr;
    uint32_t* out = values + j * d;
    for (int32_t c = 0; c < d; c += 16) {
      const __m512i low = _mm512_cvtepu16_epi32(
          first != nullptr ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(first + c))
                           : zero);
      const __m512i high = _mm512_cvtepu16_epi32(
          second != nullptr ? _mm256_loadu_si256(reinterpret_cast<const __m256i*>(second + c))
                            : zero);
      _mm512_storeu_si512(out + c, _mm512_or_si512(low, _mm512_slli_epi32(high, 16)));
    }
  }
}

// The probabilities are 2^(scale2·score − shift) with a per-row reference
// shift instead of a running maximum, as the AMX executor's register path
// keeps them: each row's first real chunk sets its shift to the ceiling of
// that chunk's largest exponent, and a later chunk raises it only where an
// exponent would exceed kLazyRescaleLog2 (a gap of ~21 in the scaled logits),
// which almost never happens. Values up to 2^30 are exact enough in fp32 and
// bf16 (both keep 8 exponent bits), the final division by the row's sum
// cancels the shift, and the shift stays an integer, so a raise rescales
// what the row holds by an exact power of two. Scores then never leave the
// registers: no fp32 score tile, no pass for the maximum, one for the
// exponentials, and 2^t in five instructions (Exp2ForBf16_512).
constexpr float kLazyRescaleLog2 = 30.0f;
// An exponent 2^t turns into an exact 0 (keys a row does not reach, padding
// keys), and finite, which Exp2ForBf16_512 needs.
constexpr float kPaddingExponent = -1000.0f;

// Key lanes j .. j + 15 of the tile that lie in [lo, hi) (tile-relative).
DOCSPARSE_AVX512_BF16 inline __mmask16 LanesWithin(int32_t j, int32_t lo, int32_t hi) {
  const __m512i index =
      _mm512_add_epi32(_mm512_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15),
                       _mm512_set1_epi32(j));
  return _mm512_mask_cmplt_epi32_mask(_mm512_cmpge_epi32_mask(index, _mm512_set1_epi32(lo)), index,
                                      _mm512_set1_epi32(hi));
}

// Raises row `row`'s shift so that its largest exponent in the chunk
// (sums a0, a1 over the lanes `real0`, `real1`) becomes at most 0, and
// rescales by 2^(old − new) what the row holds: its output so far (earlier
// tiles), its partial sums and the probabilities of this tile's keys before
// `j` (0 on the row's first real chunk, whose old shift is −∞).
DOCSPARSE_AVX512_BF16 void RaiseShift(Scratch& s, int32_t row, int32_t j, int32_t d, __m512 scale2,
                                      __m512 a0, __m512 a1, __mmask16 real0, __mmask16 real1,
                                      __m512& sum) {
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  const __m512 x = _mm512_max_ps(_mm512_mask_mul_ps(lowest, real0, a0, scale2),
                                 _mm512_mask_mul_ps(lowest, real1, a1, scale2));
  const float old_shift = s.shift[row];
  const float new_shift = std::ceil(_mm512_reduce_max_ps(x));
  s.shift[row] = new_shift;
  // The row's first real chunk: what it holds is all zero, which the factor
  // 2^−∞ would leave so (every row of every block comes here once; the
  // rescale and its exp2 call were 2.8% of dense attention at 512 tokens
  // in perf).
  if (old_shift == -std::numeric_limits<float>::infinity()) return;
  const __m512 factor = _mm512_set1_ps(std::exp2(old_shift - new_shift));
  sum = _mm512_mul_ps(sum, factor);
  float* acc = s.acc.data() + static_cast<size_t>(row) * d;
  for (int32_t c = 0; c < d; c += 16) {
    _mm512_storeu_ps(acc + c, _mm512_mul_ps(_mm512_loadu_ps(acc + c), factor));
  }
  uint16_t* probabilities = s.probabilities.data() + static_cast<size_t>(row) * kKeyTile;
  for (int32_t k = 0; k < j; k += 16) {
    const __m512 p = _mm512_castsi512_ps(_mm512_slli_epi32(
        _mm512_cvtepu16_epi32(
            _mm256_loadu_si256(reinterpret_cast<const __m256i*>(probabilities + k))),
        16));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(probabilities + k),
                        (__m256i)_mm512_cvtneps_pbh(_mm512_mul_ps(p, factor)));
  }
}

// The exponents scale2·a − shift of a chunk's lanes (kPair: both halves),
// kPaddingExponent where kMasked and the lane is not real.
template <bool kPair, bool kMasked>
DOCSPARSE_AVX512_BF16 inline void Exponents(__m512 a0, __m512 a1, __m512 scale2, float shift,
                                            __mmask16 real0, __mmask16 real1, __m512* t0,
                                            __m512* t1) {
  const __m512 shift16 = _mm512_set1_ps(shift);
  const __m512 padding = _mm512_set1_ps(kPaddingExponent);
  *t0 = _mm512_fmsub_ps(a0, scale2, shift16);
  if (kPair) *t1 = _mm512_fmsub_ps(a1, scale2, shift16);
  if (kMasked) {
    *t0 = _mm512_mask_mov_ps(padding, real0, *t0);
    if (kPair) *t1 = _mm512_mask_mov_ps(padding, real1, *t1);
  }
}

// Row `row`'s probabilities over keys j .. j + 31 (j .. j + 15 without
// kPair) from its sums a0 (and a1), into s.probabilities as bf16 and into
// its 16 partial sums; with kMasked only the lanes real0 and real1 count,
// the others' probabilities are 0.
template <bool kPair, bool kMasked>
DOCSPARSE_AVX512_BF16 inline void ChunkProbabilities(Scratch& s, int32_t row, int32_t j, int32_t d,
                                                     __m512 scale2, __m512 a0, __m512 a1,
                                                     __mmask16 real0, __mmask16 real1,
                                                     __m512& sum) {
  const __m512 limit = _mm512_set1_ps(kLazyRescaleLog2);
  const __m512 padding = _mm512_set1_ps(kPaddingExponent);
  __m512 t0, t1 = padding;
  Exponents<kPair, kMasked>(a0, a1, scale2, s.shift[row], real0, real1, &t0, &t1);
  const __mmask16 above = _mm512_cmp_ps_mask(t0, limit, _CMP_GT_OQ) |
                          (kPair ? _mm512_cmp_ps_mask(t1, limit, _CMP_GT_OQ) : __mmask16{0});
  if (__builtin_expect(above != 0, 0)) {
    RaiseShift(s, row, j, d, scale2, a0, a1, kMasked ? real0 : __mmask16{0xFFFF},
               kPair ? (kMasked ? real1 : __mmask16{0xFFFF}) : __mmask16{0}, sum);
    Exponents<kPair, kMasked>(a0, a1, scale2, s.shift[row], real0, real1, &t0, &t1);
  }
  uint16_t* out = s.probabilities.data() + static_cast<size_t>(row) * kKeyTile + j;
  const __m512 e0 = Exp2ForBf16_512(t0);
  if (kPair) {
    const __m512 e1 = Exp2ForBf16_512(t1);
    _mm512_storeu_si512(out, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(e1, e0)));
    sum = _mm512_add_ps(sum, _mm512_add_ps(e0, e1));
  } else {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out), (__m256i)_mm512_cvtneps_pbh(e0));
    sum = _mm512_add_ps(sum, e0);
  }
}

// A tile: up to kKeyTile packed keys from a chunk's start (the head's
// chunks from its first on, in HeadPack's layouts), and which of them each
// row reaches: [lo, hi) tile-relative per row for a sliding span; every row
// [first_key, tile_keys) otherwise (a span may start inside its first chunk).
struct Tile {
  const uint32_t* key_chunks = nullptr;
  const uint32_t* value_pairs = nullptr;
  const int32_t* lo = nullptr;  // [rows]; null: first_key for every row
  const int32_t* hi = nullptr;  // [rows]; null: tile_keys for every row
  int32_t first_key = 0;
  int32_t tile_keys = 0;
};

// The products of both halves: a[row][h] += Σ_i broadcast(pair i of row
// `row`) · (pairs + h·second_half)[i][0 .. 15], for kGroupRows rows and 32
// lanes (kPair) or 16. q·k takes each row's query pairs against two chunks'
// key pairs, p·v each row's probability pairs against 32 columns of value
// pairs. 16 independent sums: VDPBF16PS's latency times its throughput needs
// about 12 in flight.
template <bool kPair>
DOCSPARSE_AVX512_BF16 inline void DotPairs(const void* rows, int64_t row_stride,
                                           const uint32_t* pairs, int64_t pair_stride,
                                           int64_t second_half, int32_t count,
                                           __m512 a[kGroupRows][2]) {
  const auto* row_bytes = static_cast<const uint8_t*>(rows);
  for (int32_t i = 0; i < count; ++i) {
    const uint32_t* v = pairs + static_cast<size_t>(i) * pair_stride;
    const __m512bh v0 = (__m512bh)_mm512_loadu_si512(v);
    const __m512bh v1 = kPair ? (__m512bh)_mm512_loadu_si512(v + second_half) : v0;
#pragma GCC unroll 8
    for (int32_t row = 0; row < kGroupRows; ++row) {
      uint32_t bits;  // two bf16 values, as they lie in memory
      std::memcpy(&bits, row_bytes + (row * row_stride + i) * sizeof(uint32_t), sizeof(bits));
      const __m512bh b = (__m512bh)_mm512_set1_epi32(static_cast<int>(bits));
      a[row][0] = _mm512_dpbf16_ps(a[row][0], v0, b);
      if (kPair) a[row][1] = _mm512_dpbf16_ps(a[row][1], v1, b);
    }
  }
}

// kGroupRows rows' q·k over keys j .. j + 31 (kPair) or j .. j + 15, then
// their probabilities.
template <bool kPair>
DOCSPARSE_AVX512_BF16 inline void ChunkOfRows(Scratch& s, int32_t r, int32_t j, int32_t d,
                                              __m512 scale2, const Tile& tile,
                                              __m512 sums[kGroupRows]) {
  const int32_t pairs = d / 2;
  const int64_t chunk_values = static_cast<int64_t>(kChunkKeys) * pairs;
  __m512 a[kGroupRows][2];
#pragma GCC unroll 8
  for (int32_t i = 0; i < kGroupRows; ++i) a[i][0] = a[i][1] = _mm512_setzero_ps();
  DotPairs<kPair>(s.q.data() + static_cast<size_t>(r) * pairs, pairs,
                  tile.key_chunks + j / kChunkKeys * chunk_values, kChunkKeys, chunk_values, pairs,
                  a);
  const int32_t width = kPair ? 32 : 16;
  const bool masked = tile.lo != nullptr || j < tile.first_key || j + width > tile.tile_keys;
#pragma GCC unroll 8
  for (int32_t i = 0; i < kGroupRows; ++i) {
    if (!masked) {
      ChunkProbabilities<kPair, false>(s, r + i, j, d, scale2, a[i][0], a[i][1], 0, 0, sums[i]);
      continue;
    }
    const int32_t lo = tile.lo != nullptr ? tile.lo[r + i] : tile.first_key;
    const int32_t hi = tile.hi != nullptr ? tile.hi[r + i] : tile.tile_keys;
    ChunkProbabilities<kPair, true>(s, r + i, j, d, scale2, a[i][0], a[i][1],
                                    LanesWithin(j, lo, hi), LanesWithin(j + 16, lo, hi), sums[i]);
  }
}

// Rows r .. r + kGroupRows - 1's probabilities over the tile's keys
// (padded_keys, a multiple of 16, of which the tile's reach counts) into
// s.probabilities, their sums into s.sums, shifts raised as needed.
DOCSPARSE_AVX512_BF16 inline void GroupProbabilities(Scratch& s, int32_t r, int32_t d,
                                                     int32_t padded_keys, __m512 scale2,
                                                     const Tile& tile) {
  __m512 sums[kGroupRows];
  for (int32_t i = 0; i < kGroupRows; ++i) sums[i] = _mm512_loadu_ps(s.sums.data() + (r + i) * 16);
  int32_t j = 0;
  for (; j + 32 <= padded_keys; j += 32) ChunkOfRows<true>(s, r, j, d, scale2, tile, sums);
  if (j < padded_keys) ChunkOfRows<false>(s, r, j, d, scale2, tile, sums);
  for (int32_t i = 0; i < kGroupRows; ++i) _mm512_storeu_ps(s.sums.data() + (r + i) * 16, sums[i]);
}

// acc[r] += Σ_j p[r][j] · v[j] over key pairs, kGroupRows rows x 32
// columns (16 at the tail) in registers. The probabilities of consecutive
// keys are pairs already, in memory.
template <bool kPair>
DOCSPARSE_AVX512_BF16 inline void AccumulateColumns(Scratch& s, const Tile& tile, int32_t r,
                                                    int32_t c, int32_t d, int32_t key_pairs) {
  float* acc = s.acc.data() + static_cast<size_t>(r) * d + c;
  __m512 a[kGroupRows][2];
#pragma GCC unroll 8
  for (int32_t row = 0; row < kGroupRows; ++row) {
    a[row][0] = _mm512_loadu_ps(acc + row * d);
    if (kPair) a[row][1] = _mm512_loadu_ps(acc + row * d + 16);
  }
  DotPairs<kPair>(s.probabilities.data() + static_cast<size_t>(r) * kKeyTile, kKeyTile / 2,
                  tile.value_pairs + c, d, 16, key_pairs, a);
#pragma GCC unroll 8
  for (int32_t row = 0; row < kGroupRows; ++row) {
    _mm512_storeu_ps(acc + row * d, a[row][0]);
    if (kPair) _mm512_storeu_ps(acc + row * d + 16, a[row][1]);
  }
}

// Every row against one packed tile, a group of rows at a time: its
// probabilities, then p·v while they are in L1 (with the packed keys and
// values, 37 KiB at d = 32). As measured, no faster than all the block's
// probabilities first; the scratch a group touches is smaller.
DOCSPARSE_AVX512_BF16 void AttendTile(Scratch& s, int32_t rows, int32_t d, float scale,
                                      const Tile& tile) {
  const int32_t padded_keys = RoundUpToChunk(tile.tile_keys);
  constexpr float kLog2e = 1.44269504088896341f;
  const __m512 scale2 = _mm512_set1_ps(scale * kLog2e);
  const int32_t key_pairs = (tile.tile_keys + 1) / 2;
  for (int32_t r = 0; r < rows; r += kGroupRows) {
    GroupProbabilities(s, r, d, padded_keys, scale2, tile);
    int32_t c = 0;
    for (; c + 32 <= d; c += 32) AccumulateColumns<true>(s, tile, r, c, d, key_pairs);
    if (c < d) AccumulateColumns<false>(s, tile, r, c, d, key_pairs);
  }
}

// The tile's value pairs, copied into s.edge_values with those of keys
// outside [first_key, tile_keys) zeroed, for a tile whose first or last chunk
// holds such keys: their probabilities are 0, but 0 · NaN is not, and keys
// no span reaches may hold anything.
const uint32_t* ValuePairsWithinReach(const Tile& t, int32_t d, Scratch& s) {
  const int32_t key_pairs = (t.tile_keys + 1) / 2;
  s.edge_values.resize(static_cast<size_t>(key_pairs) * d);
  uint32_t* pairs = s.edge_values.data();
  std::memcpy(pairs, t.value_pairs, s.edge_values.size() * sizeof(uint32_t));
  const auto keep = [&](int32_t pair, uint32_t halves) {
    for (int32_t c = 0; c < d; ++c) pairs[pair * d + c] &= halves;
  };
  for (int32_t pair = 0; 2 * pair + 1 < t.first_key; ++pair) keep(pair, 0);
  if (t.first_key % 2 == 1)
    keep(t.first_key / 2, 0xFFFF0000u);  // key first_key - 1 is the low half
  if (t.tile_keys % 2 == 1) keep(t.tile_keys / 2, 0x0000FFFFu);  // key tile_keys is the high half
  return pairs;
}

// One (item, head, query block): queries [first, last) against its spans,
// each span's keys segment by segment (a tile lies in one), tile by tile from
// `pack`, which packs the chunks a tile needs that it does not yet hold.
DOCSPARSE_AVX512_BF16 void AttendBlock(const Bf16AttentionParams& p,
                                       const std::vector<PackedSegment>& segments, HeadPack& pack,
                                       int64_t batch_head, int32_t first, int32_t last,
                                       const KeySpan* spans, const KeySlide* slides,
                                       int32_t num_spans, Scratch& s) {
  const int32_t rows = last - first;
  const int32_t d = p.head_dim;
  const int32_t pairs = d / 2;
  const int32_t padded_rows = (rows + kGroupRows - 1) / kGroupRows * kGroupRows;
  s.q.resize(static_cast<size_t>(padded_rows) * pairs);
  AssignZeros(s.acc, static_cast<size_t>(padded_rows) * d);
  s.probabilities.resize(static_cast<size_t>(padded_rows) * kKeyTile);
  s.shift.assign(padded_rows, -std::numeric_limits<float>::infinity());
  AssignZeros(s.sums, static_cast<size_t>(padded_rows) * 16);

  const RowLayout q_layout = p.q_layout.Resolve(p.heads, p.q_len, d);
  const RowLayout out_layout = p.out_layout.Resolve(p.heads, p.q_len, d);
  const uint16_t* q = p.q + q_layout.Start(batch_head, p.heads) + first * q_layout.row_stride;
  // A row's dims 2i, 2i+1 are a pair as they lie in memory (little-endian).
  // 16 dims a vector (a memcpy call per row showed as 2% of the executor's
  // samples in perf; no change measurable in time).
  for (int32_t r = 0; r < rows; ++r) {
    const uint16_t* from = q + r * q_layout.row_stride;
    uint32_t* to = s.q.data() + static_cast<size_t>(r) * pairs;
    for (int32_t c = 0; c < d; c += 16) {
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(to + c / 2),
                          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(from + c)));
    }
  }
  std::fill(s.q.begin() + static_cast<size_t>(rows) * pairs, s.q.end(), 0u);  // spare rows
  const auto pack_chunk = [&](int32_t chunk, uint32_t* keys, uint32_t* values) {
    PackChunk(p, segments, batch_head, chunk, keys, values);
  };

  for (int32_t span = 0; span < num_spans; ++span) {
    const KeySlide slide = slides != nullptr ? slides[span] : KeySlide{0, 0};
    // A sliding span: the keys any row of the block reaches, each row's
    // others masked tile by tile.
    int32_t begin = 0, end = 0;
    SlidingBlockKeys(spans[span], slide, first, last, &begin, &end);
    for (const PackedSegment& segment : segments) {
      const int32_t piece_begin = std::max(begin, segment.begin);
      const int32_t piece_end = std::min(end, segment.begin + segment.count);
      if (piece_begin >= piece_end) continue;
      const int32_t to_packed = segment.packed_begin - segment.begin;
      const int32_t packed_begin = piece_begin + to_packed;
      const int32_t packed_end = piece_end + to_packed;
      for (int32_t tile = packed_begin / kChunkKeys * kChunkKeys; tile < packed_end;
           tile += kKeyTile) {
        Tile t;
        t.tile_keys = std::min(kKeyTile, packed_end - tile);
        t.first_key = std::max(0, packed_begin - tile);
        const int32_t first_chunk = tile / kChunkKeys;
        pack.Ensure(batch_head, first_chunk, first_chunk + RoundUpToChunk(t.tile_keys) / kChunkKeys,
                    pack_chunk);
        t.key_chunks = pack.Keys(first_chunk);
        t.value_pairs = pack.Values(first_chunk);
        if (t.first_key != 0 || t.tile_keys % kChunkKeys != 0) {
          t.value_pairs = ValuePairsWithinReach(t, d, s);
        }
        if (slide.width != 0) {
          // Spare rows reach every key; their results are dropped.
          s.reach_lo.assign(padded_rows, t.first_key);
          s.reach_hi.assign(padded_rows, t.tile_keys);
          for (int32_t r = 0; r < rows; ++r) {
            int32_t lo = 0, hi = 0;
            SlidingRowKeys(spans[span], slide, first + r, &lo, &hi);
            s.reach_lo[r] = std::max(lo, piece_begin) + to_packed - tile;
            s.reach_hi[r] = std::min(std::min(hi, piece_end) + to_packed - tile, t.tile_keys);
          }
          t.lo = s.reach_lo.data();
          t.hi = s.reach_hi.data();
        }
        AttendTile(s, padded_rows, d, p.scale, t);
      }
    }
  }

  const int64_t out_start = out_layout.Start(batch_head, p.heads) + first * out_layout.row_stride;
  for (int32_t r = 0; r < rows; ++r) {
    const float sum = _mm512_reduce_add_ps(_mm512_loadu_ps(s.sums.data() + r * 16));
    const __m512 inverse = _mm512_set1_ps(sum > 0 ? 1.0f / sum : 0.0f);
    const float* acc = s.acc.data() + static_cast<size_t>(r) * d;
    const int64_t row = out_start + r * out_layout.row_stride;
    for (int32_t c = 0; c < d; c += 16) {
      const __m512 out = _mm512_mul_ps(_mm512_loadu_ps(acc + c), inverse);
      if (p.out != nullptr) {
        _mm512_storeu_ps(p.out + row + c, out);
      } else {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p.out_bf16 + row + c),
                            (__m256i)_mm512_cvtneps_pbh(out));
      }
    }
  }
}

}  // namespace

bool Avx512Bf16BlockSparseAttentionAvailable(int32_t head_dim) {
  const CpuFeatures& cpu = HostCpuFeatures();
  return cpu.avx512f && cpu.avx512bw_vl && cpu.avx512dq && cpu.avx512_bf16 && head_dim > 0 &&
         head_dim % 16 == 0;
}

void BlockSparseAttentionAvx512Bf16(const Bf16AttentionParams& p, const BlockSparsePlanView& plan,
                                    int num_threads) {
  // Key segments are read where they lie (HeadPack packs from them).
  const std::vector<PackedSegment> segments = PackedSegmentsOf(p);
  const int32_t chunks = PackedKeyCount(segments) / kChunkKeys;
  ForEachQueryBlock(plan, static_cast<int64_t>(p.batch) * p.heads, num_threads, [&]() {
    HeadPack& pack = HeadPack::OfThisThread();  // make_worker runs on the thread that computes
    pack.Reset(chunks, p.head_dim);
    return [&p, &segments, &pack, scratch = Scratch{}](
               int64_t batch_head, int32_t first, int32_t last, const KeySpan* spans,
               const KeySlide* slides, int32_t num_spans) mutable {
      AttendBlock(p, segments, pack, batch_head, first, last, spans, slides, num_spans, scratch);
    };
  });
}

}  // namespace docsparse
