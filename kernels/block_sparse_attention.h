// CPU block-sparse attention executor: each block of queries attends to a
// short list of key spans, with an online (streaming) softmax over key tiles,
// so no query x key matrix is ever materialised: the largest temporary is one
// (query block x key tile) score tile per thread. Keys are read in place
// (spans over the extended key sequence), never copied per block.
// Dense attention is the plan with one span covering every real key.
// Kernels see raw pointers and POD parameters only (no torch types).
#ifndef DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_H_
#define DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_H_

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

// Which instruction set the executor uses; kAuto picks AVX2+FMA when the CPU
// has it. kPortable forces the plain C++ path (tests compare the two).
enum class KernelIsa { kAuto, kPortable };

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
  KernelIsa isa = KernelIsa::kAuto;
};

// Computes softmax(q·kᵀ·scale) v over each query's spans. A query whose row
// has no span gets zeros. Splits (item, head, query block) work across
// `num_threads` threads. Span bounds must lie within [0, k_len).
void BlockSparseAttentionCpu(const AttentionParams& params, const BlockSparsePlanView& plan,
                             int num_threads);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_H_
