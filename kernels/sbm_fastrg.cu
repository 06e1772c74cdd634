// CUDA fastRG sampling of one SBM head (kernels/sbm_fastrg_cuda.h).
//
// One warp per query row, twice: the first pass counts the row's distinct
// keys, the second writes them. Each pass draws the row's copies again from
// the row's counter-based stream (a copy is one Mix64, so drawing twice is
// cheaper than storing every copy) and deduplicates them in a per-warp bitmap
// over the keys in shared memory, read back word by word, so rows come out
// ascending with no sort. Lane 0 draws the row's Poisson count with the
// CPU's own code (kernels/sbm_sampling.h) and builds the row's cluster sums.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <vector>

#include "kernels/sbm_fastrg_cuda.h"
#include "kernels/sbm_sampling.h"

namespace docsparse {
namespace {

constexpr int kMaxWarpsPerBlock = 4;
// The largest dynamic shared memory a block asks for (Hopper and Ampere
// allow more; this leaves room on both).
constexpr size_t kMaxSharedBytes = 160 * 1024;

__constant__ double kDeviceLogFactorials[kLogFactorialTableSize];

// Shared memory of one warp: the key bitmap, then the row's cluster sums.
size_t WarpSharedBytes(int32_t tokens) {
  return (static_cast<size_t>(tokens + 31) / 32) * sizeof(uint32_t) +
         kSbmMaxClusters * sizeof(float);
}

// Pass 1 (`out_keys` null): distinct[row] and copies[row]. Pass 2: the row's
// distinct keys, ascending, at out_keys + row_offsets[row].
__global__ void SampleRowsKernel(SbmHeadTablesView t, uint64_t head_key, int64_t* distinct,
                                 int64_t* copies_out, const int64_t* row_offsets,
                                 int32_t* out_keys) {
  extern __shared__ uint32_t shared_words[];
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int32_t words = (t.tokens + 31) / 32;
  uint32_t* bitmap = shared_words + warp * (words + kSbmMaxClusters);
  float* cumulative = reinterpret_cast<float*>(bitmap + words);
  const int32_t row = blockIdx.x * (blockDim.x / 32) + warp;
  if (row >= t.tokens) return;

  // Lane 0: the row's count (the CPU's Poisson code on the row's stream) and
  // the same fp32 running cluster sums as the CPU's RowClusterTable.
  int64_t copies = 0;
  uint64_t counter = 0;
  int32_t last_positive = 0;
  if (lane == 0) {
    CounterRng rng(DeriveKey(head_key, static_cast<uint64_t>(row)));
    copies = SamplePoisson(t.row_rate[row], rng, kDeviceLogFactorials);
    counter = rng.counter();
    float total = 0;
    const float* profile = t.row_profile + static_cast<int64_t>(row) * t.clusters;
    for (int b = 0; b < t.clusters; ++b) {
      const float weight = static_cast<float>(profile[b] * t.key_mass[b]);
      total += weight;
      cumulative[b] = total;
      if (weight > 0) last_positive = b;
    }
  }
  copies = __shfl_sync(0xffffffffu, copies, 0);
  counter = __shfl_sync(0xffffffffu, counter, 0);
  last_positive = __shfl_sync(0xffffffffu, last_positive, 0);
  for (int32_t w = lane; w < words; w += 32) bitmap[w] = 0;
  __syncwarp();

  // Copy c is output c + 1 of the stream after the count: one 64-bit word,
  // the high half for the cluster (inverse CDF), the low half for the key.
  const CounterRng stream(counter);
  const float scale = cumulative[t.clusters - 1] * 0x1.0p-32f;
  for (int64_t c = lane; c < copies; c += 32) {
    const uint64_t bits = stream.Peek(static_cast<uint64_t>(c) + 1);
    const float x = static_cast<float>(static_cast<uint32_t>(bits >> 32)) * scale;
    int32_t b = 0;
    for (int i = 0; i < t.clusters; ++i) b += cumulative[i] <= x;
    b = min(b, last_positive);
    const int32_t key = DrawAlias(t.key_alias + static_cast<int64_t>(b) * t.tokens, t.tokens,
                                  static_cast<uint32_t>(bits));
    atomicOr(&bitmap[key / 32], 1u << (key % 32));
  }
  __syncwarp();

  if (out_keys == nullptr) {
    int64_t count = 0;
    for (int32_t w = lane; w < words; w += 32) count += __popc(bitmap[w]);
#pragma unroll
    for (int offset = 16; offset > 0; offset /= 2) {
      count += __shfl_xor_sync(0xffffffffu, count, offset);
    }
    if (lane == 0) {
      distinct[row] = count;
      copies_out[row] = copies;
    }
    return;
  }
  // Ascending keys: 32 words at a time, each lane writing its word's bits at
  // the prefix count of the lanes before it.
  int64_t at = row_offsets[row];
  for (int32_t base = 0; base < words; base += 32) {
    const int32_t w = base + lane;
    uint32_t bits = w < words ? bitmap[w] : 0u;
    const int count = __popc(bits);
    int before = count;
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
      const int other = __shfl_up_sync(0xffffffffu, before, offset);
      if (lane >= offset) before += other;
    }
    int64_t write = at + before - count;
    while (bits != 0) {
      out_keys[write++] = w * 32 + __ffs(bits) - 1;
      bits &= bits - 1;
    }
    at += __shfl_sync(0xffffffffu, before, 31);
  }
}

#define RETURN_IF_CUDA_ERROR(expr)              \
  do {                                          \
    const cudaError_t status_ = (expr);         \
    if (status_ != cudaSuccess) return status_; \
  } while (0)

}  // namespace

