#include "kernels/block_sparse_attention_amx.h"

#include <immintrin.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/aligned_vector.h"
#include "kernels/bf16.h"
#include "kernels/cpu_features.h"
#include "kernels/key_segments.h"
#include "kernels/vector_exp.h"

// GCC 12 warns inside its own AVX-512 headers (GCC bug 105593).
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"

namespace docsparse {
namespace {

#define DOCSPARSE_AMX \
  __attribute__((target("amx-tile,amx-bf16,avx512f,avx512bw,avx512vl,avx512dq,avx512bf16")))

// Keys per online-softmax step, a multiple of 32 (the reduction depth of one
// bf16 tile product). The keys are packed once per step for the whole query
// block, whose rows then go through it 16 at a time: a row tile's scores are
// 16 x kKeyTile fp32 (48 KiB). 768 holds LSG's usual block (local, sparse and
// global keys, 641) in one step; measured at d=32, 768 ran 5-10% faster than
// 512 and 1,024 30% slower (the packed keys and scores outgrow the caches).
constexpr int32_t kKeyTile = 768;
constexpr int32_t kTileRows = 16;                    // rows of every tile register
constexpr int32_t kTileBytes = 64;                   // bytes per tile row: 32 bf16 or 16 fp32
constexpr int32_t kDepth = 32;                       // bf16 values reduced by one tile product
constexpr int32_t kPackedTile = kTileRows * kDepth;  // bf16 values in one packed tile
constexpr int32_t kMaxHeadDim = 128;                 // four q tiles

// Linux (5.16 and later) gives a process the tile data state on request.
bool RequestTileData() {
  constexpr long kArchReqXcompPerm = 0x1023;
  constexpr long kXfeatureXtiledata = 18;
  return syscall(SYS_arch_prctl, kArchReqXcompPerm, kXfeatureXtiledata) == 0;
}

struct alignas(64) TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};
  uint8_t rows[16] = {};
};

// All eight tile registers are 16 rows x 64 bytes: an A operand (16 x 32
// bf16), a B operand (16 pairs x 16 columns x 2 bf16) and an accumulator
// (16 x 16 fp32) all have that shape. The configuration is per thread.
// GCC 12's _tile_loadconfig tells the compiler it reads 8 bytes only, so the
// stores of the row shapes were dropped as dead; this asm reads all 64.
DOCSPARSE_AMX void ConfigureTiles() {
  TileConfig config;
  for (int t = 0; t < 8; ++t) {
    config.rows[t] = kTileRows;
    config.bytes_per_row[t] = kTileBytes;
  }
  __asm__ volatile("ldtilecfg %0" ::"m"(config));
}

// Lanes [j, j + 16) that hold real keys.
inline __mmask16 RealLanes(int32_t j, int32_t keys) {
  return j + 16 <= keys ? __mmask16{0xffff} : j < keys ? FirstLanes(keys - j) : __mmask16{0};
}

// Head size 32: one chunk of 32 keys packed for the tiles, its keys' two B
// tiles of kᵀ then its values' two B tiles, and how many of its keys are real
// (the first `real`; the rest are zero padding).
constexpr int32_t kHead32ChunkValues = 4 * kPackedTile;
struct PackedChunk {
  const uint16_t* keys;
  const uint16_t* values;
  int32_t real;
};

// Head size 32: a thread's packed copies of the whole, aligned chunks of 32
// keys (chunk c holds keys [32c, 32c + 32)) of the (item, head) it works on,
// each packed the first time one of its blocks reaches it. With LSG's
// 128-query blocks every key lies in three blocks' local windows and four
// blocks' sparse ones: packing each block's keys anew was a quarter of the
// kernel's time. Threads take runs of consecutive blocks
// (ForEachQueryBlock), so most chunks are packed once.
class HeadChunkCache {
 public:
  // Forgets what it holds and makes room for (item, head)s of `chunks` chunks.
  void Reset(size_t chunks) {
    if (stamps_.size() < chunks) {
      stamps_.resize(chunks, 0);
      data_.resize(chunks * kHead32ChunkValues);
    }
    batch_head_ = -1;
  }

  // Chunk `chunk` of (item, head) `batch_head`, packed now if it is not yet.
  template <typename Pack>
  const uint16_t* Get(int64_t batch_head, int32_t chunk, Pack pack) {
    if (batch_head != batch_head_) {  // a new head: every stamp is stale
      batch_head_ = batch_head;
      ++generation_;
    }
    uint16_t* packed = data_.data() + static_cast<int64_t>(chunk) * kHead32ChunkValues;
    if (stamps_[chunk] != generation_) {
      pack(chunk, packed);
      stamps_[chunk] = generation_;
    }
    return packed;
  }

  // The calling thread's cache: kept across calls, since a fresh one per
  // call would fault its pages in again (128 bytes per key of the longest
  // sequence the thread has seen: 3 MB at 24k keys, 16k-token LSG).
  static HeadChunkCache& OfThisThread() {
    thread_local HeadChunkCache cache;
    return cache;
  }

 private:
  int64_t batch_head_ = -1;
  uint64_t generation_ = 0;
  std::vector<uint64_t> stamps_;    // generation in which each chunk was packed
  CacheLineVector<uint16_t> data_;  // [chunks][kHead32ChunkValues]
};

