// CPU block-sparse attention executor: each block of queries attends to a
// short list of key spans, with an online (streaming) softmax over key tiles,
// so no query x key matrix is ever materialised: the largest temporary is one
// (query block x key tile) score tile per thread. Keys are read in place
// (spans over the extended key sequence), never copied per block.
// Dense attention is the plan with one span covering every real key.
// Kernels see raw pointers and POD parameters only (no torch types).
#ifndef DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_H_
#define DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <vector>

#include "kernels/block_sparse_plan.h"
#include "kernels/parallel_workers.h"

namespace docsparse {

// Which instruction set the executor uses; kAuto picks AVX-512 where the CPU
// has it and head_dim is a multiple of 16, else AVX2+FMA where it has that and
// head_dim is a multiple of 8, else the plain C++ path. kAvx2 and kPortable
// force a path (kAvx2 falls back to portable without AVX2); tests compare them.
enum class KernelIsa { kAuto, kAvx2, kPortable };

// Key segments of fp32 values (block_sparse_plan.h).
using Fp32KeySegment = KeySegmentOf<float>;

struct AttentionParams {
  const float* q;  // [batch, heads, q_len, head_dim], laid out as q_layout says
  const float* k;  // [batch, heads, k_len, head_dim]; ignored with key segments
  const float* v;  // [batch, heads, k_len, head_dim]; ignored with key segments
  float* out;      // [batch, heads, q_len, head_dim]
  int32_t batch;
  int32_t heads;
  int32_t q_len;
  int32_t k_len;
  int32_t head_dim;
  float scale;  // usually 1 / sqrt(head_dim)
  KernelIsa isa = KernelIsa::kAuto;
  RowLayout q_layout = {}, k_layout = {}, v_layout = {}, out_layout = {};  // default: contiguous
  // With segments (ascending, disjoint), keys come from them instead of k
  // and v: every key a span reaches must lie in one.
  const Fp32KeySegment* key_segments = nullptr;
  int32_t num_key_segments = 0;
};

// Hands the plan's work items, one per (item·head, query block), to up to
// `num_threads` workers on the caller's OpenMP team, which take runs of
// consecutive items from a shared counter. Each worker calls `make_worker()` once for its
// per-thread state (scratch, tile configuration), then calls the result as attend(batch_head,
// first_query, end_query, spans, slides, num_spans) for every non-empty block it takes (`slides`
// null when none of the plan's spans slide). An executor that does not take sliding spans passes
// `kTakesSlides` false: a block with sliding spans then reaches it one query
// at a time, each span made fixed. The executors differ only in `attend`.
template <bool kTakesSlides = true, typename MakeWorker>
void ForEachQueryBlock(const BlockSparsePlanView& plan, int64_t batch_heads, int num_threads,
                       MakeWorker make_worker) {
  const int64_t work_items = batch_heads * plan.num_query_blocks;
  const int64_t threads = std::max<int64_t>(1, std::min<int64_t>(num_threads, work_items));
  std::atomic<int64_t> next{0};
  // Runs of consecutive items, each half of what remains per thread (as
  // OpenMP's guided schedule): neighbouring blocks share keys, which an
  // executor that packs them (AMX, AVX512-BF16) then packs once per run, and the
  // shrinking runs still balance the threads at the end.
  const auto take_run = [&](int64_t* end) {
    int64_t begin = next.load(std::memory_order_relaxed);
    int64_t length = 1;
    do {
      length = std::max<int64_t>(1, (work_items - begin) / (2 * threads));
    } while (!next.compare_exchange_weak(begin, begin + length, std::memory_order_relaxed));
    *end = std::min(work_items, begin + length);
    return begin;
  };
  const auto run = [&]() {
    auto attend = make_worker();
    std::vector<KeySpan> row_spans;
    int64_t run_end = 0;
    for (int64_t item = take_run(&run_end); item < work_items;
         item = item + 1 < run_end ? item + 1 : take_run(&run_end)) {
      const int32_t block = static_cast<int32_t>(item % plan.num_query_blocks);
      const int32_t first = plan.query_block_starts[block];
      const int32_t last = plan.query_block_starts[block + 1];
      if (last <= first) continue;
      const int32_t begin = plan.span_offsets[item];
      const int32_t count = plan.span_offsets[item + 1] - begin;
      const KeySlide* slides = plan.slides != nullptr ? plan.slides + begin : nullptr;
      const int64_t batch_head = item / plan.num_query_blocks;
      if (kTakesSlides || slides == nullptr) {
        attend(batch_head, first, last, plan.spans + begin, slides, count);
        continue;
      }
      for (int32_t q = first; q < last; ++q) {
        row_spans.clear();
        for (int32_t s = 0; s < count; ++s) {
          int32_t lo = 0, hi = 0;
          SlidingRowKeys(plan.spans[begin + s], slides[s], q, &lo, &hi);
          if (hi > lo) row_spans.push_back(KeySpan{lo, hi - lo});
        }
        attend(batch_head, q, q + 1, row_spans.data(), static_cast<const KeySlide*>(nullptr),
               static_cast<int32_t>(row_spans.size()));
      }
    }
  };
  RunParallelWorkers(static_cast<int>(threads), run);
}

// Sets the scores of keys [tile_begin, tile_begin + tile_keys) that query
// first + r does not reach through `span`/`slide` to kMaskedScore, for rows
// r in [0, rows); `scores` rows lie `stride` floats apart. With a finite
// mask, a tile no key of which a row reaches only adds weights that the
// row's first real key rescales to zero (the plan guarantees one).
inline constexpr float kMaskedScore = -1e30f;
void MaskSlidingScores(float* scores, int64_t stride, int32_t rows, int32_t first,
                       int32_t tile_begin, int32_t tile_keys, KeySpan span, KeySlide slide);

// Computes softmax(q·kᵀ·scale) v over each query's spans. A query whose row
// has no span gets zeros. Splits (item, head, query block) work across
// `num_threads` threads. Span bounds must lie within [0, k_len).
void BlockSparseAttentionCpu(const AttentionParams& params, const BlockSparsePlanView& plan,
                             int num_threads);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_H_
