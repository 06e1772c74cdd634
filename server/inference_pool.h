// A bounded FIFO of inference jobs run by a fixed set of worker threads, so
// model work never runs on gRPC's callback threads. A full queue refuses new
// work at once (backpressure) instead of growing without bound.
#ifndef DOCSPARSE_SERVER_INFERENCE_POOL_H_
#define DOCSPARSE_SERVER_INFERENCE_POOL_H_

#include <cstddef>
#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace docsparse {

class InferencePool {
 public:
  InferencePool(int workers, size_t max_queue);
  // Runs every job already accepted, then joins the workers.
  ~InferencePool();

  // Queues `job`; false (and `job` is dropped) when the queue is full or the
  // pool is shutting down.
  bool TrySubmit(std::function<void()> job) ABSL_LOCKS_EXCLUDED(mu_);

  size_t queue_depth() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void WorkLoop() ABSL_LOCKS_EXCLUDED(mu_);

  const size_t max_queue_;
  mutable absl::Mutex mu_;
  std::deque<std::function<void()>> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<std::thread> workers_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_INFERENCE_POOL_H_
