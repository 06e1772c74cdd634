// CUDA edge-list attention (kernels/edge_attention_cuda.h).
//
// One warp per query row. The vectorised kernel splits the warp into groups of
// kLanes lanes, one 16-byte slice of a key row per lane; group g takes edges
// g, g + G, g + 2G, ... of the row with its own online softmax, two edges per
// step so that four row loads are in flight, and the groups' (max, sum,
// accumulator) states are merged by shuffles at the end. The generic kernel
// (head sizes or alignments the vectors do not fit) spreads one row over the
// warp's lanes instead. Both compute in fp32 whatever the element type.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "kernels/cuda_elements.cuh"
#include "kernels/edge_attention_cuda.h"

namespace docsparse {
namespace cuda {
namespace {

constexpr int kWarpsPerBlock = 8;
constexpr int kGenericMaxDimsPerLane = 4;  // head_dim <= 128

struct EdgeShape {
  int32_t heads;
  int32_t q_len;
  int32_t k_len;
  int32_t head_dim;
  float scale_log2;  // scale · log2(e): scores are kept in log2 units
};

// The row this warp owns, or false past the last one.
__device__ __forceinline__ bool LocateRow(int64_t batch_heads, int32_t q_len, int64_t* batch_head,
                                          int32_t* query) {
  const int64_t row = static_cast<int64_t>(blockIdx.x) * kWarpsPerBlock + threadIdx.x / 32;
  if (row >= batch_heads * q_len) return false;
  *batch_head = row / q_len;
  *query = static_cast<int32_t>(row % q_len);
  return true;
}

// Merges online-softmax states (max in log2 units, sum, accumulators) across
// lanes `offset` apart.
template <int kValues>
__device__ __forceinline__ void MergeStates(int offset, float* row_max, float* row_sum,
                                            float* acc) {
  const float other_max = __shfl_xor_sync(0xffffffffu, *row_max, offset);
  const float other_sum = __shfl_xor_sync(0xffffffffu, *row_sum, offset);
  const float new_max = fmaxf(*row_max, other_max);
  const float base = new_max == -INFINITY ? 0.0f : new_max;
  const float mine = exp2f(*row_max - base);
  const float theirs = exp2f(other_max - base);
  *row_sum = *row_sum * mine + other_sum * theirs;
#pragma unroll
  for (int i = 0; i < kValues; ++i) {
    const float other = __shfl_xor_sync(0xffffffffu, acc[i], offset);
    acc[i] = acc[i] * mine + other * theirs;
  }
  *row_max = new_max;
}

// One key (score in log2 units, or -inf for none) into a running state.
template <int kValues>
__device__ __forceinline__ void Accumulate(float score, const float* value, float* row_max,
                                           float* row_sum, float* acc) {
  const float new_max = fmaxf(*row_max, score);
  const float base = new_max == -INFINITY ? 0.0f : new_max;
  const float correction = exp2f(*row_max - base);
  const float weight = exp2f(score - base);
  *row_sum = *row_sum * correction + weight;
#pragma unroll
  for (int i = 0; i < kValues; ++i) acc[i] = fmaf(weight, value[i], acc[i] * correction);
  *row_max = new_max;
}

template <typename T, int kVec>
__device__ __forceinline__ void LoadVector(const T* source, float* values) {
  const uint4 raw = *reinterpret_cast<const uint4*>(source);
  const T* elements = reinterpret_cast<const T*>(&raw);
#pragma unroll
  for (int i = 0; i < kVec; ++i) values[i] = ToFloat(elements[i]);
}

template <typename T, int kD>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    EdgeVectorKernel(const T* q, const T* k, const T* v, T* out, const EdgeListView* edges,
                     int64_t batch_heads, EdgeShape shape) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kLanes = kD / kVec;  // lanes per key row
  constexpr int kGroups = 32 / kLanes;
  static_assert(kLanes * kVec == kD && kLanes <= 32 && (kLanes & (kLanes - 1)) == 0,
                "head_dim must split into a power-of-two number of 16-byte slices");
  int64_t batch_head;
  int32_t query;
  if (!LocateRow(batch_heads, shape.q_len, &batch_head, &query)) return;
  const int lane = threadIdx.x % 32;
  const int group = lane / kLanes;
  const int slice = (lane % kLanes) * kVec;

  const EdgeListView view = edges[batch_head];
  const int64_t key_base = batch_head * shape.k_len * kD;
  T* out_row = out + (batch_head * shape.q_len + query) * kD + slice;

