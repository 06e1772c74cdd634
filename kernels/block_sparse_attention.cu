// CUDA block-sparse attention (kernels/block_sparse_attention_cuda.h).
//
// Work: one thread block per (item·head, query block, tile of queries).
// Tensor-core kernel (bf16/fp16, head_dim 32/64/128): the block's spans are
// staged in shared memory as prefix sums; every thread finds the keys of the
// rows it copies by binary search and copies them with cp.async into 64-key
// tiles, three tiles in flight; each warp keeps its 16 queries, scores and
// output accumulators in registers (FlashAttention-2's layout on mma.sync
// m16n8k16, B operands through ldmatrix) and updates their online softmax
// tile by tile. SIMT kernel (fp32, and shapes the tensor cores do not take):
// warp 0 walks the spans and writes each 32-key tile's indices to shared
// memory (-1 for an empty slot), all threads gather the rows as fp32, and
// each lane scores one key.
#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cmath>
#include <cstdint>

#include "kernels/block_sparse_attention_cuda.h"
#include "kernels/cuda_elements.cuh"

namespace docsparse {
namespace cuda {
namespace {

// Tensor-core kernel: 16 queries per warp, 64 keys per tile.
constexpr int kMmaKeys = 64;
// SIMT kernel: four warps, 8 queries per warp, one key per lane per tile.
constexpr int kWarps = 4;
constexpr int kThreads = kWarps * 32;
constexpr int kSimtRowsPerWarp = 8;
constexpr int kSimtRows = kSimtRowsPerWarp * kWarps;
constexpr int kSimtKeys = 32;
constexpr int kSimtMaxDimsPerLane = 4;  // head_dim <= 128

struct Shape {
  int32_t heads;
  int32_t q_len;
  int32_t k_len;
  int32_t head_dim;
  float scale;
};

struct Operands {
  const void* q;
  const void* k;
  const void* v;
  void* out;
  Strides q_strides, k_strides, v_strides, out_strides;
};

// Which queries and spans one thread block works on.
struct BlockWork {
  int32_t batch_head;
  int32_t first;  // queries [first, last)
  int32_t last;
  int32_t span_begin;  // spans [span_begin, span_end)
  int32_t span_end;
};

__device__ __forceinline__ bool LocateWork(const BlockSparsePlanView& plan, int32_t rows_per_tile,
                                           int32_t tiles_per_block, int32_t q_len,
                                           BlockWork* work) {
  const int64_t index = blockIdx.x;
  const int32_t tile = static_cast<int32_t>(index % tiles_per_block);
  const int64_t row = index / tiles_per_block;  // (batch_head, query block)
  const int32_t block = static_cast<int32_t>(row % plan.num_query_blocks);
  work->batch_head = static_cast<int32_t>(row / plan.num_query_blocks);
  const int32_t block_end = min(plan.query_block_starts[block + 1], q_len);
  work->first = plan.query_block_starts[block] + tile * rows_per_tile;
  work->last = min(block_end, work->first + rows_per_tile);
  work->span_begin = plan.span_offsets[row];
  work->span_end = plan.span_offsets[row + 1];
  return work->first < work->last;
}

// Where warp 0 stands in the block's spans between tiles.
struct SpanCursor {
  int32_t span;
  int32_t offset;
};

// Warp 0 writes the next (up to) kTileKeys key indices into `slots` (-1 for
// the rest, and for keys outside [0, k_len)) and their count into `*count`.
// The caller synchronises the block before and after.
template <int kTileKeys>
__device__ __forceinline__ void FillKeySlots(const KeySpan* spans, int32_t span_end, int32_t k_len,
                                             SpanCursor* cursor, int32_t* slots, int32_t* count) {
  const int lane = threadIdx.x % 32;
  int filled = 0;
  while (filled < kTileKeys && cursor->span < span_end) {
    const KeySpan span = spans[cursor->span];
    const int take = max(0, min(kTileKeys - filled, span.length - cursor->offset));
    for (int j = lane; j < take; j += 32) {
      const int32_t key = span.begin + cursor->offset + j;
      slots[filled + j] = key >= 0 && key < k_len ? key : -1;
    }
    filled += take;
    cursor->offset += take;
    if (cursor->offset >= span.length) {
      ++cursor->span;
      cursor->offset = 0;
    }
  }
  for (int j = filled + lane; j < kTileKeys; j += 32) slots[j] = -1;
  if (lane == 0) *count = filled;
}

// ---------------------------------------------------------------------------
// Tensor-core kernel (bf16 / fp16).

template <typename T>
__device__ __forceinline__ void Mma16816(float* c, const uint32_t* a, uint32_t b0, uint32_t b1);

template <>
__device__ __forceinline__ void Mma16816<__nv_bfloat16>(float* c, const uint32_t* a, uint32_t b0,
                                                        uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

template <>
__device__ __forceinline__ void Mma16816<__half>(float* c, const uint32_t* a, uint32_t b0,
                                                 uint32_t b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, "
      "{%8,%9}, {%0,%1,%2,%3};\n"
      : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
}

// Asynchronous 16-byte copy global -> shared (cp.async, sm_80+); `valid`
// false writes zeros and reads nothing.
__device__ __forceinline__ void CopyAsync16(void* shared, const void* global, bool valid) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(address), "l"(global),
               "r"(valid ? 16 : 0));
}
__device__ __forceinline__ void CommitCopies() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most one group of copies is still in flight.
__device__ __forceinline__ void WaitCopiesButOne() { asm volatile("cp.async.wait_group 1;\n" ::); }

// Four 8x8 matrices of 16-bit elements from shared memory (32-bit shared
// address), lane L giving the address of row L % 8 of matrix L / 8; .trans
// delivers them transposed.
__device__ __forceinline__ void LoadMatrices(unsigned address, uint32_t* r) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}
__device__ __forceinline__ void LoadMatricesTransposed(unsigned address, uint32_t* r) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(address));
}

