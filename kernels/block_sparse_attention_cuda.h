// CUDA block-sparse attention executor: the same plan and semantics as
// BlockSparseAttentionCpu (kernels/block_sparse_attention.h). A thread block
// takes up to 128 queries of one (item, head, query block), gathers the keys
// of the block's spans into shared-memory tiles of 64 keys (short spans share
// a tile, so LSG's one-token global span costs one row, not a tile) and runs
// an online softmax over the tiles; no query x key matrix exists anywhere.
// bf16/fp16 use tensor cores (mma.sync m16n8k16, fp32 accumulation), fp32 a
// SIMT kernel with fp32 arithmetic throughout.
#ifndef DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_CUDA_H_
#define DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/block_sparse_plan.h"
#include "kernels/cuda_attention_params.h"

namespace docsparse {

// Launches the kernel on `stream`. `device_plan`'s arrays are device memory;
// `max_query_block_rows` is the longest query block of the plan (the host
// knows it from its copy of query_block_starts): the launch covers each block
// in tiles of 64 or 128 queries. A query whose row has no span gets zeros; queries
// outside every block are left untouched. Returns cudaErrorInvalidValue for
// shapes the kernels do not take (head_dim outside 1..128, negative sizes),
// else the launch's error.
cudaError_t BlockSparseAttentionCuda(const CudaAttentionParams& params,
                                     const BlockSparsePlanView& device_plan,
                                     int32_t max_query_block_rows, cudaStream_t stream);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_CUDA_H_
