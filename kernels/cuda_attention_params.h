// What the CUDA attention executors take: device pointers to q, k, v and out
// in one element type, their shapes and row layouts. Plain structs and the
// CUDA runtime's C types only (no torch types), so that the kernels compile
// with nvcc alone and the tests drive them with cudaMalloc'd buffers.
#ifndef DOCSPARSE_KERNELS_CUDA_ATTENTION_PARAMS_H_
#define DOCSPARSE_KERNELS_CUDA_ATTENTION_PARAMS_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/block_sparse_plan.h"

namespace docsparse {

// The element type of q, k, v and out. Scores, the softmax and the
// accumulators are fp32 in every case.
enum class CudaElementType { kFloat32, kBFloat16, kFloat16 };

inline int CudaElementBytes(CudaElementType type) {
  return type == CudaElementType::kFloat32 ? 4 : 2;
}

// Which kernel runs. kAuto takes the tensor-core (mma.sync) kernel for bf16 and
// fp16 with head_dim 32, 64 or 128 and 16-byte aligned rows, else the SIMT
// kernel; kSimt forces the SIMT kernel (tests compare the two).
enum class CudaKernelPath { kAuto, kSimt };

struct CudaAttentionParams {
  const void* q;  // [batch, heads, q_len, head_dim], laid out as q_layout says
  const void* k;  // [batch, heads, k_len, head_dim]
  const void* v;  // [batch, heads, k_len, head_dim]
  void* out;      // [batch, heads, q_len, head_dim]
  CudaElementType element_type;
  int32_t batch;
  int32_t heads;
  int32_t q_len;
  int32_t k_len;
  int32_t head_dim;  // 1 to 128
  float scale;       // usually 1 / sqrt(head_dim)
  CudaKernelPath path = CudaKernelPath::kAuto;
  RowLayout q_layout = {}, k_layout = {}, v_layout = {}, out_layout = {};  // default: contiguous
};

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_CUDA_ATTENTION_PARAMS_H_
