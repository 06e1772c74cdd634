#include "kernels/block_sparse_attention.h"

#include <xmmintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/aligned_vector.h"
#include "kernels/block_sparse_attention_fp32_tile.h"
#include "kernels/cpu_features.h"

namespace docsparse {
namespace {

// Keys per tile: the score tile of one thread is (query block x kKeyTile)
// floats, small enough to stay in L2 for block sizes up to 256.
constexpr int32_t kKeyTile = 256;

// Per-thread buffers, reused across work items.
struct Scratch {
  CacheLineVector<float> q;        // [rows, head_dim] scaled queries
  CacheLineVector<float> scores;   // [rows, kKeyTile], then probabilities
  CacheLineVector<float> acc;      // [rows, head_dim] unnormalised output
  CacheLineVector<float> row_max;  // [rows] running maximum
  CacheLineVector<float> row_sum;  // [rows] running denominator
  // SIMD paths: the keys and values of item·head `packed_head`, back to back.
  int64_t packed_head = -1;
  CacheLineVector<float> head_k;  // [keys, head_dim]
  CacheLineVector<float> head_v;  // [keys, head_dim]
};

// Online softmax over one tile of scores (Milakov & Gimelshein): rescales
// what was accumulated when the maximum grows, turns the tile's scores into
// unnormalised probabilities, adds them to the denominators.
void SoftmaxUpdatePortable(Scratch& s, int32_t rows, int32_t tile_keys, int32_t head_dim) {
  for (int32_t r = 0; r < rows; ++r) {
    float* row = s.scores.data() + static_cast<int64_t>(r) * kKeyTile;
    const float tile_max = *std::max_element(row, row + tile_keys);
    const float new_max = std::max(s.row_max[r], tile_max);
    const float correction = std::exp(s.row_max[r] - new_max);  // 0 on the first tile
    float sum = 0;
    for (int32_t j = 0; j < tile_keys; ++j) {
      row[j] = std::exp(row[j] - new_max);
      sum += row[j];
    }
    float* acc = s.acc.data() + static_cast<int64_t>(r) * head_dim;
    for (int32_t d = 0; d < head_dim; ++d) acc[d] *= correction;
    s.row_sum[r] = s.row_sum[r] * correction + sum;
    s.row_max[r] = new_max;
  }
}

}  // namespace

void MaskSlidingScores(float* scores, int64_t stride, int32_t rows, int32_t first,
                       int32_t tile_begin, int32_t tile_keys, KeySpan span, KeySlide slide) {
  for (int32_t r = 0; r < rows; ++r) {
    int32_t lo = 0, hi = 0;
    SlidingRowKeys(span, slide, first + r, &lo, &hi);
    // This row's keys within the tile: [lo, hi) ∩ [tile_begin, tile_begin + tile_keys).
    const int32_t keep_begin = std::clamp(lo - tile_begin, 0, tile_keys);
    const int32_t keep_end = std::clamp(hi - tile_begin, keep_begin, tile_keys);
    float* row = scores + r * stride;
    std::fill(row, row + keep_begin, kMaskedScore);
    std::fill(row + keep_end, row + tile_keys, kMaskedScore);
  }
}

namespace {

// One key tile [tile_begin, tile_begin + tile_keys) against the block's
// rows (query first + r for row r) in plain C++, the reference.
void TilePortable(Scratch& s, int32_t rows, const float* keys, int64_t key_stride,
                  const float* values, int64_t value_stride, int32_t tile_keys, int32_t head_dim,
                  int32_t first, int32_t tile_begin, KeySpan span, KeySlide slide) {
  for (int32_t r = 0; r < rows; ++r) {
    const float* q = s.q.data() + static_cast<int64_t>(r) * head_dim;
    float* row = s.scores.data() + static_cast<int64_t>(r) * kKeyTile;
    for (int32_t j = 0; j < tile_keys; ++j) {
      const float* k = keys + j * key_stride;
      float dot = 0;
      for (int32_t d = 0; d < head_dim; ++d) dot += q[d] * k[d];
      row[j] = dot;
    }
  }
  if (slide.width != 0) {
    MaskSlidingScores(s.scores.data(), kKeyTile, rows, first, tile_begin, tile_keys, span, slide);
  }
  SoftmaxUpdatePortable(s, rows, tile_keys, head_dim);
  for (int32_t r = 0; r < rows; ++r) {
    const float* p = s.scores.data() + static_cast<int64_t>(r) * kKeyTile;
    float* acc = s.acc.data() + static_cast<int64_t>(r) * head_dim;
    for (int32_t j = 0; j < tile_keys; ++j) {
      const float* v = values + j * value_stride;
      for (int32_t d = 0; d < head_dim; ++d) acc[d] += p[j] * v[d];
    }
  }
}

// Which executor a call runs: query rows in the lanes of AVX-512 (16) or
// AVX2 (8) vectors, or the portable reference.
enum class TilePath { kPortable, kAvx2, kAvx512 };

TilePath ChooseTilePath(const AttentionParams& p) {
  const CpuFeatures& cpu = HostCpuFeatures();
  if (p.isa == KernelIsa::kPortable) return TilePath::kPortable;
  if (p.isa == KernelIsa::kAuto && cpu.avx512f && cpu.avx512bw_vl && p.head_dim % 16 == 0) {
    return TilePath::kAvx512;
  }
  return cpu.avx2_fma && p.head_dim % 8 == 0 ? TilePath::kAvx2 : TilePath::kPortable;
}

// Calls tile(key rows, first key, key count, span, slide) for every
// tile of at most kKeyTile keys of the block's spans, each within one
// buffer: where they lie, or in `packed`'s copy of the head when given. A
// sliding span's tiles cover the keys any row of the block reaches; each
// row's others are masked tile by tile.
template <typename Tile>
void ForEachKeyTile(const AttentionParams& p, const Scratch* packed, int64_t batch_head,
                    int32_t first, int32_t last, const KeySpan* spans, const KeySlide* slides,
                    int32_t num_spans, const Tile& tile) {
  const int32_t d = p.head_dim;
  for (int32_t span = 0; span < num_spans; ++span) {
    const KeySlide slide = slides != nullptr ? slides[span] : KeySlide{0, 0};
    int32_t begin = 0, end = 0;
    SlidingBlockKeys(spans[span], slide, first, last, &begin, &end);
    for (int32_t key = begin, tile_keys = 0; key < end; key += tile_keys) {
      SegmentRows<float> rows = FindKeyRows(p, batch_head, key);
      tile_keys = std::min({kKeyTile, end - key, rows.end - key});
      if (tile_keys <= 0) break;  // keys outside every segment (not allowed): not read
      if (packed != nullptr) {
        rows = {packed->head_k.data() + int64_t{key} * d, packed->head_v.data() + int64_t{key} * d,
                d, d, rows.end};
      }
      tile(rows, key, tile_keys, spans[span], slide);
    }
  }
}

// Copies `count` rows of `width` floats, `stride` apart, back to back.
void CopyRows(const float* from, int64_t stride, int32_t count, int32_t width, float* to) {
  for (int32_t r = 0; r < count; ++r) {
    std::memcpy(to + static_cast<int64_t>(r) * width, from + r * stride, sizeof(float) * width);
  }
}

// Whether the keys' or values' rows lie further apart than a row (the
// encoder's q, k and v interleaved in one projection, LSG's key segments).
bool KeysAreStrided(const AttentionParams& p) {
  const auto strided = [&p](const RowLayout& layout, int32_t len) {
    return layout.Resolve(p.heads, len, p.head_dim).row_stride != p.head_dim;
  };
  if (p.num_key_segments == 0) return strided(p.k_layout, p.k_len) || strided(p.v_layout, p.k_len);
  for (int32_t i = 0; i < p.num_key_segments; ++i) {
    const Fp32KeySegment& segment = p.key_segments[i];
    if (strided(segment.k_layout, segment.count) || strided(segment.v_layout, segment.count)) {
      return true;
    }
  }
  return false;
}

// Copies every key and value row of item·head `batch_head` into s.head_k
// and s.head_v, once per head a worker meets. The SIMD loops read each
// tile's rows once per group of queries; read in place, rows 4,608 bytes
// apart map to an eighth of L1's sets, and the groups kept missing the tile
// they had just read. An LSG-shaped probe on the AMX machine: AVX-512 160
// GFLOP/s on the interleaved rows, 188 packed (230 on contiguous ones);
// AVX2 77 and 87 (its earlier rows-in-memory tile).
void PackHeadKeys(const AttentionParams& p, int64_t batch_head, Scratch& s) {
  if (s.packed_head == batch_head) return;
  const int32_t d = p.head_dim;
  int32_t keys = p.k_len;
  for (int32_t i = 0; i < p.num_key_segments; ++i) {
    keys = std::max(keys, p.key_segments[i].begin + p.key_segments[i].count);
  }
  s.head_k.resize(static_cast<size_t>(keys) * d);
  s.head_v.resize(static_cast<size_t>(keys) * d);
  const auto copy = [&](int32_t first_key, int32_t count) {
    if (count <= 0) return;
    const SegmentRows<float> rows = FindKeyRows(p, batch_head, first_key);
    CopyRows(rows.k, rows.k_stride, count, d, s.head_k.data() + int64_t{first_key} * d);
    CopyRows(rows.v, rows.v_stride, count, d, s.head_v.data() + int64_t{first_key} * d);
  };
  if (p.num_key_segments == 0) {
    copy(0, p.k_len);
  } else {
    for (int32_t i = 0; i < p.num_key_segments; ++i) {
      copy(p.key_segments[i].begin, p.key_segments[i].count);
    }
  }
  s.packed_head = batch_head;
}

// The head's packed copy (PackHeadKeys) where the tile loops read keys
// packed, else null: they read them where they lie.
const Scratch* PackedHead(const AttentionParams& p, bool pack_heads, int64_t batch_head,
                          Scratch& s) {
  if (!pack_heads) return nullptr;
  PackHeadKeys(p, batch_head, s);
  return &s;
}

// Treats denormal inputs and results as zero while it lives (MXCSR's DAZ and
// FTZ), then restores the caller's mode. Probabilities below e^-87 are
// denormal; with the rows in the lanes one of them made each of the
// head_dim products that read its vector take a microcode assist, and a
// 4,096-token LSG layer's attention took 85 ms instead of 21. Next to the
// largest probability, which is 1, they change nothing.
class DenormalsAsZero {
 public:
  DenormalsAsZero() : saved_(_mm_getcsr()) {
    _mm_setcsr(saved_ | kFlushToZero | kDenormalsAreZero);
  }
  ~DenormalsAsZero() { _mm_setcsr(saved_); }
  DenormalsAsZero(const DenormalsAsZero&) = delete;
  DenormalsAsZero& operator=(const DenormalsAsZero&) = delete;