// The spans of one query block, staged in shared memory (up to kMaxSpans at a
// time) as their first keys and the exclusive prefix sums of their lengths:
// key position p of the concatenated spans is span i = the last with
// prefix[i] <= p, key begin[i] + p - prefix[i]. Every thread finds the keys of
// the rows it copies by binary search, so no thread walks the spans serially.
constexpr int kMaxSpans = 128;

struct StagedSpans {
  int32_t begin[kMaxSpans];
  int32_t prefix[kMaxSpans + 1];  // prefix[count] = total keys
  int32_t count;
};

// Warp 0 stages spans [first, first + count) (count <= kMaxSpans); the caller
// synchronises the block before and after.
__device__ __forceinline__ void StageSpans(const KeySpan* spans, int32_t first, int32_t count,
                                           StagedSpans* staged) {
  const int lane = threadIdx.x % 32;
  int32_t running = 0;
  for (int base = 0; base < count; base += 32) {
    const int i = base + lane;
    const KeySpan span = i < count ? spans[first + i] : KeySpan{0, 0};
    const int32_t length = max(0, span.length);
    int32_t inclusive = length;
#pragma unroll
    for (int offset = 1; offset < 32; offset *= 2) {
      const int32_t before = __shfl_up_sync(0xffffffffu, inclusive, offset);
      if (lane >= offset) inclusive += before;
    }
    if (i < count) {
      staged->begin[i] = span.begin;
      staged->prefix[i] = running + inclusive - length;
    }
    running += __shfl_sync(0xffffffffu, inclusive, 31);
  }
  if (lane == 0) {
    staged->prefix[count] = running;
    staged->count = count;
  }
}

// The key at position `position` (< prefix[count]) of the staged spans, or -1
// when it lies outside [0, k_len).
__device__ __forceinline__ int32_t KeyAt(const StagedSpans& staged, int32_t position,
                                         int32_t k_len) {
  int lo = 0, hi = staged.count - 1;  // the answer is in [lo, hi]
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (staged.prefix[mid] <= position) {
      lo = mid;
    } else {
      hi = mid - 1;
    }
  }
  const int32_t key = staged.begin[lo] + position - staged.prefix[lo];
  return key >= 0 && key < k_len ? key : -1;
}

