// How both CPU edge executors (edge_attention, edge_attention_bf16) share
// their rows out: work items of kEdgeRowsPerBlock queries of one item·head,
// handed out by an atomic counter (rows differ in degree, so static ranges
// would leave threads idle). Each row is computed by one thread in a fixed
// order, so results do not depend on the thread count.
#ifndef DOCSPARSE_KERNELS_EDGE_ROW_BLOCKS_H_
#define DOCSPARSE_KERNELS_EDGE_ROW_BLOCKS_H_

#include <algorithm>
#include <atomic>
#include <cstdint>

#include "kernels/parallel_workers.h"

namespace docsparse {

// Queries per work item: small enough to balance rows of uneven degree over
// threads, large enough that the atomic counter is not contended.
inline constexpr int32_t kEdgeRowsPerBlock = 32;

// Runs, on up to `num_threads` workers, attend(batch_head, first, last) for
// every block of queries [first, last) of every item·head in
// [0, batch_heads); `make_worker()` is called once per worker and returns its
// `attend` (holding that worker's scratch).
template <typename MakeWorker>
void ForEachEdgeRowBlock(int64_t batch_heads, int32_t q_len, int num_threads,
                         MakeWorker make_worker) {
  const int64_t blocks_per_head = (q_len + kEdgeRowsPerBlock - 1) / kEdgeRowsPerBlock;
  const int64_t blocks = batch_heads * blocks_per_head;
  std::atomic<int64_t> next{0};
  const auto run = [&]() {
    auto attend = make_worker();
    for (int64_t block = next.fetch_add(1); block < blocks; block = next.fetch_add(1)) {
      const int32_t first = static_cast<int32_t>(block % blocks_per_head) * kEdgeRowsPerBlock;
      attend(block / blocks_per_head, first, std::min(first + kEdgeRowsPerBlock, q_len));
    }
  };
  RunParallelWorkers(static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(num_threads, blocks))),
                     run);
}

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_EDGE_ROW_BLOCKS_H_