cudaError_t SampleSbmHeadCuda(const SbmHeadTablesView& tables, uint64_t head_key,
                              cudaStream_t stream, SbmDeviceEdges* edges) {
  *edges = SbmDeviceEdges{};
  if (tables.tokens < 0 || tables.clusters < 1 || tables.clusters > kSbmMaxClusters) {
    return cudaErrorInvalidValue;
  }
  const int32_t n = tables.tokens;
  RETURN_IF_CUDA_ERROR(cudaMallocAsync(reinterpret_cast<void**>(&edges->row_offsets),
                                       sizeof(int64_t) * (n + 1), stream));
  if (n == 0) return cudaMemsetAsync(edges->row_offsets, 0, sizeof(int64_t), stream);
  const size_t per_warp = WarpSharedBytes(n);
  const int warps = static_cast<int>(
      std::min<size_t>(kMaxWarpsPerBlock, std::max<size_t>(1, kMaxSharedBytes / per_warp)));
  if (per_warp > kMaxSharedBytes) return cudaErrorInvalidValue;  // > ~1.2 M keys
  const size_t shared = per_warp * warps;
  RETURN_IF_CUDA_ERROR(cudaFuncSetAttribute(
      SampleRowsKernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(shared)));
  RETURN_IF_CUDA_ERROR(cudaMemcpyToSymbolAsync(kDeviceLogFactorials, LogFactorialTable(),
                                               sizeof(double) * kLogFactorialTableSize, 0,
                                               cudaMemcpyHostToDevice, stream));
  const unsigned blocks = static_cast<unsigned>((n + warps - 1) / warps);

  // Pass 1: counts. The offsets are summed on the host (n numbers; the call
  // must wait for the total anyway, to size the keys).
  int64_t* counts = nullptr;
  RETURN_IF_CUDA_ERROR(
      cudaMallocAsync(reinterpret_cast<void**>(&counts), sizeof(int64_t) * 2 * n, stream));
  SampleRowsKernel<<<blocks, warps * 32, shared, stream>>>(tables, head_key, counts, counts + n,
                                                           nullptr, nullptr);
  RETURN_IF_CUDA_ERROR(cudaGetLastError());
  std::vector<int64_t> host(2 * static_cast<size_t>(n));
  RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(host.data(), counts, sizeof(int64_t) * 2 * n,
                                       cudaMemcpyDeviceToHost, stream));
  RETURN_IF_CUDA_ERROR(cudaStreamSynchronize(stream));
  std::vector<int64_t> offsets(n + 1, 0);
  for (int32_t i = 0; i < n; ++i) {
    offsets[i + 1] = offsets[i] + host[i];
    edges->multigraph_edges += host[n + i];
  }
  edges->edges = offsets[n];
  RETURN_IF_CUDA_ERROR(cudaMemcpyAsync(edges->row_offsets, offsets.data(),
                                       sizeof(int64_t) * (n + 1), cudaMemcpyHostToDevice, stream));
  RETURN_IF_CUDA_ERROR(cudaFreeAsync(counts, stream));

  // Pass 2: the keys.
  RETURN_IF_CUDA_ERROR(cudaMallocAsync(reinterpret_cast<void**>(&edges->keys),
                                       sizeof(int32_t) * std::max<int64_t>(1, edges->edges),
                                       stream));
  SampleRowsKernel<<<blocks, warps * 32, shared, stream>>>(tables, head_key, nullptr, nullptr,
                                                           edges->row_offsets, edges->keys);
  RETURN_IF_CUDA_ERROR(cudaGetLastError());
  return cudaStreamSynchronize(stream);
}

void FreeSbmDeviceEdges(SbmDeviceEdges* edges, cudaStream_t stream) {
  if (edges->row_offsets != nullptr) cudaFreeAsync(edges->row_offsets, stream);
  if (edges->keys != nullptr) cudaFreeAsync(edges->keys, stream);
  *edges = SbmDeviceEdges{};
}

}  // namespace docsparse
