#include "kernels/key_segments.h"

#include <algorithm>
#include <cstring>

namespace docsparse {
namespace {

// Rows [begin, begin + count) of a row sequence, the same for every
// (item · head): read from `base` as `layout` says (in elements, resolved).
struct RowPiece {
  int32_t begin = 0;
  int32_t count = 0;
  const void* base = nullptr;
  RowLayout layout = {};
};

// Copies `pieces` (ascending, disjoint) into `out`, [batch_heads, k_len,
// row_elements] elements of `element_bytes` each, contiguous, with zeros
// between and after them; `heads` per item, for the layouts. A row at a time,
// in parallel over (item · head) on the caller's OpenMP team.
void AssembleRowPieces(const RowPiece* pieces, int32_t num_pieces, int64_t batch_heads,
                       int32_t heads, int32_t k_len, int64_t row_elements, int64_t element_bytes,
                       void* out) {
  const int64_t row_bytes = row_elements * element_bytes;
#pragma omp parallel for schedule(static)
  for (int64_t bh = 0; bh < batch_heads; ++bh) {
    char* head = static_cast<char*>(out) + bh * k_len * row_bytes;
    int64_t filled = 0;  // rows written so far, in order
    for (int32_t i = 0; i < num_pieces; ++i) {
      const RowPiece& piece = pieces[i];
      std::memset(head + filled * row_bytes, 0, (piece.begin - filled) * row_bytes);
      const char* from =
          static_cast<const char*>(piece.base) + piece.layout.Start(bh, heads) * element_bytes;
      const int64_t stride = piece.layout.row_stride * element_bytes;
      char* to = head + piece.begin * row_bytes;
      for (int32_t r = 0; r < piece.count; ++r) {
        std::memcpy(to + r * row_bytes, from + r * stride, row_bytes);
      }
      filled = piece.begin + piece.count;
    }
    std::memset(head + filled * row_bytes, 0, (k_len - filled) * row_bytes);
  }
}

}  // namespace

AssembledKeys AssembleKeySegments(const Bf16AttentionParams& p) {
  AssembledKeys out;
  out.params = p;
  if (p.num_key_segments == 0) return out;
  const int64_t d = p.head_dim;
  const int64_t batch_heads = static_cast<int64_t>(p.batch) * p.heads;
  std::vector<RowPiece> keys, values;
  for (int32_t s = 0; s < p.num_key_segments; ++s) {
    const KeySegment& segment = p.key_segments[s];
    keys.push_back({segment.begin, segment.count, segment.k,
                    segment.k_layout.Resolve(p.heads, segment.count, p.head_dim)});
    values.push_back({segment.begin, segment.count, segment.v,
                      segment.v_layout.Resolve(p.heads, segment.count, p.head_dim)});
  }
  out.k.resize(static_cast<size_t>(batch_heads * p.k_len * d));
  out.v.resize(out.k.size());
  AssembleRowPieces(keys.data(), p.num_key_segments, batch_heads, p.heads, p.k_len, d,
                    sizeof(uint16_t), out.k.data());
  AssembleRowPieces(values.data(), p.num_key_segments, batch_heads, p.heads, p.k_len, d,
                    sizeof(uint16_t), out.v.data());
  out.params.k = out.k.data();
  out.params.v = out.v.data();
  out.params.k_layout = {};
  out.params.v_layout = {};
  out.params.key_segments = nullptr;
  out.params.num_key_segments = 0;
  return out;
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