// Starts copying key positions [first, first + kMmaKeys) of the staged spans
// into shared [kMmaKeys][kD + 8] key and value tiles (zeros past the end).
template <typename T, int kD, int kThreadsPerBlock>
__device__ __forceinline__ void LoadKeyTile(const T* k, const T* v, int64_t k_row_stride,
                                            int64_t v_row_stride, const StagedSpans& staged,
                                            int32_t first, int32_t k_len, T* k_tile, T* v_tile) {
  constexpr int kVec = 16 / sizeof(T);
  constexpr int kChunksPerRow = kD / kVec;
  const int32_t total = staged.prefix[staged.count];
  for (int chunk = threadIdx.x; chunk < kMmaKeys * kChunksPerRow; chunk += kThreadsPerBlock) {
    const int r = chunk / kChunksPerRow;
    const int col = (chunk % kChunksPerRow) * kVec;
    const int32_t key = first + r < total ? KeyAt(staged, first + r, k_len) : -1;
    const bool valid = key >= 0;
    const int64_t row = valid ? key : 0;
    CopyAsync16(k_tile + r * (kD + 8) + col, k + row * k_row_stride + col, valid);
    CopyAsync16(v_tile + r * (kD + 8) + col, v + row * v_row_stride + col, valid);
  }
}

// 2^x with the hardware approximation (2 ulp; ex2(-inf) = 0): the
// half-precision kernel rounds probabilities to 8 or 11 bits anyway.
__device__ __forceinline__ float FastExp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;\n" : "=f"(y) : "f"(x));
  return y;
}

__device__ __forceinline__ uint32_t LoadPairGlobal(const void* p) {
  return *reinterpret_cast<const uint32_t*>(p);
}

// Shared memory of the tensor-core kernel: three (key, value) tile buffers,
// so that tiles t + 1 and t + 2 are in flight while tile t is computed and one
// barrier per tile suffices, and the staged spans.
constexpr int kMmaBuffers = 3;
template <int kD>
constexpr size_t MmaSharedBytes(int element_bytes) {
  return kMmaBuffers * 2 * size_t{kMmaKeys} * (kD + 8) * element_bytes + sizeof(StagedSpans);
}