// Per-thread buffers, reused across work items.
struct Scratch {
  std::vector<int32_t> keys;           // [kKeyTile] the tile's keys: positions in the key sequence
  CacheLineVector<uint16_t> q;         // [padded_rows, head_dim]
  CacheLineVector<uint16_t> k_packed;  // [kKeyTile/16][head_dim/32] B tiles of kᵀ
  CacheLineVector<uint16_t> v_packed;  // [kKeyTile/32][head_dim/16] B tiles of v
  CacheLineVector<float> scores;       // [kTileRows, kKeyTile] of the row tile at hand
  CacheLineVector<uint16_t> probs;     // [kTileRows, kKeyTile]
  CacheLineVector<float> acc;          // [padded_rows, head_dim] unnormalised output
  CacheLineVector<float> row_max;      // [padded_rows] running maximum of scaled scores
  CacheLineVector<float> row_sum;      // [padded_rows] running denominator
  // Head size 32 (AttendRowTileHead32): per row its reference shift and its
  // denominator as 16 partial sums.
  CacheLineVector<float> row_shift;   // [padded_rows]
  CacheLineVector<float> row_sums16;  // [padded_rows, 16]
  std::vector<PackedChunk> chunks;    // the step's chunks, from the cache and packed here
  // With key segments, the step's keys and values copied into one sequence
  // ([kKeyTile, 32] each) to be packed from there, and positions 0, 1, 2, ...
  CacheLineVector<uint16_t> gathered_k, gathered_v;
  std::vector<int32_t> in_order;
};

// Keys `positions[0, filled)` as the B operands of q·kᵀ, written to `dst`:
// tile (c, dt) holds, in row p, column j, the pair k[2p], k[2p + 1] of depth
// chunk dt of key 16c + j: a 16 x 16 transpose of 32-bit pairs, one gather
// per row. Padding keys (slots >= filled) are zeros. Keys lie `key_stride`
// (even) values apart.
DOCSPARSE_AMX void PackKeys(const int32_t* positions, const uint16_t* keys, int64_t key_stride,
                            int32_t filled, int32_t padded_keys, int32_t head_dim, uint16_t* dst) {
  const int32_t depth_tiles = head_dim / kDepth;
  const int32_t pairs_per_key = static_cast<int32_t>(key_stride / 2);
  for (int32_t c = 0; c < padded_keys / 16; ++c) {
    alignas(64) int32_t first_pair[16];
    for (int32_t j = 0; j < 16; ++j) {
      const int32_t slot = c * 16 + j;
      first_pair[j] = slot < filled ? positions[slot] * pairs_per_key : 0;
    }
    const __m512i rows = _mm512_load_si512(first_pair);
    const __mmask16 real = c * 16 < filled ? FirstLanes(filled - c * 16) : __mmask16{0};
    uint16_t* tile = dst + static_cast<int64_t>(c) * depth_tiles * kPackedTile;
    for (int32_t dt = 0; dt < depth_tiles; ++dt) {
      for (int32_t p = 0; p < kTileRows; ++p) {
        const __m512i pairs = _mm512_mask_i32gather_epi32(
            _mm512_setzero_si512(), real, _mm512_add_epi32(rows, _mm512_set1_epi32(dt * 16 + p)),
            keys, 4);
        _mm512_storeu_si512(tile + dt * kPackedTile + p * kDepth, pairs);
      }
    }
  }
}

// Values `positions[0, filled)` as the B operands of p·v, written to `dst`:
// tile (kc, n) holds, in row p, the pairs v[32kc + 2p][16n + j],
// v[32kc + 2p + 1][16n + j] of its 16 output columns j: two value rows
// interleaved. Padding keys are zeros.
DOCSPARSE_AMX void PackValues(const int32_t* positions, const uint16_t* values,
                              int64_t value_stride, int32_t filled, int32_t padded_keys,
                              int32_t head_dim, uint16_t* dst) {
  static const uint16_t kZeroRow[kMaxHeadDim] = {};
  const int32_t column_tiles = head_dim / 16;
  for (int32_t pair = 0; pair < padded_keys / 2; ++pair) {
    const int32_t even = 2 * pair;
    const uint16_t* low = even < filled ? values + positions[even] * value_stride : kZeroRow;
    const uint16_t* high =
        even + 1 < filled ? values + positions[even + 1] * value_stride : kZeroRow;
    uint16_t* row = dst + static_cast<int64_t>(pair / kTileRows) * column_tiles * kPackedTile +
                    (pair % kTileRows) * kDepth;
    for (int32_t n = 0; n < column_tiles; ++n) {
      const __m512i a =
          _mm512_cvtepu16_epi32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(low + n * 16)));
      const __m512i b = _mm512_cvtepu16_epi32(
          _mm256_loadu_si256(reinterpret_cast<const __m256i*>(high + n * 16)));
      _mm512_storeu_si512(row + n * kPackedTile, _mm512_or_si512(a, _mm512_slli_epi32(b, 16)));
    }
  }
}

// scores[i][j] = q[16r + i]·k[j] for row tile r and the tile's padded keys.
// (Keeping two or three score tiles in flight measured no faster: the stores
// wait on L1, not on the products.)
DOCSPARSE_AMX void Scores(Scratch& s, int32_t r, int32_t padded_keys, int32_t head_dim) {
  const int32_t depth_tiles = head_dim / kDepth;
  const int64_t q_stride = head_dim * static_cast<int64_t>(sizeof(uint16_t));
  const int64_t score_stride = kKeyTile * static_cast<int64_t>(sizeof(float));
  const uint16_t* q = s.q.data() + static_cast<int64_t>(r) * kTileRows * head_dim;
  _tile_loadd(1, q, q_stride);
  if (depth_tiles > 1) _tile_loadd(2, q + kDepth, q_stride);
  if (depth_tiles > 2) _tile_loadd(3, q + 2 * kDepth, q_stride);
  if (depth_tiles > 3) _tile_loadd(4, q + 3 * kDepth, q_stride);
  for (int32_t c = 0; c < padded_keys / 16; ++c) {
    const uint16_t* k = s.k_packed.data() + static_cast<int64_t>(c) * depth_tiles * kPackedTile;
    _tile_zero(0);
    _tile_loadd(5, k, kTileBytes);
    _tile_dpbf16ps(0, 1, 5);
    if (depth_tiles > 1) {
      _tile_loadd(6, k + kPackedTile, kTileBytes);
      _tile_dpbf16ps(0, 2, 6);
    }
    if (depth_tiles > 2) {
      _tile_loadd(7, k + 2 * kPackedTile, kTileBytes);
      _tile_dpbf16ps(0, 3, 7);
    }
    if (depth_tiles > 3) {
      _tile_loadd(5, k + 3 * kPackedTile, kTileBytes);
      _tile_dpbf16ps(0, 4, 5);
    }
    _tile_stored(0, s.scores.data() + c * 16, score_stride);
  }
}