  float acc[kVec];
#pragma unroll
  for (int i = 0; i < kVec; ++i) acc[i] = 0.0f;
  float row_max = -INFINITY;
  float row_sum = 0.0f;
  if (query < view.rows) {
    float query_slice[kVec];
    LoadVector<T, kVec>(q + (batch_head * shape.q_len + query) * kD + slice, query_slice);
#pragma unroll
    for (int i = 0; i < kVec; ++i) query_slice[i] *= shape.scale_log2;
    const int64_t begin = view.row_offsets[query];
    const int64_t end = view.row_offsets[query + 1];
    // Every lane runs every step (the shuffles need the whole warp); a group
    // past the row's end scores -inf and reads nothing.
    for (int64_t step = begin; step < end; step += 2 * kGroups) {
      const int64_t edge[2] = {step + group, step + kGroups + group};
      float key_slice[2][kVec];
      float value_slice[2][kVec];
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        if (edge[u] < end) {
          const int64_t row = key_base + static_cast<int64_t>(view.keys[edge[u]]) * kD + slice;
          LoadVector<T, kVec>(k + row, key_slice[u]);
          LoadVector<T, kVec>(v + row, value_slice[u]);
        } else {
#pragma unroll
          for (int i = 0; i < kVec; ++i) key_slice[u][i] = value_slice[u][i] = 0.0f;
        }
      }
#pragma unroll
      for (int u = 0; u < 2; ++u) {
        float dot = 0.0f;
#pragma unroll
        for (int i = 0; i < kVec; ++i) dot = fmaf(query_slice[i], key_slice[u][i], dot);
#pragma unroll
        for (int offset = kLanes / 2; offset > 0; offset /= 2) {
          dot += __shfl_xor_sync(0xffffffffu, dot, offset);
        }
        // The bias is in natural-log units, as EdgeAttentionCpu adds it.
        if (edge[u] < end && view.logit_bias != nullptr) dot += view.logit_bias[edge[u]] * kLog2e;
        Accumulate<kVec>(edge[u] < end ? dot : -INFINITY, value_slice[u], &row_max, &row_sum, acc);
      }
    }
#pragma unroll
    for (int offset = kLanes; offset < 32; offset *= 2) {
      MergeStates<kVec>(offset, &row_max, &row_sum, acc);
    }
  }
  if (group != 0) return;
  const float inverse = row_sum > 0.0f ? 1.0f / row_sum : 0.0f;
  uint4 packed;
  T* result = reinterpret_cast<T*>(&packed);
#pragma unroll
  for (int i = 0; i < kVec; ++i) result[i] = FromFloat<T>(acc[i] * inverse);
  *reinterpret_cast<uint4*>(out_row) = packed;
}

template <typename T>
__global__ void __launch_bounds__(kWarpsPerBlock * 32)
    EdgeGenericKernel(const T* q, const T* k, const T* v, T* out, const EdgeListView* edges,
                      int64_t batch_heads, EdgeShape shape) {
  int64_t batch_head;
  int32_t query;
  if (!LocateRow(batch_heads, shape.q_len, &batch_head, &query)) return;
  const int lane = threadIdx.x % 32;
  const int32_t d_len = shape.head_dim;
  const EdgeListView view = edges[batch_head];
  const int64_t key_base = batch_head * shape.k_len * d_len;

  float acc[kGenericMaxDimsPerLane] = {0.0f, 0.0f, 0.0f, 0.0f};
  float row_sum = 0.0f;
  if (query < view.rows) {
    float query_part[kGenericMaxDimsPerLane];
    const T* query_row = q + (batch_head * shape.q_len + query) * d_len;
#pragma unroll
    for (int i = 0; i < kGenericMaxDimsPerLane; ++i) {
      const int d = lane + 32 * i;
      query_part[i] = d < d_len ? ToFloat(query_row[d]) * shape.scale_log2 : 0.0f;
    }
    float row_max = -INFINITY;
    const int64_t end = view.row_offsets[query + 1];
    for (int64_t edge = view.row_offsets[query]; edge < end; ++edge) {
      const int64_t row = key_base + static_cast<int64_t>(view.keys[edge]) * d_len;
      float value_part[kGenericMaxDimsPerLane];
      float dot = 0.0f;
#pragma unroll
      for (int i = 0; i < kGenericMaxDimsPerLane; ++i) {
        const int d = lane + 32 * i;
        const bool inside = d < d_len;
        dot = fmaf(query_part[i], inside ? ToFloat(k[row + d]) : 0.0f, dot);
        value_part[i] = inside ? ToFloat(v[row + d]) : 0.0f;
      }
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) {
        dot += __shfl_xor_sync(0xffffffffu, dot, offset);
      }
      if (view.logit_bias != nullptr) dot += view.logit_bias[edge] * kLog2e;
      Accumulate<kGenericMaxDimsPerLane>(dot, value_part, &row_max, &row_sum, acc);
    }
  }
  const float inverse = row_sum > 0.0f ? 1.0f / row_sum : 0.0f;
  T* out_row = out + (batch_head * shape.q_len + query) * d_len;
#pragma unroll
  for (int i = 0; i < kGenericMaxDimsPerLane; ++i) {
    const int d = lane + 32 * i;
    if (d < d_len) out_row[d] = FromFloat<T>(acc[i] * inverse);
  }
}