// Registers capped so that 16 warps (head_dim <= 64) or 8 share a
// multiprocessor: one thread block alone cannot hide the copies' latency.
// (-DDOCSPARSE_MMA_WARPS_PER_SM=8 lifts the cap at 64, for measuring.)
#ifndef DOCSPARSE_MMA_WARPS_PER_SM
#define DOCSPARSE_MMA_WARPS_PER_SM 16
#endif
template <typename T, int kD, int kRowWarps>
__global__ void __launch_bounds__(kRowWarps * 32,
                                  (kD <= 64 ? DOCSPARSE_MMA_WARPS_PER_SM : 8) / kRowWarps)
    BlockSparseMmaKernel(Operands ops, Shape shape, BlockSparsePlanView plan,
                         int32_t tiles_per_block) {
  static_assert(kD % 32 == 0, "ldmatrix reads the head dimension 32 elements at a time");
  constexpr int kThreadsPerBlock = kRowWarps * 32;
  constexpr int kRows = 16 * kRowWarps;
  // Rows padded by 8 elements (16 bytes): ldmatrix's eight row addresses fall
  // in distinct banks.
  constexpr int kStride = kD + 8;
  constexpr int kTileElements = kMmaKeys * kStride;
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  T* tiles = reinterpret_cast<T*>(shared_bytes);  // [buffer][k, v][kMmaKeys][kStride]
  StagedSpans& staged = *reinterpret_cast<StagedSpans*>(tiles + 2 * kMmaBuffers * kTileElements);
  const auto k_tile = [&](int buffer) { return tiles + (2 * buffer) * kTileElements; };
  const auto v_tile = [&](int buffer) { return tiles + (2 * buffer + 1) * kTileElements; };

  BlockWork work;
  if (!LocateWork(plan, kRows, tiles_per_block, shape.q_len, &work)) return;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const int group = lane / 4;            // fragment row (and row + 8)
  const int thread_in_group = lane % 4;  // fragment column pair

  const T* q = static_cast<const T*>(ops.q) + ops.q_strides.Start(work.batch_head, shape.heads);
  const T* k = static_cast<const T*>(ops.k) + ops.k_strides.Start(work.batch_head, shape.heads);
  const T* v = static_cast<const T*>(ops.v) + ops.v_strides.Start(work.batch_head, shape.heads);
  T* out = static_cast<T*>(ops.out) + ops.out_strides.Start(work.batch_head, shape.heads);

  // This warp's 16 queries as A fragments, straight from global memory.
  uint32_t q_frag[kD / 16][4];
  {
    const int32_t row0 = work.first + warp * 16 + group;
    const bool has0 = row0 < work.last;
    const bool has1 = row0 + 8 < work.last;
    const T* rows = q + static_cast<int64_t>(row0) * ops.q_strides.row + thread_in_group * 2;
    const int64_t down = 8 * ops.q_strides.row;
#pragma unroll
    for (int kk = 0; kk < kD / 16; ++kk) {
      q_frag[kk][0] = has0 ? LoadPairGlobal(rows + kk * 16) : 0u;
      q_frag[kk][1] = has1 ? LoadPairGlobal(rows + down + kk * 16) : 0u;
      q_frag[kk][2] = has0 ? LoadPairGlobal(rows + kk * 16 + 8) : 0u;
      q_frag[kk][3] = has1 ? LoadPairGlobal(rows + down + kk * 16 + 8) : 0u;
    }
  }

  float acc[kD / 8][4];
#pragma unroll
  for (int dt = 0; dt < kD / 8; ++dt) acc[dt][0] = acc[dt][1] = acc[dt][2] = acc[dt][3] = 0.0f;
  // Running maximum (log2 units) and this lane's part of the denominator for
  // rows `group` and `group + 8`.
  float row_max[2] = {-INFINITY, -INFINITY};
  float row_sum[2] = {0.0f, 0.0f};
  const float scale_log2 = shape.scale * kLog2e;
  // ldmatrix row addresses (32-bit shared addresses, so that each load is a
  // base plus a constant): lane L reads row L % 8 of matrix L / 8.
  const int matrix = lane / 8;
  const int matrix_row = lane % 8;
  const unsigned tiles_address = static_cast<unsigned>(__cvta_generic_to_shared(tiles));
  const unsigned key_lane = (matrix_row * kStride + matrix * 8) * sizeof(T);
  const unsigned value_lane =
      (((matrix & 1) * 8 + matrix_row) * kStride + (matrix / 2) * 8) * sizeof(T);

  for (int32_t span_batch = work.span_begin; span_batch < work.span_end; span_batch += kMaxSpans) {
    __syncthreads();  // the previous batch's tiles are consumed
    if (warp == 0) {
      StageSpans(plan.spans, span_batch, min(kMaxSpans, work.span_end - span_batch), &staged);
    }
    __syncthreads();
    const int32_t total = staged.prefix[staged.count];
    const int32_t tiles = (total + kMmaKeys - 1) / kMmaKeys;
    // Tiles 0 and 1 in flight, one commit group each (empty ones too, so that
    // "all groups but the newest" is always tile t).
    for (int32_t t = 0; t < 2; ++t) {
      if (t < tiles) {
        LoadKeyTile<T, kD, kThreadsPerBlock>(k, v, ops.k_strides.row, ops.v_strides.row, staged,
                                             t * kMmaKeys, shape.k_len, k_tile(t), v_tile(t));
      }
      CommitCopies();
    }
    for (int32_t t = 0; t < tiles; ++t) {
      const int buffer = t % kMmaBuffers;
      WaitCopiesButOne();  // this thread's copies of tile t have landed
      // Everyone's have, and every warp is done with tile t - 1, whose buffer
      // tile t + 2 now takes.
      __syncthreads();
      if (t + 2 < tiles) {
        const int later = (t + 2) % kMmaBuffers;
        LoadKeyTile<T, kD, kThreadsPerBlock>(k, v, ops.k_strides.row, ops.v_strides.row, staged,
                                             (t + 2) * kMmaKeys, shape.k_len, k_tile(later),
                                             v_tile(later));
      }
      CommitCopies();
      const unsigned keys = tiles_address + (2 * buffer) * kTileElements * sizeof(T) + key_lane;
      const unsigned values =
          tiles_address + (2 * buffer + 1) * kTileElements * sizeof(T) + value_lane;

      // Scores of this warp's 16 queries against the tile's 64 keys.
      float score[kMmaKeys / 8][4];
#pragma unroll
      for (int nt = 0; nt < kMmaKeys / 8; ++nt) {
        score[nt][0] = score[nt][1] = score[nt][2] = score[nt][3] = 0.0f;
#pragma unroll
        for (int c = 0; c < kD / 32; ++c) {
          // b0, b1 of head-dim slices 2c and 2c + 1.
          uint32_t b[4];
          LoadMatrices(keys + (nt * 8 * kStride + c * 32) * sizeof(T), b);
          Mma16816<T>(score[nt], q_frag[2 * c], b[0], b[1]);
          Mma16816<T>(score[nt], q_frag[2 * c + 1], b[2], b[3]);
        }
      }
#pragma unroll
      for (int nt = 0; nt < kMmaKeys / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) score[nt][e] *= scale_log2;
      }
      // Positions past the spans' end (in the last tile only) score -inf.
      const int32_t valid_keys = total - t * kMmaKeys;
      if (valid_keys < kMmaKeys) {
#pragma unroll
        for (int nt = 0; nt < kMmaKeys / 8; ++nt) {
#pragma unroll
          for (int e = 0; e < 4; ++e) {
            if (nt * 8 + thread_in_group * 2 + (e & 1) >= valid_keys) score[nt][e] = -INFINITY;
          }
        }
      }
      float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
      for (int nt = 0; nt < kMmaKeys / 8; ++nt) {
#pragma unroll
        for (int e = 0; e < 4; ++e) tile_max[e / 2] = fmaxf(tile_max[e / 2], score[nt][e]);
      }
      float correction[2];
#pragma unroll
      for (int h = 0; h < 2; ++h) {
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 1));
        tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(0xffffffffu, tile_max[h], 2));
        const float new_max = fmaxf(row_max[h], tile_max[h]);
        // A row with no valid key yet keeps max -inf; exponents then use 0.
        const float base = new_max == -INFINITY ? 0.0f : new_max;
        correction[h] = FastExp2(row_max[h] - base);
        row_max[h] = new_max;
        row_sum[h] *= correction[h];