// Online softmax over the tile (Milakov & Gimelshein): rescales what each
// row accumulated when its maximum grows, and writes the unnormalised
// probabilities exp(scale·s − max) as bf16 (0 for the padding keys). The
// scale is positive, so the maximum is taken over the raw scores; the
// exponent is computed in base 2 with log2 e folded into the scale, in one
// fused multiply-subtract per 16 scores, and 2^t to bf16 accuracy.
DOCSPARSE_AMX void SoftmaxUpdate(Scratch& s, float scale, int32_t r, int32_t keys,
                                 int32_t padded_keys, int32_t head_dim) {
  constexpr float kLog2e = 1.44269504088896341f;
  const __m512 scale2 = _mm512_set1_ps(scale * kLog2e);
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  for (int32_t i = 0; i < kTileRows; ++i) {
    const int32_t row = r * kTileRows + i;
    const float* scores = s.scores.data() + static_cast<int64_t>(i) * kKeyTile;
    uint16_t* probs = s.probs.data() + static_cast<int64_t>(i) * kKeyTile;
    // Four running maxima: one was a chain of dependent max instructions,
    // a quarter of this function's time.
    __m512 max_a = lowest, max_b = lowest, max_c = lowest, max_d = lowest;
    int32_t j = 0;
    for (; j + 64 <= keys; j += 64) {
      max_a = _mm512_max_ps(max_a, _mm512_loadu_ps(scores + j));
      max_b = _mm512_max_ps(max_b, _mm512_loadu_ps(scores + j + 16));
      max_c = _mm512_max_ps(max_c, _mm512_loadu_ps(scores + j + 32));
      max_d = _mm512_max_ps(max_d, _mm512_loadu_ps(scores + j + 48));
    }
    for (; j < keys; j += 16) {
      max_a = _mm512_max_ps(max_a, _mm512_mask_loadu_ps(lowest, RealLanes(j, keys), scores + j));
    }
    const __m512 max16 = _mm512_max_ps(_mm512_max_ps(max_a, max_b), _mm512_max_ps(max_c, max_d));
    const float new_max = std::max(s.row_max[row], _mm512_reduce_max_ps(max16) * scale);
    const float correction = std::exp(s.row_max[row] - new_max);  // 0 on the first tile
    const __m512 shift2 = _mm512_set1_ps(new_max * kLog2e);
    // 32 keys per step (the padded count is a multiple of 32), packed to
    // bf16 by one instruction.
    __m512 sum_a = _mm512_setzero_ps(), sum_b = _mm512_setzero_ps();
    for (j = 0; j < padded_keys; j += 32) {
      __m512 e0 = Exp2ForBf16_512(_mm512_fmsub_ps(_mm512_loadu_ps(scores + j), scale2, shift2));
      __m512 e1 =
          Exp2ForBf16_512(_mm512_fmsub_ps(_mm512_loadu_ps(scores + j + 16), scale2, shift2));
      if (j + 32 > keys) {
        e0 = _mm512_maskz_mov_ps(RealLanes(j, keys), e0);
        e1 = _mm512_maskz_mov_ps(RealLanes(j + 16, keys), e1);
      }
      _mm512_storeu_si512(probs + j, reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(e1, e0)));
      sum_a = _mm512_add_ps(sum_a, e0);
      sum_b = _mm512_add_ps(sum_b, e1);
    }
    const __m512 sum16 = _mm512_add_ps(sum_a, sum_b);
    float* acc = s.acc.data() + static_cast<int64_t>(row) * head_dim;
    const __m512 correction16 = _mm512_set1_ps(correction);
    for (int32_t n = 0; n < head_dim; n += 16) {
      _mm512_storeu_ps(acc + n, _mm512_mul_ps(_mm512_loadu_ps(acc + n), correction16));
    }
    s.row_sum[row] = s.row_sum[row] * correction + _mm512_reduce_add_ps(sum16);
    s.row_max[row] = new_max;
  }
}

