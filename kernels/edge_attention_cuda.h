// CUDA edge-list attention executor: the same edges and semantics as
// EdgeAttentionCpu (kernels/edge_attention.h). One warp per query row: the
// warp splits into groups of lanes, each group reads one key row with 16-byte
// loads and keeps its own online softmax over every G-th edge of the row; the
// groups' states are merged at the end. The work is linear in the number of
// edges and nothing of size q x k exists.
#ifndef DOCSPARSE_KERNELS_EDGE_ATTENTION_CUDA_H_
#define DOCSPARSE_KERNELS_EDGE_ATTENTION_CUDA_H_

#include <cuda_runtime_api.h>

#include "kernels/cuda_attention_params.h"
#include "kernels/edge_attention.h"

namespace docsparse {

// Launches the kernel on `stream`. `device_edges` points to batch * heads
// EdgeListViews in device memory whose arrays (offsets, keys and, when set,
// logit_bias) are device memory too (a row's offsets need not start at 0:
// they index the view's `keys` and `logit_bias`). q, k, v and out
// must be contiguous (their layouts all zero). A query with no edge, or at or
// beyond its view's `rows`, gets zeros. Returns cudaErrorInvalidValue for
// shapes the kernel does not take (head_dim outside 1..128, non-zero layouts),
// else the launch's error.
cudaError_t EdgeAttentionCuda(const CudaAttentionParams& params, const EdgeListView* device_edges,
                              cudaStream_t stream);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_EDGE_ATTENTION_CUDA_H_
