// The edge-list executor (edge_attention.h) on bf16 operands, for bf16
// models on CPUs with AVX512-BF16: q·k by VDPBF16PS on the rows where the
// projection left them (the encoder's interleaved q, k and v, no fp32 copy),
// the online softmax and p·v in fp32, the context written in bf16 where the
// output product reads it. SBM's edges are random, so each key and value row
// is a gather: in bf16 a 32-dimension row is one cache line instead of two.
#ifndef DOCSPARSE_KERNELS_EDGE_ATTENTION_BF16_H_
#define DOCSPARSE_KERNELS_EDGE_ATTENTION_BF16_H_

#include <cstdint>

#include "kernels/block_sparse_plan.h"
#include "kernels/edge_attention.h"

namespace docsparse {

struct EdgeAttentionBf16Params {
  // [batch, heads, len, head_dim] bf16 bits, laid out as the layouts say
  // (contiguous where all zero; head_dim contiguous always).
  const uint16_t* q;
  const uint16_t* k;
  const uint16_t* v;
  uint16_t* out;
  const EdgeListView* edges;  // [batch * heads], item-major
  int32_t batch;
  int32_t heads;
  int32_t q_len;
  int32_t k_len;
  int32_t head_dim;
  float scale;  // applied to the fp32 scores, usually 1 / sqrt(head_dim)
  RowLayout q_layout = {}, k_layout = {}, v_layout = {}, out_layout = {};
};

// True where the CPU has AVX512-BF16 (with AVX-512 BW/VL) and head_dim is
// 32, 64, 96 or 128.
bool EdgeAttentionBf16Available(int32_t head_dim);

// EdgeAttentionCpu's result (softmax over each query's edges, logit_bias
// added, zeros for empty rows and padding queries) rounded to bf16. Requires
// EdgeAttentionBf16Available(params.head_dim). As EdgeAttentionCpu, each row
// is computed by one thread in a fixed order: the bits do not depend on the
// thread count.
void EdgeAttentionCpuBf16(const EdgeAttentionBf16Params& params, int num_threads);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_EDGE_ATTENTION_BF16_H_
