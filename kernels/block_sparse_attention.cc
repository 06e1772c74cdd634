#include "kernels/block_sparse_attention.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <limits>
#include <thread>
#include <vector>

namespace docsparse {
namespace {

// One query row against its spans, streaming: keeps the running maximum m,
// the running denominator l and the unnormalised output acc, rescaling both
// when the maximum grows (Milakov & Gimelshein's online softmax).
void AttendRow(const float* query, const float* keys, const float* values, const KeySpan* spans,
               int32_t num_spans, int32_t head_dim, float scale, float* acc, float* out) {
  float running_max = -std::numeric_limits<float>::infinity();
  float denominator = 0;
  std::fill(acc, acc + head_dim, 0.0f);
  for (int32_t s = 0; s < num_spans; ++s) {
    const int32_t end = spans[s].begin + spans[s].length;
    for (int32_t key = spans[s].begin; key < end; ++key) {
      const float* k = keys + static_cast<int64_t>(key) * head_dim;
      float score = 0;
      for (int32_t d = 0; d < head_dim; ++d) score += query[d] * k[d];
      score *= scale;
      if (score > running_max) {
        const float correction = std::exp(running_max - score);
        denominator *= correction;
        for (int32_t d = 0; d < head_dim; ++d) acc[d] *= correction;
        running_max = score;
      }
      const float weight = std::exp(score - running_max);
      denominator += weight;
      const float* v = values + static_cast<int64_t>(key) * head_dim;
      for (int32_t d = 0; d < head_dim; ++d) acc[d] += weight * v[d];
    }
  }
  const float inverse = denominator > 0 ? 1.0f / denominator : 0.0f;
  for (int32_t d = 0; d < head_dim; ++d) out[d] = acc[d] * inverse;
}

}  // namespace

void BlockSparseAttentionCpu(const AttentionParams& p, const BlockSparsePlanView& plan,
                             int num_threads) {
  const int64_t work_items = static_cast<int64_t>(p.batch) * p.heads * plan.num_query_blocks;
  std::atomic<int64_t> next{0};
  auto worker = [&]() {
    std::vector<float> acc(p.head_dim);
    for (int64_t item = next.fetch_add(1); item < work_items; item = next.fetch_add(1)) {
      const int32_t block = static_cast<int32_t>(item % plan.num_query_blocks);
      const int64_t batch_head = item / plan.num_query_blocks;
      const int32_t b = static_cast<int32_t>(batch_head / p.heads);
      const int64_t plan_row = static_cast<int64_t>(b) * plan.num_query_blocks + block;
      const KeySpan* spans = plan.spans + plan.span_offsets[plan_row];
      const int32_t num_spans = plan.span_offsets[plan_row + 1] - plan.span_offsets[plan_row];
      const float* keys = p.k + batch_head * p.k_len * p.head_dim;
      const float* values = p.v + batch_head * p.k_len * p.head_dim;
      const int32_t first = block * plan.block_size;
      const int32_t last = std::min(first + plan.block_size, p.q_len);
      for (int32_t row = first; row < last; ++row) {
        const int64_t offset = (batch_head * p.q_len + row) * p.head_dim;
        AttendRow(p.q + offset, keys, values, spans, num_spans, p.head_dim, p.scale, acc.data(),
                  p.out + offset);
      }
    }
  };
  const int threads =
      static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(num_threads, work_items)));
  std::vector<std::thread> pool;
  pool.reserve(threads - 1);
  for (int t = 1; t < threads; ++t) pool.emplace_back(worker);
  worker();
  for (std::thread& thread : pool) thread.join();
}

}  // namespace docsparse
