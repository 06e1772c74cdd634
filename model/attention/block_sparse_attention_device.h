// The CUDA block-sparse executor on LibTorch tensors: the one torch-facing
// entry of kernels/block_sparse_attention_cuda.h. It checks its inputs, takes
// the tensors' device and current stream, copies the plan (host memory, as the
// planners make it) to the device on that stream, and checks the launch. q, k
// and v are read in place through their strides, so a view of a fused
// projection needs no copy. Built with a CUDA LibTorch (scripts/build --cuda);
// in the default build it answers FAILED_PRECONDITION.
#ifndef DOCSPARSE_MODEL_ATTENTION_BLOCK_SPARSE_ATTENTION_DEVICE_H_
#define DOCSPARSE_MODEL_ATTENTION_BLOCK_SPARSE_ATTENTION_DEVICE_H_

#include <ATen/ATen.h>

#include "absl/status/statusor.h"
#include "kernels/block_sparse_plan.h"

namespace docsparse {

// softmax(q·kᵀ·scale)·v over the plan's spans. q [batch, heads, q_len, d], k and
// v [batch, heads, k_len, d] on one CUDA device, one dtype (bf16, fp16 or
// fp32), the last dimension contiguous; `plan` holds batch·heads·blocks rows.
// Returns a new contiguous [batch, heads, q_len, d] tensor; queries outside
// every block are zeros.
absl::StatusOr<at::Tensor> BlockSparseAttentionOnDevice(const at::Tensor& q, const at::Tensor& k,
                                                        const at::Tensor& v,
                                                        const BlockSparsePlanView& plan,
                                                        float scale);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_BLOCK_SPARSE_ATTENTION_DEVICE_H_