 private:
  static constexpr unsigned kFlushToZero = 0x8000;
  static constexpr unsigned kDenormalsAreZero = 0x0040;
  unsigned saved_;
};

// One (item, head, query block) on AVX-512 (kLanes 16) or AVX2 (8):
// queries [first, last) against its spans, with the rows in the lanes.
template <int kLanes>
void AttendBlockLanes(const AttentionParams& p, bool pack_heads, int64_t batch_head, int32_t first,
                      int32_t last, const KeySpan* spans, const KeySlide* slides, int32_t num_spans,
                      Scratch& s) {
  using Block = Fp32LanesBlock<kLanes>;
  const int32_t rows = last - first;
  const int32_t d = p.head_dim;
  const int32_t padded_rows = Block::PaddedRows(rows);
  const DenormalsAsZero denormals_as_zero;
  s.q.resize(static_cast<size_t>(padded_rows) * d);
  AssignZeros(s.acc, static_cast<size_t>(padded_rows) * d);
  s.scores.resize(static_cast<size_t>(Block::kGroupRows) * kKeyTile);
  s.row_max.assign(padded_rows, -std::numeric_limits<float>::infinity());
  AssignZeros(s.row_sum, padded_rows);
  Block block{
      s.q.data(), s.acc.data(), s.scores.data(), s.row_max.data(), s.row_sum.data(), padded_rows,
      d};
  block.first_query = first;

  const Scratch* packed = PackedHead(p, pack_heads, batch_head, s);
  const RowLayout q_layout = p.q_layout.Resolve(p.heads, p.q_len, d);
  block.LoadQueries(p.q + q_layout.Start(batch_head, p.heads) + first * q_layout.row_stride,
                    q_layout.row_stride, rows, p.scale);
  ForEachKeyTile(p, packed, batch_head, first, last, spans, slides, num_spans,
                 [&](const SegmentRows<float>& keys, int32_t key, int32_t tile_keys, KeySpan span,
                     KeySlide slide) {
                   block.mask_span = span;
                   block.mask_slide = slide;
                   block.tile_begin = key;
                   block.Run(keys.k, keys.k_stride, keys.v, keys.v_stride, tile_keys);
                 });
  const RowLayout out_layout = p.out_layout.Resolve(p.heads, p.q_len, d);
  block.StoreOutput(p.out + out_layout.Start(batch_head, p.heads) + first * out_layout.row_stride,
                    out_layout.row_stride, rows);
}

// One (item, head, query block) in portable code: queries [first, last)
// against its spans, rows in memory.
void AttendBlockPortable(const AttentionParams& p, int64_t batch_head, int32_t first, int32_t last,
                         const KeySpan* spans, const KeySlide* slides, int32_t num_spans,
                         Scratch& s) {
  const int32_t rows = last - first;
  const int32_t d = p.head_dim;
  const size_t row_floats = static_cast<size_t>(rows) * d;
  AssignZeros(s.q, row_floats);
  AssignZeros(s.acc, row_floats);
  s.scores.resize(static_cast<size_t>(rows) * kKeyTile);
  s.row_max.assign(rows, -std::numeric_limits<float>::infinity());
  AssignZeros(s.row_sum, rows);

  const RowLayout q_layout = p.q_layout.Resolve(p.heads, p.q_len, d);
  const RowLayout out_layout = p.out_layout.Resolve(p.heads, p.q_len, d);
  const float* q = p.q + q_layout.Start(batch_head, p.heads) + first * q_layout.row_stride;
  for (int32_t r = 0; r < rows; ++r) {
    for (int32_t i = 0; i < d; ++i) s.q[r * d + i] = q[r * q_layout.row_stride + i] * p.scale;
  }
  ForEachKeyTile(p, nullptr, batch_head, first, last, spans, slides, num_spans,
                 [&](const SegmentRows<float>& keys, int32_t key, int32_t tile_keys, KeySpan span,
                     KeySlide slide) {
                   TilePortable(s, rows, keys.k, keys.k_stride, keys.v, keys.v_stride, tile_keys, d,
                                first, key, span, slide);
                 });

  float* out = p.out + out_layout.Start(batch_head, p.heads) + first * out_layout.row_stride;
  for (int32_t r = 0; r < rows; ++r) {
    const float inverse = s.row_sum[r] > 0 ? 1.0f / s.row_sum[r] : 0.0f;
    const float* acc = s.acc.data() + static_cast<int64_t>(r) * d;
    for (int32_t i = 0; i < d; ++i) out[r * out_layout.row_stride + i] = acc[i] * inverse;
  }
}

}  // namespace

void BlockSparseAttentionCpu(const AttentionParams& p, const BlockSparsePlanView& plan,
                             int num_threads) {
  const TilePath path = ChooseTilePath(p);
  // The SIMD loops read packed copies of strided keys; the portable one, the
  // reference, reads them in place.
  const bool pack_heads = path != TilePath::kPortable && KeysAreStrided(p);
  ForEachQueryBlock(plan, static_cast<int64_t>(p.batch) * p.heads, num_threads, [&]() {
    return [&p, path, pack_heads, scratch = Scratch{}](
               int64_t batch_head, int32_t first, int32_t last, const KeySpan* spans,
               const KeySlide* slides, int32_t num_spans) mutable {
      switch (path) {
        case TilePath::kAvx512:
          AttendBlockLanes<16>(p, pack_heads, batch_head, first, last, spans, slides, num_spans,
                               scratch);
          break;
        case TilePath::kAvx2:
          AttendBlockLanes<8>(p, pack_heads, batch_head, first, last, spans, slides, num_spans,
                              scratch);
          break;
        case TilePath::kPortable:
          AttendBlockPortable(p, batch_head, first, last, spans, slides, num_spans, scratch);
      }
    };
  });
}

}  // namespace docsparse