#pragma unroll
        for (int nt = 0; nt < kMmaKeys / 8; ++nt) {
          score[nt][2 * h] = FastExp2(score[nt][2 * h] - base);
          score[nt][2 * h + 1] = FastExp2(score[nt][2 * h + 1] - base);
          row_sum[h] += score[nt][2 * h] + score[nt][2 * h + 1];
        }
      }
#pragma unroll
      for (int dt = 0; dt < kD / 8; ++dt) {
        acc[dt][0] *= correction[0];
        acc[dt][1] *= correction[0];
        acc[dt][2] *= correction[1];
        acc[dt][3] *= correction[1];
      }
      // acc += P·V: two score n-tiles are one A fragment (FlashAttention-2).
#pragma unroll
      for (int j = 0; j < kMmaKeys / 16; ++j) {
        const uint32_t p_frag[4] = {PackPair<T>(score[2 * j][0], score[2 * j][1]),
                                    PackPair<T>(score[2 * j][2], score[2 * j][3]),
                                    PackPair<T>(score[2 * j + 1][0], score[2 * j + 1][1]),
                                    PackPair<T>(score[2 * j + 1][2], score[2 * j + 1][3])};
#pragma unroll
        for (int dt = 0; dt < kD / 8; dt += 2) {
          // b0, b1 of head-dim columns dt and dt + 1, transposed from [key][d].
          uint32_t b[4];
          LoadMatricesTransposed(values + (j * 16 * kStride + dt * 8) * sizeof(T), b);
          Mma16816<T>(acc[dt], p_frag, b[0], b[1]);
          Mma16816<T>(acc[dt + 1], p_frag, b[2], b[3]);
        }
      }
    }
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 1);
    row_sum[h] += __shfl_xor_sync(0xffffffffu, row_sum[h], 2);
    const int32_t query = work.first + warp * 16 + group + 8 * h;
    if (query >= work.last) continue;
    // A query whose spans hold no key gets zeros.
    const float inverse = row_sum[h] > 0.0f ? 1.0f / row_sum[h] : 0.0f;
    T* row = out + query * ops.out_strides.row + thread_in_group * 2;
