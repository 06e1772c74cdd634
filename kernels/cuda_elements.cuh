// Device helpers shared by the CUDA attention kernels: the element types as
// fp32, 16-byte vector loads, and where an operand's (item, head) starts.
#ifndef DOCSPARSE_KERNELS_CUDA_ELEMENTS_CUH_
#define DOCSPARSE_KERNELS_CUDA_ELEMENTS_CUH_

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>

#include "kernels/block_sparse_plan.h"
#include "kernels/cuda_attention_params.h"

namespace docsparse {
namespace cuda {

__device__ __forceinline__ float ToFloat(float x) { return x; }
__device__ __forceinline__ float ToFloat(__nv_bfloat16 x) { return __bfloat162float(x); }
__device__ __forceinline__ float ToFloat(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T FromFloat(float x);
template <>
__device__ __forceinline__ float FromFloat<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __nv_bfloat16 FromFloat<__nv_bfloat16>(float x) {
  return __float2bfloat16_rn(x);
}
template <>
__device__ __forceinline__ __half FromFloat<__half>(float x) {
  return __float2half_rn(x);
}

// Two fp32 values as one 32-bit register of two 16-bit elements, the lower
// index in the low half (the mma.sync fragment order).
template <typename T>
__device__ __forceinline__ uint32_t PackPair(float lo, float hi);
template <>
__device__ __forceinline__ uint32_t PackPair<__nv_bfloat16>(float lo, float hi) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&pair);
}
template <>
__device__ __forceinline__ uint32_t PackPair<__half>(float lo, float hi) {
  const __half2 pair = __floats2half2_rn(lo, hi);
  return *reinterpret_cast<const uint32_t*>(&pair);
}

// Element strides of one operand, resolved on the host (RowLayout::Resolve).
struct Strides {
  int64_t batch;
  int64_t head;
  int64_t row;

  __device__ __forceinline__ int64_t Start(int32_t batch_head, int32_t heads) const {
    return static_cast<int64_t>(batch_head / heads) * batch + (batch_head % heads) * head;
  }
};

inline Strides ResolveStrides(const RowLayout& layout, int32_t heads, int32_t len,
                              int32_t head_dim) {
  const RowLayout resolved = layout.Resolve(heads, len, head_dim);
  return Strides{resolved.batch_stride, resolved.head_stride, resolved.row_stride};
}

// Whether every row of an operand starts on a 16-byte boundary, which the
// vectorised kernels need.
inline bool RowsAligned16(const void* base, const Strides& s, int element_bytes) {
  const auto address = reinterpret_cast<uintptr_t>(base);
  return address % 16 == 0 && (s.batch * element_bytes) % 16 == 0 &&
         (s.head * element_bytes) % 16 == 0 && (s.row * element_bytes) % 16 == 0;
}

constexpr float kLog2e = 1.4426950408889634f;

}  // namespace cuda
}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_CUDA_ELEMENTS_CUH_
