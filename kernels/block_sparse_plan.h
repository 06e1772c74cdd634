// The block-sparse plan as every executor (CPU and CUDA) takes it: query
// blocks and, per (item, head, query block), key spans over the extended key
// sequence; and RowLayout, where the rows of an operand lie. Plain structs,
// no dependencies, so that nvcc-compiled files include them too.
#ifndef DOCSPARSE_KERNELS_BLOCK_SPARSE_PLAN_H_
#define DOCSPARSE_KERNELS_BLOCK_SPARSE_PLAN_H_

#include <cstdint>
#include <type_traits>

namespace docsparse {

// Keys [begin, begin + length) of the (extended) key sequence.
struct KeySpan {
  int32_t begin;
  int32_t length;
};

// A sliding span, a band that moves with the query (Longformer's window):
// query q attends keys [max(begin, q + offset), min(begin + length, q +
// offset + width)) of its span {begin, length}, which then only clips. A
// width of 0 means the span does not slide: every query of the block attends
// all of it.
struct KeySlide {
  int32_t offset;
  int32_t width;
};

// Query q's keys through `span` and `slide`: [*begin, *end), possibly empty.
inline void SlidingRowKeys(KeySpan span, KeySlide slide, int32_t q, int32_t* begin, int32_t* end) {
  const int32_t span_end = span.begin + span.length;
  if (slide.width == 0) {
    *begin = span.begin;
    *end = span_end;
    return;
  }
  const int64_t lo = int64_t{q} + slide.offset;
  const int64_t hi = lo + slide.width;
  *begin = static_cast<int32_t>(lo > span.begin ? (lo < span_end ? lo : span_end) : span.begin);
  *end = static_cast<int32_t>(hi < span_end ? (hi > *begin ? hi : *begin) : span_end);
}

// The keys queries [first, last) reach through `span` and `slide` together:
// [*begin, *end), possibly empty.
inline void SlidingBlockKeys(KeySpan span, KeySlide slide, int32_t first, int32_t last,
                             int32_t* begin, int32_t* end) {
  int32_t unused = 0;
  SlidingRowKeys(span, slide, first, begin, &unused);
  SlidingRowKeys(span, slide, last - 1, &unused, end);
  if (*end < *begin) *end = *begin;
}

// Query blocks (shared by every item and head) and, per (item, head, query
// block), the spans its queries attend to, in CSR form. Spans of one row
// must not overlap (a plan never computes a query-key pair twice).
struct BlockSparsePlanView {
  int32_t num_query_blocks;
  // Block i holds queries [query_block_starts[i], query_block_starts[i+1]);
  // [num_query_blocks + 1], non-decreasing, last <= q_len. Queries outside
  // every block are left untouched.
  const int32_t* query_block_starts;
  // Row (b * heads + h) * num_query_blocks + i has spans
  // [span_offsets[row], span_offsets[row + 1]); [batch*heads*blocks + 1].
  const int32_t* span_offsets;
  const KeySpan* spans;
  // Per span, how it slides; null: no span slides. The CPU executors take
  // sliding spans (AMX row by row); the CUDA ones do not yet (callers
  // expand such plans to one query per block first). Every query must keep
  // at least one key over its block's spans.
  const KeySlide* slides = nullptr;
};

// Where the rows of a [batch, heads, len, head_dim] operand lie: element
// offsets between consecutive items, heads and rows (a row's head_dim
// elements are contiguous). All zero, the default, means contiguous. The
// encoder's projection output [batch, seq, 3, heads, head_dim] is read in
// place this way, and the context written straight into [batch, seq,
// heads, head_dim], with no copy on either side.
struct RowLayout {
  int64_t batch_stride = 0;
  int64_t head_stride = 0;
  int64_t row_stride = 0;

  // This layout, or the contiguous one when it is all zero.
  RowLayout Resolve(int32_t heads, int32_t len, int32_t head_dim) const {
    if (batch_stride != 0 || head_stride != 0 || row_stride != 0) return *this;
    return RowLayout{int64_t{heads} * len * head_dim, int64_t{len} * head_dim, head_dim};
  }
  // Offset of the first row of (item · heads + head) `batch_head`.
  int64_t Start(int64_t batch_head, int32_t heads) const {
    return batch_head / heads * batch_stride + batch_head % heads * head_stride;
  }
};

// Keys [begin, begin + count) of the key sequence and their values, read
// where they lie (LSG's global, derived and token keys are three buffers):
// [batch, heads, count, head_dim] elements (bf16 bits or fp32) laid out as
// the layouts say (contiguous where all zero).
template <typename Element>
struct KeySegmentOf {
  int32_t begin = 0;
  int32_t count = 0;
  const Element* k = nullptr;
  const Element* v = nullptr;
  RowLayout k_layout = {}, v_layout = {};
};

// The key and value rows of key `key` of (item · heads + head) `batch_head`
// in `segments` (ascending, disjoint; the key must lie in one), the strides
// to the next key's rows, and where (exclusive) the key's segment ends.
template <typename Element>
struct SegmentRows {
  const Element* k;
  const Element* v;
  int64_t k_stride;
  int64_t v_stride;
  int32_t end;
};
template <typename Element>
SegmentRows<Element> FindSegmentRows(const KeySegmentOf<Element>* segments, int32_t num_segments,
                                     int32_t heads, int32_t head_dim, int64_t batch_head,
                                     int32_t key) {
  int32_t s = 0;
  while (s + 1 < num_segments && key >= segments[s + 1].begin) ++s;
  const KeySegmentOf<Element>& segment = segments[s];
  const RowLayout k_layout = segment.k_layout.Resolve(heads, segment.count, head_dim);
  const RowLayout v_layout = segment.v_layout.Resolve(heads, segment.count, head_dim);
  const int32_t row = key - segment.begin;
  return {segment.k + k_layout.Start(batch_head, heads) + row * k_layout.row_stride,
          segment.v + v_layout.Start(batch_head, heads) + row * v_layout.row_stride,
          k_layout.row_stride, v_layout.row_stride, segment.begin + segment.count};
}

// The rows of key `key` of (item · heads + head) `batch_head` in an
// executor's parameters (fp32 or bf16): a segment's where they have key
// segments, else k and v's (`end` then k_len).
template <typename Params>
auto FindKeyRows(const Params& p, int64_t batch_head, int32_t key) {
  using Element = std::remove_const_t<std::remove_pointer_t<decltype(p.k)>>;
  if (p.num_key_segments != 0) {
    return FindSegmentRows(p.key_segments, p.num_key_segments, p.heads, p.head_dim, batch_head,
                           key);
  }
  const RowLayout k_layout = p.k_layout.Resolve(p.heads, p.k_len, p.head_dim);
  const RowLayout v_layout = p.v_layout.Resolve(p.heads, p.k_len, p.head_dim);
  return SegmentRows<Element>{p.k + k_layout.Start(batch_head, p.heads) + key * k_layout.row_stride,
                              p.v + v_layout.Start(batch_head, p.heads) + key * v_layout.row_stride,
                              k_layout.row_stride, v_layout.row_stride, p.k_len};
}

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_BLOCK_SPARSE_PLAN_H_