#pragma unroll
    for (int dt = 0; dt < kD / 8; ++dt) {
      *reinterpret_cast<uint32_t*>(row + dt * 8) =
          PackPair<T>(acc[dt][2 * h] * inverse, acc[dt][2 * h + 1] * inverse);
    }
  }
}

// ---------------------------------------------------------------------------
// SIMT kernel (fp32 arithmetic, any element type, head_dim <= 128).

template <typename T>
__global__ void __launch_bounds__(kThreads)
    BlockSparseSimtKernel(Operands ops, Shape shape, BlockSparsePlanView plan,
                          int32_t tiles_per_block) {
  extern __shared__ float shared[];
  const int32_t d_len = shape.head_dim;
  float* q_tile = shared;                                                   // [kSimtRows][d]
  float* k_tile = q_tile + kSimtRows * d_len;                               // [kSimtKeys][d + 1]
  float* v_tile = k_tile + kSimtKeys * (d_len + 1);                         // [kSimtKeys][d]
  int32_t* slots = reinterpret_cast<int32_t*>(v_tile + kSimtKeys * d_len);  // [kSimtKeys]
  __shared__ int32_t slot_count;

  BlockWork work;
  if (!LocateWork(plan, kSimtRows, tiles_per_block, shape.q_len, &work)) return;
  const int warp = threadIdx.x / 32;
  const int lane = threadIdx.x % 32;
  const T* q = static_cast<const T*>(ops.q) + ops.q_strides.Start(work.batch_head, shape.heads);
  const T* k = static_cast<const T*>(ops.k) + ops.k_strides.Start(work.batch_head, shape.heads);
  const T* v = static_cast<const T*>(ops.v) + ops.v_strides.Start(work.batch_head, shape.heads);
  T* out = static_cast<T*>(ops.out) + ops.out_strides.Start(work.batch_head, shape.heads);

  const int32_t query_rows = work.last - work.first;
  for (int i = threadIdx.x; i < kSimtRows * d_len; i += kThreads) {
    const int r = i / d_len;
    q_tile[i] =
        r < query_rows ? ToFloat(q[(work.first + r) * ops.q_strides.row + i % d_len]) : 0.0f;
  }

  float acc[kSimtRowsPerWarp][kSimtMaxDimsPerLane];
  float row_max[kSimtRowsPerWarp];
  float row_sum[kSimtRowsPerWarp];
#pragma unroll
  for (int r = 0; r < kSimtRowsPerWarp; ++r) {
    row_max[r] = -INFINITY;
    row_sum[r] = 0.0f;
#pragma unroll
    for (int i = 0; i < kSimtMaxDimsPerLane; ++i) acc[r][i] = 0.0f;
  }

  SpanCursor cursor{work.span_begin, 0};
  for (;;) {
    __syncthreads();
    if (warp == 0) {
      FillKeySlots<kSimtKeys>(plan.spans, work.span_end, shape.k_len, &cursor, slots, &slot_count);
    }
    __syncthreads();
    if (slot_count == 0) break;
    for (int i = threadIdx.x; i < kSimtKeys * d_len; i += kThreads) {
      const int r = i / d_len;
      const int d = i % d_len;
      const int32_t key = slots[r];
      k_tile[r * (d_len + 1) + d] = key >= 0 ? ToFloat(k[key * ops.k_strides.row + d]) : 0.0f;
      v_tile[i] = key >= 0 ? ToFloat(v[key * ops.v_strides.row + d]) : 0.0f;
    }
    __syncthreads();

    const bool valid = slots[lane] >= 0;  // this lane's key
#pragma unroll
    for (int r = 0; r < kSimtRowsPerWarp; ++r) {
      const float* query = q_tile + (warp * kSimtRowsPerWarp + r) * d_len;
      const float* key = k_tile + lane * (d_len + 1);
      float dot = 0.0f;
      for (int d = 0; d < d_len; ++d) dot = fmaf(query[d], key[d], dot);
      const float score = valid ? dot * shape.scale : -INFINITY;
      float tile_max = score;
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) {
        tile_max = fmaxf(tile_max, __shfl_xor_sync(0xffffffffu, tile_max, offset));
      }
      const float new_max = fmaxf(row_max[r], tile_max);
      const float base = new_max == -INFINITY ? 0.0f : new_max;
      const float correction = expf(row_max[r] - base);
      row_max[r] = new_max;
      const float weight = valid ? expf(score - base) : 0.0f;
      float weight_sum = weight;
#pragma unroll
      for (int offset = 16; offset > 0; offset /= 2) {
        weight_sum += __shfl_xor_sync(0xffffffffu, weight_sum, offset);
      }
      row_sum[r] = row_sum[r] * correction + weight_sum;
#pragma unroll
      for (int i = 0; i < kSimtMaxDimsPerLane; ++i) acc[r][i] *= correction;
      for (int j = 0; j < kSimtKeys; ++j) {
        const float w = __shfl_sync(0xffffffffu, weight, j);
        const float* value = v_tile + j * d_len;
#pragma unroll
        for (int i = 0; i < kSimtMaxDimsPerLane; ++i) {
          const int d = lane + 32 * i;
          if (d < d_len) acc[r][i] = fmaf(w, value[d], acc[r][i]);
        }
      }
    }
  }