// acc += probs · v over the tile for row tile r, four 16-column accumulators
// at a time.
DOCSPARSE_AMX void Accumulate(Scratch& s, int32_t r, int32_t padded_keys, int32_t head_dim) {
  const int32_t column_tiles = head_dim / 16;
  const int64_t acc_stride = head_dim * static_cast<int64_t>(sizeof(float));
  const int64_t prob_stride = kKeyTile * static_cast<int64_t>(sizeof(uint16_t));
  float* acc = s.acc.data() + static_cast<int64_t>(r) * kTileRows * head_dim;
  const uint16_t* probs = s.probs.data();
  const int32_t key_chunks = padded_keys / kDepth;
  for (int32_t group = 0; group < column_tiles; group += 4) {
    const int32_t columns = std::min(4, column_tiles - group);
    _tile_loadd(0, acc + group * 16, acc_stride);
    if (columns > 1) _tile_loadd(1, acc + (group + 1) * 16, acc_stride);
    if (columns > 2) _tile_loadd(2, acc + (group + 2) * 16, acc_stride);
    if (columns > 3) _tile_loadd(3, acc + (group + 3) * 16, acc_stride);
    for (int32_t kc = 0; kc < key_chunks; ++kc) {
      const uint16_t* v =
          s.v_packed.data() + (static_cast<int64_t>(kc) * column_tiles + group) * kPackedTile;
      _tile_loadd(4, probs + kc * kDepth, prob_stride);
      _tile_loadd(5, v, kTileBytes);
      _tile_dpbf16ps(0, 4, 5);
      if (columns > 1) {
        _tile_loadd(6, v + kPackedTile, kTileBytes);
        _tile_dpbf16ps(1, 4, 6);
      }
      if (columns > 2) {
        _tile_loadd(7, v + 2 * kPackedTile, kTileBytes);
        _tile_dpbf16ps(2, 4, 7);
      }
      if (columns > 3) {
        _tile_loadd(5, v + 3 * kPackedTile, kTileBytes);
        _tile_dpbf16ps(3, 4, 5);
      }
    }
    _tile_stored(0, acc + group * 16, acc_stride);
    if (columns > 1) _tile_stored(1, acc + (group + 1) * 16, acc_stride);
    if (columns > 2) _tile_stored(2, acc + (group + 2) * 16, acc_stride);
    if (columns > 3) _tile_stored(3, acc + (group + 3) * 16, acc_stride);
  }
}

// ---- Head size 32: the accumulator held in tile registers ----
//
// With d = 32 a row tile's whole output (16 x 32 fp32) fits two tile
// registers, so the row tile walks the step's keys 32 at a time with its
// scores (2 KiB), exponents and probabilities (1 KiB) in L1, and its
// accumulator never leaves the tile unit within a step. The general path
// above stores a whole step's scores (48 KiB) and reloads the accumulator
// per step, which overflowed L1 and cost ~1.5 cycles per query-key pair.
//
// Without a per-chunk running maximum, whose rescaling would take the
// accumulator out of the tiles, each row keeps a reference shift instead:
// probabilities are 2^(scale2·s − shift), and the shift is raised only when
// a chunk's exponent would exceed kLazyRescaleLog2 (the first chunk always
// sets it to that chunk's maximum). Probabilities up to 2^30 are exact
// enough in fp32 and bf16 (both keep 8 exponent bits), and the final
// division by the row's sum cancels the common factor. Later keys rarely
// beat the first chunk's maximum by 2^30 (a logit gap of ~21), so the
// rescale is almost never taken; it is exact when it is.
constexpr float kLazyRescaleLog2 = 30.0f;
constexpr int32_t kChunkKeys = 32;
// An exponent that 2^t turns into an exact 0 (padding keys), and finite,
// which Exp2ForBf16_512 needs.
constexpr float kPaddingExponent = -1000.0f;

// Each row's probabilities over one chunk, from row `first_row` on:
// 2^(scale2·scores[i][·] − shift[i]) as bf16 into `probs`, summed into
// sums[i] (16 partial sums), the padding keys' 0 (only the last chunk has
// any). With kCheck, stops before the first row with an exponent above
// kLazyRescaleLog2, whose shift must rise first, and returns it; else
// returns kTileRows. One pass: scores are read once and no exponent is
// stored, since a raise is rare (a row's first chunk, a later one that
// outgrows it by 2^30).
template <bool kHasPadding, bool kCheck>
DOCSPARSE_AMX int32_t ChunkProbabilities(const float* scores, const float* shift, __m512 scale2,
                                         __mmask16 real0, __mmask16 real1, int32_t first_row,
                                         float* sums, uint16_t* probs) {
  const __m512 padding = _mm512_set1_ps(kPaddingExponent);
  const __m512 limit = _mm512_set1_ps(kLazyRescaleLog2);
  for (int32_t i = first_row; i < kTileRows; ++i) {
    const __m512 row_shift = _mm512_set1_ps(shift[i]);
    const float* in = scores + i * kChunkKeys;
    __m512 t0 = _mm512_fmsub_ps(_mm512_load_ps(in), scale2, row_shift);
    __m512 t1 = _mm512_fmsub_ps(_mm512_load_ps(in + 16), scale2, row_shift);
    if constexpr (kHasPadding) {
      t0 = _mm512_mask_mov_ps(padding, real0, t0);
      t1 = _mm512_mask_mov_ps(padding, real1, t1);
    }
    if constexpr (kCheck) {
      if (_kortestz_mask16_u8(_mm512_cmp_ps_mask(t0, limit, _CMP_GT_OQ),
                              _mm512_cmp_ps_mask(t1, limit, _CMP_GT_OQ)) == 0) {
        return i;
      }
    }
    const __m512 e0 = Exp2ForBf16_512(t0);
    const __m512 e1 = Exp2ForBf16_512(t1);
    float* row_sums = sums + i * 16;
    _mm512_storeu_ps(row_sums, _mm512_add_ps(_mm512_loadu_ps(row_sums), _mm512_add_ps(e0, e1)));
    _mm512_store_si512(probs + i * kChunkKeys,
                       reinterpret_cast<__m512i>(_mm512_cvtne2ps_pbh(e1, e0)));
  }
  return kTileRows;
}

template <bool kCheck>
DOCSPARSE_AMX int32_t ChunkProbabilities(const float* scores, const float* shift, __m512 scale2,
                                         __mmask16 real0, __mmask16 real1, int32_t first_row,
                                         float* sums, uint16_t* probs) {
  return real1 == 0xffff ? ChunkProbabilities<false, kCheck>(scores, shift, scale2, real0, real1,
                                                             first_row, sums, probs)
                         : ChunkProbabilities<true, kCheck>(scores, shift, scale2, real0, real1,
                                                            first_row, sums, probs);
}

