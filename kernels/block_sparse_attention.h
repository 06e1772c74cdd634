// CPU block-sparse attention executor: each block of queries attends to a
// short list of key spans, with an online (streaming) softmax, so no
// query x key matrix is ever materialised. Dense attention is the plan with
// one span covering every real key. Kernels see raw pointers and POD
// parameters only (no torch types).
#ifndef DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_H_
#define DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_H_

#include <cstdint>

namespace docsparse {

// Keys [begin, begin + length) of the (extended) key sequence.
struct KeySpan {
  int32_t begin;
  int32_t length;
};

// Per batch item and query block, the spans its queries attend to, in CSR
// form. Shared by all heads. Spans of one block must not overlap (a plan
// never computes a query-key pair twice).
struct BlockSparsePlanView {
  int32_t block_size;           // queries per block (the last block may be short)
  int32_t num_query_blocks;     // ceil(q_len / block_size)
  const int32_t* span_offsets;  // [batch * num_query_blocks + 1]
  const KeySpan* spans;         // [span_offsets[batch * num_query_blocks]]
};

struct AttentionParams {
  const float* q;  // [batch, heads, q_len, head_dim], contiguous
  const float* k;  // [batch, heads, k_len, head_dim], contiguous
  const float* v;  // [batch, heads, k_len, head_dim], contiguous
  float* out;      // [batch, heads, q_len, head_dim], contiguous
  int32_t batch;
  int32_t heads;
  int32_t q_len;
  int32_t k_len;
  int32_t head_dim;
  float scale;  // usually 1 / sqrt(head_dim)
};

// Computes softmax(q·kᵀ·scale) v over each query's spans. A query whose block
// has no span gets zeros. Splits (batch, head, query block) work across
// `num_threads` threads. Span bounds must lie within [0, k_len).
void BlockSparseAttentionCpu(const AttentionParams& params, const BlockSparsePlanView& plan,
                             int num_threads);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_H_