#pragma unroll
  for (int r = 0; r < kSimtRowsPerWarp; ++r) {
    const int32_t query = work.first + warp * kSimtRowsPerWarp + r;
    if (query >= work.last) continue;
    const float inverse = row_sum[r] > 0.0f ? 1.0f / row_sum[r] : 0.0f;
    T* row = out + query * ops.out_strides.row;
#pragma unroll
    for (int i = 0; i < kSimtMaxDimsPerLane; ++i) {
      const int d = lane + 32 * i;
      if (d < d_len) row[d] = FromFloat<T>(acc[r][i] * inverse);
    }
  }
}

template <typename T, int kD, int kRowWarps>
cudaError_t LaunchMmaWith(const Operands& ops, const Shape& shape, const BlockSparsePlanView& plan,
                          int64_t batch_heads, int32_t max_rows, cudaStream_t stream) {
  constexpr int kRows = 16 * kRowWarps;
  const int32_t tiles = (max_rows + kRows - 1) / kRows;
  const int64_t grid = batch_heads * plan.num_query_blocks * tiles;
  if (grid > 0x7fffffff) return cudaErrorInvalidValue;
  constexpr size_t shared_bytes = MmaSharedBytes<kD>(sizeof(T));
  const auto kernel = BlockSparseMmaKernel<T, kD, kRowWarps>;
  cudaError_t status = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                                            static_cast<int>(shared_bytes));
  if (status != cudaSuccess) return status;
  kernel<<<static_cast<unsigned>(grid), kRowWarps * 32, shared_bytes, stream>>>(ops, shape, plan,
                                                                                tiles);
  return cudaGetLastError();
}

// Eight warps (128 queries) per thread block where blocks are that long, so
// that each gathered key tile serves a whole LSG block; four otherwise.
template <typename T, int kD>
cudaError_t LaunchMma(const Operands& ops, const Shape& shape, const BlockSparsePlanView& plan,
                      int64_t batch_heads, int32_t max_rows, cudaStream_t stream) {
  if (max_rows > 64) {
    return LaunchMmaWith<T, kD, 8>(ops, shape, plan, batch_heads, max_rows, stream);
  }
  return LaunchMmaWith<T, kD, 4>(ops, shape, plan, batch_heads, max_rows, stream);
}

