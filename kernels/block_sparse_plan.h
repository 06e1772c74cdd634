// The block-sparse plan as every executor (CPU and CUDA) takes it: query
// blocks and, per (item, head, query block), key spans over the extended key
// sequence; and RowLayout, where the rows of an operand lie. Plain structs,
// no dependencies, so that nvcc-compiled files include them too.
#ifndef DOCSPARSE_KERNELS_BLOCK_SPARSE_PLAN_H_
#define DOCSPARSE_KERNELS_BLOCK_SPARSE_PLAN_H_

#include <cstdint>

namespace docsparse {

// Keys [begin, begin + length) of the (extended) key sequence.
struct KeySpan {
  int32_t begin;
  int32_t length;
};

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

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_BLOCK_SPARSE_PLAN_H_
