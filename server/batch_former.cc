#include "server/batch_former.h"

#include <algorithm>

namespace docsparse {
namespace {

bool SimilarLength(int64_t a, int64_t b, double max_ratio) {
  const double longer = static_cast<double>(std::max(a, b));
  const double shorter = static_cast<double>(std::max<int64_t>(1, std::min(a, b)));
  return longer / shorter <= max_ratio;
}

}  // namespace

BatchDecision FormBatch(const std::vector<PendingRequest>& queue, BatchClock::time_point now,
                        const BatchLimits& limits) {
  BatchDecision decision;
  std::vector<size_t> live;
  for (size_t i = 0; i < queue.size(); ++i) {
    if (DeadlineMet(queue[i].deadline, queue[i].cancelled, now)) {
      decision.drop_expired.push_back(i);
    } else if (queue[i].cancelled) {
      decision.drop_cancelled.push_back(i);
    } else {
      live.push_back(i);
    }
  }
  if (live.empty()) return decision;

  const PendingRequest& leader = queue[live.front()];
  decision.take.push_back(live.front());
  int64_t tokens = leader.tokens;
  double flops = leader.attention_flops;
  bool full = static_cast<int>(decision.take.size()) >= limits.max_batch_size;
  for (size_t n = 1; n < live.size() && !full; ++n) {
    const PendingRequest& candidate = queue[live[n]];
    if (!(candidate.key == leader.key)) continue;
    if (!SimilarLength(candidate.longest_sequence, leader.longest_sequence,
                       limits.max_length_ratio)) {
      continue;
    }
    if (tokens + candidate.tokens > limits.max_batch_tokens ||
        flops + candidate.attention_flops > limits.max_batch_attention_flops) {
      full = true;  // the next compatible request does not fit: run what we have
      break;
    }
    decision.take.push_back(live[n]);
    tokens += candidate.tokens;
    flops += candidate.attention_flops;
    full = static_cast<int>(decision.take.size()) >= limits.max_batch_size;
  }
  // A leader over the caps by itself is a full batch of one.
  full = full || tokens >= limits.max_batch_tokens || flops >= limits.max_batch_attention_flops;

  const BatchClock::duration waited = now - leader.enqueued;
  if (full || waited >= limits.max_queue_delay) return decision;
  decision.take.clear();
  decision.wait = limits.max_queue_delay - waited;
  return decision;
}

}  // namespace docsparse