template <typename T>
cudaError_t LaunchSimt(const Operands& ops, const Shape& shape, const BlockSparsePlanView& plan,
                       int64_t batch_heads, int32_t max_rows, cudaStream_t stream) {
  const int32_t tiles = (max_rows + kSimtRows - 1) / kSimtRows;
  const int64_t grid = batch_heads * plan.num_query_blocks * tiles;
  if (grid > 0x7fffffff) return cudaErrorInvalidValue;
  const int d = shape.head_dim;
  const size_t shared_bytes =
      sizeof(float) * (kSimtRows * d + kSimtKeys * (d + 1) + kSimtKeys * d) +
      sizeof(int32_t) * kSimtKeys;
  cudaError_t status =
      cudaFuncSetAttribute(BlockSparseSimtKernel<T>, cudaFuncAttributeMaxDynamicSharedMemorySize,
                           static_cast<int>(shared_bytes));
  if (status != cudaSuccess) return status;
  BlockSparseSimtKernel<T>
      <<<static_cast<unsigned>(grid), kThreads, shared_bytes, stream>>>(ops, shape, plan, tiles);
  return cudaGetLastError();
}

template <typename T>
cudaError_t LaunchMmaForHeadDim(const Operands& ops, const Shape& shape,
                                const BlockSparsePlanView& plan, int64_t batch_heads,
                                int32_t max_rows, cudaStream_t stream) {
  switch (shape.head_dim) {
    case 32:
      return LaunchMma<T, 32>(ops, shape, plan, batch_heads, max_rows, stream);
    case 64:
      return LaunchMma<T, 64>(ops, shape, plan, batch_heads, max_rows, stream);
    default:
      return LaunchMma<T, 128>(ops, shape, plan, batch_heads, max_rows, stream);
  }
}

}  // namespace
}  // namespace cuda

cudaError_t BlockSparseAttentionCuda(const CudaAttentionParams& params,
                                     const BlockSparsePlanView& device_plan,
                                     int32_t max_query_block_rows, cudaStream_t stream) {
  using cuda::Operands;
  using cuda::Shape;
  if (params.head_dim < 1 || params.head_dim > 128 || params.batch < 0 || params.heads < 0 ||
      params.q_len < 0 || params.k_len < 0 || device_plan.num_query_blocks < 0) {
    return cudaErrorInvalidValue;
  }
  const int64_t batch_heads = int64_t{params.batch} * params.heads;
  if (batch_heads == 0 || device_plan.num_query_blocks == 0 || max_query_block_rows <= 0) {
    return cudaSuccess;
  }
  const int32_t d = params.head_dim;
  const Operands ops{params.q,
                     params.k,
                     params.v,
                     params.out,
                     cuda::ResolveStrides(params.q_layout, params.heads, params.q_len, d),
                     cuda::ResolveStrides(params.k_layout, params.heads, params.k_len, d),
                     cuda::ResolveStrides(params.v_layout, params.heads, params.k_len, d),
                     cuda::ResolveStrides(params.out_layout, params.heads, params.q_len, d)};
  const Shape shape{params.heads, params.q_len, params.k_len, d, params.scale};
  const int bytes = CudaElementBytes(params.element_type);
  const bool tensor_cores =
      params.path == CudaKernelPath::kAuto && params.element_type != CudaElementType::kFloat32 &&
      (d == 32 || d == 64 || d == 128) && cuda::RowsAligned16(ops.q, ops.q_strides, bytes) &&
      cuda::RowsAligned16(ops.k, ops.k_strides, bytes) &&
      cuda::RowsAligned16(ops.v, ops.v_strides, bytes) &&
      cuda::RowsAligned16(ops.out, ops.out_strides, bytes);
  switch (params.element_type) {
    case CudaElementType::kBFloat16:
      return tensor_cores ? cuda::LaunchMmaForHeadDim<__nv_bfloat16>(
                                ops, shape, device_plan, batch_heads, max_query_block_rows, stream)
                          : cuda::LaunchSimt<__nv_bfloat16>(ops, shape, device_plan, batch_heads,
                                                            max_query_block_rows, stream);
    case CudaElementType::kFloat16:
      return tensor_cores ? cuda::LaunchMmaForHeadDim<__half>(ops, shape, device_plan, batch_heads,
                                                              max_query_block_rows, stream)
                          : cuda::LaunchSimt<__half>(ops, shape, device_plan, batch_heads,
                                                     max_query_block_rows, stream);
    case CudaElementType::kFloat32:
      return cuda::LaunchSimt<float>(ops, shape, device_plan, batch_heads, max_query_block_rows,
                                     stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace docsparse