// The largest exponent scale2·s of one row of a chunk over its real keys.
DOCSPARSE_AMX float ChunkRowMax(const float* row, __m512 scale2, __mmask16 real0, __mmask16 real1) {
  const __m512 lowest = _mm512_set1_ps(-std::numeric_limits<float>::infinity());
  return _mm512_reduce_max_ps(_mm512_max_ps(
      _mm512_mask_mov_ps(lowest, real0, _mm512_mul_ps(_mm512_load_ps(row), scale2)),
      _mm512_mask_mov_ps(lowest, real1, _mm512_mul_ps(_mm512_load_ps(row + 16), scale2))));
}

// Raises the shift of each row from `first_row` on whose chunk would exceed
// 2^kLazyRescaleLog2 to the chunk's maximum, and rescales what the row
// accumulated (tiles 6 and 7, taken out and put back) and its sums to match.
// The rows before first_row already weighed this chunk with their shifts.
DOCSPARSE_AMX void RaiseShifts(const float* scores, __m512 scale2, __mmask16 real0, __mmask16 real1,
                               int32_t first_row, float* shift, float* sums, float* acc) {
  constexpr int64_t kAccStride = kChunkKeys * sizeof(float);
  _tile_stored(6, acc, kAccStride);
  _tile_stored(7, acc + 16, kAccStride);
  for (int32_t i = first_row; i < kTileRows; ++i) {
    const float chunk_max = ChunkRowMax(scores + i * kChunkKeys, scale2, real0, real1);
    if (!(chunk_max - shift[i] > kLazyRescaleLog2)) continue;
    const __m512 factor = _mm512_set1_ps(std::exp2(shift[i] - chunk_max));  // 0 at first
    shift[i] = chunk_max;
    float* row_sums = sums + i * 16;
    _mm512_storeu_ps(row_sums, _mm512_mul_ps(_mm512_loadu_ps(row_sums), factor));
    float* row_acc = acc + i * kChunkKeys;
    _mm512_storeu_ps(row_acc, _mm512_mul_ps(_mm512_loadu_ps(row_acc), factor));
    _mm512_storeu_ps(row_acc + 16, _mm512_mul_ps(_mm512_loadu_ps(row_acc + 16), factor));
  }
  _tile_loadd(6, acc, kAccStride);
  _tile_loadd(7, acc + 16, kAccStride);
}

// Sets each row's shift to the maximum of its exponents over the chunk's
// real keys: the row tile's first chunk, before which every shift is -inf and
// nothing is accumulated. Taking that chunk through ChunkProbabilities'
// check and RaiseShifts instead stored and reloaded the zero accumulator and
// called exp2 on every row: LSG attention at 4,096 tokens took 4.7-5.2 ms
// against 4.6-4.7 now, at 512 tokens 0.57-0.65 against 0.51-0.57, dense at
// 512 0.47-0.53 against 0.45-0.48 (AMX machine, 12 heads of 32, alternated).
DOCSPARSE_AMX void InitialShifts(const float* scores, __m512 scale2, __mmask16 real0,
                                 __mmask16 real1, float* shift) {
  for (int32_t i = 0; i < kTileRows; ++i) {
    shift[i] = ChunkRowMax(scores + i * kChunkKeys, scale2, real0, real1);
  }
}

// Row tile r (d = 32) through the step's chunks. Tiles: 0, 1 scores; 2 q; 3, 4 keys, then values; 5
// probabilities; 6, 7 the accumulator. Software-pipelined: chunk c + 1's scores are computed before
// chunk c's softmax, and chunk c − 1's p·v after it, so that the tile unit works while the vector
// unit does, and a probability tile is loaded one chunk after its rows were stored.
DOCSPARSE_AMX void AttendRowTileHead32(Scratch& s, float scale, int32_t r, bool first_step) {
  constexpr float kLog2e = 1.44269504088896341f;
  constexpr int32_t kHeadDim = 32;
  constexpr int64_t kRowStride = kChunkKeys * sizeof(float);  // scores and accumulator rows
  constexpr int32_t kChunkValues = kTileRows * kChunkKeys;
  const __m512 scale2 = _mm512_set1_ps(scale * kLog2e);
  const int64_t row0 = static_cast<int64_t>(r) * kTileRows;
  float* acc = s.acc.data() + row0 * kHeadDim;
  float* shift = s.row_shift.data() + row0;
  float* sums = s.row_sums16.data() + row0 * 16;
  alignas(64) float scores[2][kChunkValues];
  alignas(64) uint16_t probs[2][kChunkValues];
  const PackedChunk* chunk = s.chunks.data();
  const auto compute_scores = [chunk](int32_t c, float* out) DOCSPARSE_AMX {
    const uint16_t* k = chunk[c].keys;
    _tile_zero(0);
    _tile_zero(1);
    _tile_loadd(3, k, kTileBytes);
    _tile_loadd(4, k + kPackedTile, kTileBytes);
    _tile_dpbf16ps(0, 2, 3);
    _tile_dpbf16ps(1, 2, 4);
    _tile_stored(0, out, kRowStride);
    _tile_stored(1, out + 16, kRowStride);
  };
  const auto accumulate = [chunk](int32_t c, const uint16_t* p) DOCSPARSE_AMX {
    const uint16_t* v = chunk[c].values;
    _tile_loadd(5, p, kTileBytes);
    _tile_loadd(3, v, kTileBytes);
    _tile_loadd(4, v + kPackedTile, kTileBytes);
    _tile_dpbf16ps(6, 5, 3);
    _tile_dpbf16ps(7, 5, 4);
  };
  _tile_loadd(2, s.q.data() + row0 * kHeadDim, kTileBytes);
  if (first_step) {
    _tile_zero(6);
    _tile_zero(7);
    std::fill(sums, sums + kTileRows * 16, 0.0f);
  } else {
    _tile_loadd(6, acc, kRowStride);
    _tile_loadd(7, acc + 16, kRowStride);
  }
  const int32_t chunks = static_cast<int32_t>(s.chunks.size());
  int32_t pending = -1;  // the chunk whose p·v is still owed
  compute_scores(0, scores[0]);
  for (int32_t c = 0; c < chunks; ++c) {
    if (c + 1 < chunks) compute_scores(c + 1, scores[(c + 1) & 1]);
    const float* chunk_scores = scores[c & 1];
    const __mmask16 real0 = RealLanes(0, chunk[c].real), real1 = RealLanes(16, chunk[c].real);
    uint16_t* chunk_probs = probs[c & 1];
    if (first_step && c == 0) {
      InitialShifts(chunk_scores, scale2, real0, real1, shift);
      ChunkProbabilities</*kCheck=*/false>(chunk_scores, shift, scale2, real0, real1, 0, sums,
                                           chunk_probs);
      pending = c;
      continue;
    }
    const int32_t raise_from = ChunkProbabilities</*kCheck=*/true>(
        chunk_scores, shift, scale2, real0, real1, 0, sums, chunk_probs);
    if (raise_from < kTileRows) {
      // The owed chunk was weighed with the old shifts: add it first. The
      // rows before raise_from keep theirs.
      if (pending >= 0) accumulate(pending, probs[pending & 1]);
      pending = -1;
      RaiseShifts(chunk_scores, scale2, real0, real1, raise_from, shift, sums, acc);
      ChunkProbabilities</*kCheck=*/false>(chunk_scores, shift, scale2, real0, real1, raise_from,
                                           sums, chunk_probs);
    }
    if (pending >= 0) accumulate(pending, probs[pending & 1]);
    pending = c;
  }
  accumulate(pending, probs[pending & 1]);
  _tile_stored(6, acc, kRowStride);
  _tile_stored(7, acc + 16, kRowStride);
}