template <typename T>
cudaError_t Launch(const CudaAttentionParams& params, const EdgeListView* edges,
                   int64_t batch_heads, bool vectorised, cudaStream_t stream) {
  const EdgeShape shape{params.heads, params.q_len, params.k_len, params.head_dim,
                        params.scale * kLog2e};
  const int64_t rows = batch_heads * params.q_len;
  const int64_t blocks = (rows + kWarpsPerBlock - 1) / kWarpsPerBlock;
  if (blocks > 0x7fffffff) return cudaErrorInvalidValue;
  const auto grid = static_cast<unsigned>(blocks);
  constexpr int threads = kWarpsPerBlock * 32;
  const T* q = static_cast<const T*>(params.q);
  const T* k = static_cast<const T*>(params.k);
  const T* v = static_cast<const T*>(params.v);
  T* out = static_cast<T*>(params.out);
  if (!vectorised) {
    EdgeGenericKernel<T><<<grid, threads, 0, stream>>>(q, k, v, out, edges, batch_heads, shape);
  } else if (params.head_dim == 32) {
    EdgeVectorKernel<T, 32><<<grid, threads, 0, stream>>>(q, k, v, out, edges, batch_heads, shape);
  } else if (params.head_dim == 64) {
    EdgeVectorKernel<T, 64><<<grid, threads, 0, stream>>>(q, k, v, out, edges, batch_heads, shape);
  } else {
    EdgeVectorKernel<T, 128><<<grid, threads, 0, stream>>>(q, k, v, out, edges, batch_heads, shape);
  }
  return cudaGetLastError();
}

bool IsContiguous(const RowLayout& layout) {
  return layout.batch_stride == 0 && layout.head_stride == 0 && layout.row_stride == 0;
}

bool Aligned16(const void* pointer) { return reinterpret_cast<uintptr_t>(pointer) % 16 == 0; }

}  // namespace
}  // namespace cuda

cudaError_t EdgeAttentionCuda(const CudaAttentionParams& params, const EdgeListView* device_edges,
                              cudaStream_t stream) {
  if (params.head_dim < 1 || params.head_dim > 128 || params.batch < 0 || params.heads < 0 ||
      params.q_len < 0 || params.k_len < 0 || !cuda::IsContiguous(params.q_layout) ||
      !cuda::IsContiguous(params.k_layout) || !cuda::IsContiguous(params.v_layout) ||
      !cuda::IsContiguous(params.out_layout)) {
    return cudaErrorInvalidValue;
  }
  const int64_t batch_heads = int64_t{params.batch} * params.heads;
  if (batch_heads == 0 || params.q_len == 0) return cudaSuccess;
  const int d = params.head_dim;
  const bool vectorised = params.path == CudaKernelPath::kAuto &&
                          (d == 32 || d == 64 || d == 128) && cuda::Aligned16(params.q) &&
                          cuda::Aligned16(params.k) && cuda::Aligned16(params.v) &&
                          cuda::Aligned16(params.out);
  switch (params.element_type) {
    case CudaElementType::kFloat32:
      return cuda::Launch<float>(params, device_edges, batch_heads, vectorised, stream);
    case CudaElementType::kBFloat16:
      return cuda::Launch<__nv_bfloat16>(params, device_edges, batch_heads, vectorised, stream);
    case CudaElementType::kFloat16:
      return cuda::Launch<__half>(params, device_edges, batch_heads, vectorised, stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace docsparse
