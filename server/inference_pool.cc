#include "server/inference_pool.h"

#include <algorithm>

namespace docsparse {

InferencePool::InferencePool(int workers, size_t max_queue) : max_queue_(max_queue) {
  for (int i = 0; i < std::max(1, workers); ++i) {
    workers_.emplace_back([this] { WorkLoop(); });
  }
}

InferencePool::~InferencePool() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& worker : workers_) worker.join();
}

bool InferencePool::TrySubmit(std::function<void()> job) {
  absl::MutexLock lock(&mu_);
  if (stopping_ || queue_.size() >= max_queue_) return false;
  queue_.push_back(std::move(job));
  return true;
}

size_t InferencePool::queue_depth() const {
  absl::MutexLock lock(&mu_);
  return queue_.size();
}

void InferencePool::WorkLoop() {
  while (true) {
    std::function<void()> job;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](InferencePool* pool) ABSL_EXCLUSIVE_LOCKS_REQUIRED(pool->mu_) {
            return pool->stopping_ || !pool->queue_.empty();
          },
          this));
      if (queue_.empty()) return;  // stopping and drained
      job = std::move(queue_.front());
      queue_.pop_front();
    }
    job();
  }
}

}  // namespace docsparse