// Copies queries [first, last) of `batch_head` into s.q, zero-padded to whole
// row tiles; returns the number of row tiles.
DOCSPARSE_AMX int32_t LoadQueries(const Bf16AttentionParams& p, int64_t batch_head, int32_t first,
                                  int32_t last, Scratch& s) {
  const int32_t d = p.head_dim;
  const int32_t rows = last - first;
  const int32_t row_tiles = (rows + kTileRows - 1) / kTileRows;
  const RowLayout q_layout = p.q_layout.Resolve(p.heads, p.q_len, d);
  s.q.resize(static_cast<size_t>(row_tiles) * kTileRows * d);
  const uint16_t* q = p.q + q_layout.Start(batch_head, p.heads) + first * q_layout.row_stride;
  for (int32_t r = 0; r < rows; ++r) {
    std::memcpy(s.q.data() + r * d, q + r * q_layout.row_stride, d * sizeof(uint16_t));
  }
  std::fill(s.q.begin() + static_cast<int64_t>(rows) * d, s.q.end(), uint16_t{0});
  return row_tiles;
}

// out[first + r] = s.acc[r] / sum(r) for r in [0, last − first), where
// sum(r) is what `row_sum` returns.
template <typename RowSum>
DOCSPARSE_AMX void WriteOutputs(const Bf16AttentionParams& p, int64_t batch_head, int32_t first,
                                int32_t last, const Scratch& s, RowSum row_sum) {
  const int32_t d = p.head_dim;
  const RowLayout out_layout = p.out_layout.Resolve(p.heads, p.q_len, d);
  const int64_t out_start = out_layout.Start(batch_head, p.heads) + first * out_layout.row_stride;
  for (int32_t r = 0; r < last - first; ++r) {
    const float sum = row_sum(r);
    const __m512 inverse = _mm512_set1_ps(sum > 0 ? 1.0f / sum : 0.0f);
    const float* acc = s.acc.data() + static_cast<int64_t>(r) * d;
    const int64_t row = out_start + r * out_layout.row_stride;
    // head_dim is a multiple of 32 here (AmxBlockSparseAttentionAvailable).
    if (p.stream_out && p.out == nullptr &&
        reinterpret_cast<uintptr_t>(p.out_bf16 + row) % 64 == 0) {
      // 32 values, one whole line, a store (AmxWorker fences them).
      for (int32_t n = 0; n < d; n += 32) {
        const __m256i low = reinterpret_cast<__m256i>(
            _mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_loadu_ps(acc + n), inverse)));
        const __m256i high = reinterpret_cast<__m256i>(
            _mm512_cvtneps_pbh(_mm512_mul_ps(_mm512_loadu_ps(acc + n + 16), inverse)));
        _mm512_stream_si512(reinterpret_cast<__m512i*>(p.out_bf16 + row + n),
                            _mm512_inserti64x4(_mm512_castsi256_si512(low), high, 1));
      }
      continue;
    }
    for (int32_t n = 0; n < d; n += 16) {
      const __m512 value = _mm512_mul_ps(_mm512_loadu_ps(acc + n), inverse);
      if (p.out != nullptr) {
        _mm512_storeu_ps(p.out + row + n, value);
      } else {
        _mm256_storeu_si256(reinterpret_cast<__m256i*>(p.out_bf16 + row + n),
                            reinterpret_cast<__m256i>(_mm512_cvtneps_pbh(value)));
      }
    }
  }
}

