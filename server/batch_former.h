// The dynamic batcher's decision, separate from its thread (Triton style): a
// pure function of a queue snapshot and the time says which requests to run
// together now, which to drop, or how long to wait. The clock is a parameter,
// so tests drive it by hand.
#ifndef DOCSPARSE_SERVER_BATCH_FORMER_H_
#define DOCSPARSE_SERVER_BATCH_FORMER_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

namespace docsparse {

using BatchClock = std::chrono::steady_clock;

// Requests may share a forward pass only if all of these agree.
struct BatchKey {
  std::string model;
  std::string task;
  std::string attention;
  bool operator==(const BatchKey& other) const {
    return model == other.model && task == other.task && attention == other.attention;
  }
};

// What the former needs to know of one queued request.
struct PendingRequest {
  BatchKey key;
  BatchClock::time_point enqueued;
  BatchClock::time_point deadline = BatchClock::time_point::max();
  bool cancelled = false;
  // Priced cost from the cost model, before running: tokens of all its
  // sequences and their planned attention FLOPs.
  int64_t tokens = 0;
  double attention_flops = 0;
  // Its longest sequence, for grouping similar lengths.
  int64_t longest_sequence = 0;
};

// Whether a request that is `cancelled` (or not) has met its deadline at
// `now`. The deadline wins: gRPC also cancels a call whose deadline passed,
// and the deadline is what the client should hear and the metrics count.
// The server's copy of a deadline starts when the request arrives, later
// than the client's, so a client's own expiry cancels the call first; a
// cancellation within kDeadlineCancelSlack of the deadline is that expiry.
// (Seen as a flake under load: an abandoned request counted CANCELLED.)
inline constexpr BatchClock::duration kDeadlineCancelSlack = std::chrono::milliseconds(250);
inline bool DeadlineMet(BatchClock::time_point deadline, bool cancelled,
                        BatchClock::time_point now) {
  return now >= deadline || (cancelled && deadline - now <= kDeadlineCancelSlack);
}

struct BatchLimits {
  int max_batch_size = 16;  // requests per batch
  BatchClock::duration max_queue_delay = std::chrono::milliseconds(5);
  int64_t max_batch_tokens = 6144;  // ServingConfig's default (serving_config.h)
  double max_batch_attention_flops = 50e9;
  // Requests whose longest sequence is more than this factor longer or
  // shorter than the oldest request's wait for another batch.
  double max_length_ratio = 4.0;
};

struct BatchDecision {
  // Indices into the snapshot, oldest first. Empty `take` with no drops
  // means wait for `wait` (or for a new request).
  std::vector<size_t> take;
  std::vector<size_t> drop_expired;
  std::vector<size_t> drop_cancelled;
  BatchClock::duration wait = BatchClock::duration::zero();
};

// `queue` is in arrival order. The oldest live request always leads the
// batch (no starvation); compatible requests join in arrival order while the
// size and priced-cost caps hold, skipping ones of very different length. A
// request over the cost caps on its own still runs, alone. The batch runs
// now when it is full (size or cost) or its leader has waited
// max_queue_delay; otherwise the decision is to wait the rest of that delay.
BatchDecision FormBatch(const std::vector<PendingRequest>& queue, BatchClock::time_point now,
                        const BatchLimits& limits);

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_BATCH_FORMER_H_
