#include "kernels/key_segments.h"

#include <algorithm>
#include <cstring>

namespace docsparse {

AssembledKeys AssembleKeySegments(const Bf16AttentionParams& p) {
  AssembledKeys out;
  out.params = p;
  if (p.num_key_segments == 0) return out;
  const int64_t d = p.head_dim;
  const int64_t batch_heads = static_cast<int64_t>(p.batch) * p.heads;
  out.k.resize(static_cast<size_t>(batch_heads * p.k_len * d));
  out.v.resize(out.k.size());
  // Head by head, segment by segment, a row at a time (zeros in the gaps),
  // on the caller's OpenMP team.
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < batch_heads; ++bh) {
    uint16_t* k = out.k.data() + bh * p.k_len * d;
    uint16_t* v = out.v.data() + bh * p.k_len * d;
    int32_t filled = 0;
    for (int32_t s = 0; s < p.num_key_segments; ++s) {
      const KeySegment& segment = p.key_segments[s];
      std::fill(k + filled * d, k + segment.begin * d, uint16_t{0});
      std::fill(v + filled * d, v + segment.begin * d, uint16_t{0});
      if (segment.count > 0) {
        const KeyRows rows = FindKeyRows(p, bh, segment.begin);
        for (int32_t r = 0; r < segment.count; ++r) {
          std::memcpy(k + (segment.begin + r) * d, rows.k + r * rows.k_stride,
                      d * sizeof(uint16_t));
          std::memcpy(v + (segment.begin + r) * d, rows.v + r * rows.v_stride,
                      d * sizeof(uint16_t));
        }
      }
      filled = segment.begin + segment.count;
    }
    std::fill(k + filled * d, k + p.k_len * d, uint16_t{0});
    std::fill(v + filled * d, v + p.k_len * d, uint16_t{0});
  }
  out.params.k = out.k.data();
  out.params.v = out.v.data();
  out.params.k_layout = {};
  out.params.v_layout = {};
  out.params.key_segments = nullptr;
  out.params.num_key_segments = 0;
  return out;
}

KeyRows FindKeyRows(const Bf16AttentionParams& p, int64_t batch_head, int32_t key) {
  const int32_t d = p.head_dim;
  if (p.num_key_segments == 0) {
    const RowLayout k_layout = p.k_layout.Resolve(p.heads, p.k_len, d);
    const RowLayout v_layout = p.v_layout.Resolve(p.heads, p.k_len, d);
    return {p.k + k_layout.Start(batch_head, p.heads) + key * k_layout.row_stride,
            p.v + v_layout.Start(batch_head, p.heads) + key * v_layout.row_stride,
            k_layout.row_stride, v_layout.row_stride};
  }
  int32_t s = 0;
  while (s + 1 < p.num_key_segments && key >= p.key_segments[s + 1].begin) ++s;
  const KeySegment& segment = p.key_segments[s];
  const RowLayout k_layout = segment.k_layout.Resolve(p.heads, segment.count, d);
  const RowLayout v_layout = segment.v_layout.Resolve(p.heads, segment.count, d);
  const int32_t row = key - segment.begin;
  return {segment.k + k_layout.Start(batch_head, p.heads) + row * k_layout.row_stride,
          segment.v + v_layout.Start(batch_head, p.heads) + row * v_layout.row_stride,
          k_layout.row_stride, v_layout.row_stride};
}

std::vector<uint8_t> ChunksWithinOneSegment(const Bf16AttentionParams& p, int32_t chunk_keys) {
  const int32_t chunks = p.k_len / chunk_keys;
  if (p.num_key_segments == 0) return std::vector<uint8_t>(chunks, 1);
  std::vector<uint8_t> within(chunks, 0);
  for (int32_t s = 0; s < p.num_key_segments; ++s) {
    const KeySegment& segment = p.key_segments[s];
    const int32_t first = (segment.begin + chunk_keys - 1) / chunk_keys;
    const int32_t end = std::min(chunks, (segment.begin + segment.count) / chunk_keys);
    for (int32_t c = first; c < end; ++c) within[c] = 1;
  }
  return within;
}

}  // namespace docsparse