// One (item, head, query block), any head size: queries [first, last)
// against its spans, whose keys are packed kKeyTile at a time.
DOCSPARSE_AMX void AttendBlock(const Bf16AttentionParams& p, int64_t batch_head, int32_t first,
                               int32_t last, const KeySpan* spans, int32_t num_spans, Scratch& s) {
  const int32_t d = p.head_dim;
  const int32_t row_tiles = LoadQueries(p, batch_head, first, last, s);
  const int32_t padded_rows = row_tiles * kTileRows;
  AssignZeros(s.acc, static_cast<size_t>(padded_rows) * d);
  s.row_max.assign(padded_rows, -std::numeric_limits<float>::infinity());
  AssignZeros(s.row_sum, padded_rows);

  const RowLayout k_layout = p.k_layout.Resolve(p.heads, p.k_len, d);
  const RowLayout v_layout = p.v_layout.Resolve(p.heads, p.k_len, d);
  const uint16_t* keys = p.k + k_layout.Start(batch_head, p.heads);
  const uint16_t* values = p.v + v_layout.Start(batch_head, p.heads);
  int32_t filled = 0;
  auto run_tile = [&]() {
    const int32_t padded_keys = (filled + kDepth - 1) / kDepth * kDepth;
    PackKeys(s.keys.data(), keys, k_layout.row_stride, filled, padded_keys, d, s.k_packed.data());
    PackValues(s.keys.data(), values, v_layout.row_stride, filled, padded_keys, d,
               s.v_packed.data());
    // Row tile by row tile, so that its scores and probabilities stay in L1.
    for (int32_t r = 0; r < row_tiles; ++r) {
      Scores(s, r, padded_keys, d);
      SoftmaxUpdate(s, p.scale, r, filled, padded_keys, d);
      Accumulate(s, r, padded_keys, d);
    }
    filled = 0;
  };
  for (int32_t span = 0; span < num_spans; ++span) {
    const int32_t end = spans[span].begin + spans[span].length;
    for (int32_t key = spans[span].begin; key < end; ++key) {
      s.keys[filled] = key;
      if (++filled == kKeyTile) run_tile();
    }
  }
  if (filled > 0) run_tile();
  WriteOutputs(p, batch_head, first, last, s, [&s](int32_t r) { return s.row_sum[r]; });
}

// One (item, head, query block) with head size 32: the spans' whole aligned
// chunks of 32 keys come from the thread's cache; the other keys are packed
// here, kKeyTile at a time, each packing closing a step.
DOCSPARSE_AMX void AttendBlockHead32(const Bf16AttentionParams& p, int64_t batch_head,
                                     int32_t first, int32_t last, const KeySpan* spans,
                                     int32_t num_spans, const std::vector<uint8_t>& whole_chunks,
                                     HeadChunkCache& cache, Scratch& s) {
  constexpr int32_t kHeadDim = 32;
  const int32_t row_tiles = LoadQueries(p, batch_head, first, last, s);
  const int32_t padded_rows = row_tiles * kTileRows;
  s.acc.resize(static_cast<size_t>(padded_rows) * kHeadDim);
  s.row_sums16.resize(static_cast<size_t>(padded_rows) * 16);
  s.row_shift.assign(padded_rows, -std::numeric_limits<float>::infinity());

  // A chunk's keys lie in one segment (whole_chunks), one stride apart.
  const auto pack_chunk = [&](int32_t chunk, uint16_t* packed) DOCSPARSE_AMX {
    const SegmentRows<uint16_t> rows = FindKeyRows(p, batch_head, chunk * kChunkKeys);
    for (int32_t j = 0; j < kChunkKeys; ++j) {
      _mm_prefetch(reinterpret_cast<const char*>(rows.k + j * rows.k_stride), _MM_HINT_T0);
      _mm_prefetch(reinterpret_cast<const char*>(rows.v + j * rows.v_stride), _MM_HINT_T0);
    }
    PackKeys(s.in_order.data(), rows.k, rows.k_stride, kChunkKeys, kChunkKeys, kHeadDim, packed);
    PackValues(s.in_order.data(), rows.v, rows.v_stride, kChunkKeys, kChunkKeys, kHeadDim,
               packed + 2 * kPackedTile);
  };
  // The step's keys s.keys[0, filled), into s.k_packed and s.v_packed.
  const auto pack_step = [&](int32_t filled, int32_t padded_keys) DOCSPARSE_AMX {
    if (p.num_key_segments == 0) {
      const SegmentRows<uint16_t> rows = FindKeyRows(p, batch_head, 0);
      PackKeys(s.keys.data(), rows.k, rows.k_stride, filled, padded_keys, kHeadDim,
               s.k_packed.data());
      PackValues(s.keys.data(), rows.v, rows.v_stride, filled, padded_keys, kHeadDim,
                 s.v_packed.data());
      return;
    }
    for (int32_t i = 0; i < filled; ++i) {
      const SegmentRows<uint16_t> rows = FindKeyRows(p, batch_head, s.keys[i]);
      std::memcpy(s.gathered_k.data() + i * kHeadDim, rows.k, kHeadDim * sizeof(uint16_t));
      std::memcpy(s.gathered_v.data() + i * kHeadDim, rows.v, kHeadDim * sizeof(uint16_t));
    }
    PackKeys(s.in_order.data(), s.gathered_k.data(), kHeadDim, filled, padded_keys, kHeadDim,
             s.k_packed.data());
    PackValues(s.in_order.data(), s.gathered_v.data(), kHeadDim, filled, padded_keys, kHeadDim,
               s.v_packed.data());
  };
  s.chunks.clear();
  int32_t filled = 0;
  bool first_step = true;
  const auto run_step = [&]() {
    const int32_t padded_keys = (filled + kChunkKeys - 1) / kChunkKeys * kChunkKeys;
    pack_step(filled, padded_keys);
    for (int32_t c = 0; c < padded_keys / kChunkKeys; ++c) {
      s.chunks.push_back({s.k_packed.data() + 2 * c * kPackedTile,
                          s.v_packed.data() + 2 * c * kPackedTile,
                          std::min(kChunkKeys, filled - c * kChunkKeys)});
    }
    if (s.chunks.empty()) return;
    // Row tile by row tile: its scores and probabilities stay in L1, its
    // accumulator in tile registers.
    for (int32_t r = 0; r < row_tiles; ++r) AttendRowTileHead32(s, p.scale, r, first_step);
    s.chunks.clear();
    filled = 0;
    first_step = false;
  };
  for (int32_t span = 0; span < num_spans; ++span) {
    const int32_t end = spans[span].begin + spans[span].length;
    int32_t key = spans[span].begin;
    while (key < end) {
      const int32_t chunk = key / kChunkKeys;
      if (key % kChunkKeys == 0 && key + kChunkKeys <= end &&
          chunk < static_cast<int32_t>(whole_chunks.size()) && whole_chunks[chunk]) {
        const uint16_t* packed = cache.Get(batch_head, chunk, pack_chunk);
        s.chunks.push_back({packed, packed + 2 * kPackedTile, kChunkKeys});
        key += kChunkKeys;
        continue;
      }
      s.keys[filled] = key++;
      if (++filled == kKeyTile) run_step();
    }
  }
  run_step();
  if (first_step) {  // no keys: the buffers still hold the last block's
    std::fill(s.acc.begin(), s.acc.end(), 0.0f);
    std::fill(s.row_sums16.begin(), s.row_sums16.end(), 0.0f);
  }
  WriteOutputs(p, batch_head, first, last, s, [&s](int32_t r) DOCSPARSE_AMX {
    return _mm512_reduce_add_ps(_mm512_loadu_ps(s.row_sums16.data() + r * 16));
  });
}

