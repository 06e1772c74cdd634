// CPU edge-list attention executor: each query attends to an arbitrary set of
// keys given as a CSR list (SBM samples, LSH/routing buckets). The softmax is
// online (streaming) over chunks of a query's keys, so the largest temporary
// is one chunk of scores per thread and no query x key matrix is ever formed;
// the cost is linear in the number of edges. Kernels see raw pointers and POD
// parameters only (no torch types).
#ifndef DOCSPARSE_KERNELS_EDGE_ATTENTION_H_
#define DOCSPARSE_KERNELS_EDGE_ATTENTION_H_

#include <cstdint>

namespace docsparse {

// The keys of one (batch item, head), CSR by query: query i attends to
// keys[row_offsets[i] .. row_offsets[i + 1]). A key must not appear twice in
// a row (a plan never computes a query-key pair twice); ascending order is
// not required but reads keys and values in memory order, which is faster.
struct EdgeListView {
  const int64_t* row_offsets;  // [rows + 1], non-decreasing, row_offsets[0] = 0
  const int32_t* keys;         // [row_offsets[rows]], each in [0, k_len)
  // Queries [0, rows) have a row; queries [rows, q_len) (padding) get zeros.
  int32_t rows;
  // [row_offsets[rows]] or null: added to each edge's scaled score (a
  // sampled edge's log inverse inclusion probability, so the softmax
  // estimates the keys left out).
  const float* logit_bias = nullptr;
};

// Which instruction set the executor uses. kAuto takes AVX2+FMA when the CPU
// has it and head_dim is a multiple of 8; kPortable forces plain C++ (tests
// compare the two).
enum class EdgeKernelIsa { kAuto, kPortable };

struct EdgeAttentionParams {
  const float* q;             // [batch, heads, q_len, head_dim], contiguous
  const float* k;             // [batch, heads, k_len, head_dim], contiguous
  const float* v;             // [batch, heads, k_len, head_dim], contiguous
  float* out;                 // [batch, heads, q_len, head_dim], contiguous
  const EdgeListView* edges;  // [batch * heads], item-major
  int32_t batch;
  int32_t heads;
  int32_t q_len;
  int32_t k_len;
  int32_t head_dim;
  float scale;  // usually 1 / sqrt(head_dim)
  EdgeKernelIsa isa = EdgeKernelIsa::kAuto;
};

// out[b, h, i] = softmax_j∈E(i)(q_i·k_j·scale) · v_j over the edges E(i) of
// query i; a query with no edge (an empty row, or i >= rows) gets zeros, as
// the SBM reference does. Every query row is written. Work is split by
// (item, head, block of queries) over `num_threads` threads; each row is
// computed by one thread in a fixed order, so the result does not depend on
// the thread count.
void EdgeAttentionCpu(const EdgeAttentionParams& params, int num_threads);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_EDGE_ATTENTION_H_
