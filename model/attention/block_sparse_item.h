// One sequence's block-sparse attention on whichever executor runs it: the
// CUDA executor for device tensors, a bf16 CPU executor (AMX or
// AVX512-BF16) when the caller chose one, else the fp32 CPU executor. LSG
// and the position patterns share it; they differ in how they plan.
#ifndef DOCSPARSE_MODEL_ATTENTION_BLOCK_SPARSE_ITEM_H_
#define DOCSPARSE_MODEL_ATTENTION_BLOCK_SPARSE_ITEM_H_

#include <ATen/ATen.h>

#include <vector>

#include "kernels/bf16_attention_executor.h"
#include "kernels/block_sparse_plan.h"
#include "model/attention/attention.h"

namespace docsparse {

// What a batch runs on: bf16 products where the model is bf16 and the CPU
// has AMX or AVX512-BF16 (else null: fp32); on a CUDA device the CUDA
// executor in the activations' type. `context` is the batch's context buffer
// (context_buffer.h) in that executor's type.
struct BlockSparseBatch {
  Bf16AttentionExecutor bf16;
  at::Tensor context;
};
BlockSparseBatch PrepareBlockSparseBatch(const AttentionInputs& in);

// q [heads, q_len, d]; k and v [heads, k_len, d], any strides with d
// contiguous (read in place where their type is the executor's); `out`
// [heads, q_len, d], a view of the context buffer in the executor's type
// (bf16 with `bf16`, the activations' on a device, else fp32). Rows outside
// the plan's blocks are left as they are on the CPU and written zero on a
// device. The CUDA executor takes no sliding spans: callers expand them.
void RunBlockSparseItem(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const BlockSparsePlanView& plan, Bf16AttentionExecutor bf16, int threads,
                        at::Tensor out);

// Keys [begin, begin + k.size(1)) of a key sequence made of pieces: k and v
// [heads, count, d], any strides with d contiguous.
struct KeyPiece {
  int32_t begin;
  at::Tensor k, v;
};

// As above, with the key sequence [0, k_len) made of `pieces` (ascending,
// disjoint; no span reaches a key outside them). A bf16 CPU executor reads
// the pieces where they lie; the others get one copy of them.
void RunBlockSparseItem(const at::Tensor& q, const std::vector<KeyPiece>& pieces, int32_t k_len,
                        const BlockSparsePlanView& plan, Bf16AttentionExecutor bf16, int threads,
                        at::Tensor out);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_BLOCK_SPARSE_ITEM_H_