DOCSPARSE_AMX void ReleaseTiles() { _tile_release(); }

// One thread's worker: configures the tiles for its thread on creation and
// releases them when the thread's share of the blocks is done.
class AmxWorker {
 public:
  AmxWorker(const Bf16AttentionParams& p, const std::vector<uint8_t>& whole_chunks)
      : p_(p), whole_chunks_(whole_chunks) {
    ConfigureTiles();
    scratch_.keys.resize(kKeyTile);
    scratch_.k_packed.resize(static_cast<size_t>(kKeyTile) * p.head_dim);
    scratch_.v_packed.resize(static_cast<size_t>(kKeyTile) * p.head_dim);
    scratch_.scores.resize(static_cast<size_t>(kTileRows) * kKeyTile);
    scratch_.probs.resize(static_cast<size_t>(kTileRows) * kKeyTile);
    if (p.head_dim == 32) {
      head32_cache_ = &HeadChunkCache::OfThisThread();  // the worker runs on its thread
      head32_cache_->Reset(whole_chunks.size());
      scratch_.in_order.resize(kKeyTile);
      for (int32_t i = 0; i < kKeyTile; ++i) scratch_.in_order[i] = i;
      if (p.num_key_segments > 0) {
        scratch_.gathered_k.resize(static_cast<size_t>(kKeyTile) * p.head_dim);
        scratch_.gathered_v.resize(static_cast<size_t>(kKeyTile) * p.head_dim);
      }
    }
  }
  // The thread's non-temporal output stores (stream_out) are weakly
  // ordered: fenced here, on the thread that made them, before the caller
  // (perhaps on another thread) reads the output.
  ~AmxWorker() {
    if (p_.stream_out) _mm_sfence();
    ReleaseTiles();
  }
  AmxWorker(const AmxWorker&) = delete;
  AmxWorker& operator=(const AmxWorker&) = delete;

  // Sliding spans reach it row by row (ForEachQueryBlock<false>).
  void operator()(int64_t batch_head, int32_t first, int32_t last, const KeySpan* spans,
                  const KeySlide*, int32_t num_spans) {
    if (p_.head_dim == 32) {
      AttendBlockHead32(p_, batch_head, first, last, spans, num_spans, whole_chunks_,
                        *head32_cache_, scratch_);
    } else {
      AttendBlock(p_, batch_head, first, last, spans, num_spans, scratch_);
    }
  }

 private:
  const Bf16AttentionParams& p_;
  const std::vector<uint8_t>& whole_chunks_;
  HeadChunkCache* head32_cache_ = nullptr;  // head size 32 only
  Scratch scratch_;
};

}  // namespace

bool AmxBlockSparseAttentionAvailable(int32_t head_dim) {
  static const bool ready = [] {
    const CpuFeatures& cpu = HostCpuFeatures();
    return cpu.amx_bf16 && cpu.avx512_bf16 && cpu.avx512bw_vl && cpu.avx512dq && RequestTileData();
  }();
  return ready && head_dim >= kDepth && head_dim <= kMaxHeadDim && head_dim % kDepth == 0;
}

void BlockSparseAttentionAmx(const Bf16AttentionParams& params, const BlockSparsePlanView& plan,
                             int num_threads) {
  // Head size 32 reads key segments in place; the general path packs from
  // one sequence, assembled from them first.
  const AssembledKeys assembled =
      params.head_dim == 32 ? AssembledKeys{{}, {}, params} : AssembleKeySegments(params);
  const Bf16AttentionParams& p = assembled.params;
  const std::vector<uint8_t> whole_chunks = ChunksWithinOneSegment(p, kChunkKeys);
  // AMX packs keys from every span into shared tiles: sliding spans come
  // one query at a time instead (correct; a masked path is still owed).
  ForEachQueryBlock</*kTakesSlides=*/false>(
      plan, static_cast<int64_t>(p.batch) * p.heads, num_threads,
      [&p, &whole_chunks]() { return AmxWorker(p, whole_chunks); });
}

}  // namespace docsparse
