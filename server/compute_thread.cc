#include "server/compute_thread.h"

namespace docsparse {
namespace {

// The ComputeThread whose thread this is, if any.
thread_local ComputeThread* current_compute_thread = nullptr;

}  // namespace

ComputeThread::ComputeThread() {
  thread_ = std::thread([this] {
    current_compute_thread = this;
    Loop();
  });
}

ComputeThread::~ComputeThread() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  thread_.join();
}

void ComputeThread::Run(const std::function<void()>& task) {
  if (current_compute_thread == this) {
    task();
    return;
  }
  Task queued{&task};
  MutexLock lock(&mu_);
  queue_.push_back(&queued);
  mu_.Await(absl::Condition(&queued.done));
}

void ComputeThread::RunWaitingTasks() {
  if (current_compute_thread != nullptr) current_compute_thread->Drain();
}

void ComputeThread::Drain() {
  while (true) {
    Task* task = nullptr;
    {
      MutexLock lock(&mu_);
      if (queue_.empty()) return;
      task = queue_.front();
      queue_.pop_front();
    }
    (*task->work)();
    MutexLock lock(&mu_);
    task->done = true;
  }
}

void ComputeThread::Loop() {
  while (true) {
    {
      MutexLock lock(&mu_);
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty();
      };
      mu_.Await(absl::Condition(&ready));
      if (queue_.empty()) return;  // stopping, nothing left
    }
    Drain();
  }
}

}  // namespace docsparse
