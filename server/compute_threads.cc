#include "server/compute_threads.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"

namespace docsparse {
namespace {

// The ComputeThreads this thread is one of, if any.
thread_local ComputeThreads* current_compute_threads = nullptr;

}  // namespace

absl::StatusOr<ComputeLayout> LayOutCompute(int instances_flag, int threads_flag, bool gpu,
                                            int cores) {
  if (instances_flag < 0 || instances_flag > kMaxInstances) {
    return absl::InvalidArgumentError(absl::StrCat("--instances: ", instances_flag,
                                                   " is not 0 (1 on the CPU, 2 on a GPU) or a ",
                                                   "count from 1 to ", kMaxInstances));
  }
  ComputeLayout layout;
  layout.instances = instances_flag > 0 ? instances_flag : (gpu ? 2 : 1);
  const int threads = threads_flag > 0 ? threads_flag : std::max(1, cores);
  layout.threads_per_instance = std::max(1, threads / layout.instances);
  return layout;
}

ComputeThreads::ComputeThreads(int count, std::function<void()> setup) {
  for (int i = 0; i < std::max(1, count); ++i) {
    threads_.emplace_back([this, setup] {
      current_compute_threads = this;
      Loop(setup);
    });
  }
}

ComputeThreads::~ComputeThreads() {
  {
    MutexLock lock(&mu_);
    stopping_ = true;
  }
  for (std::thread& thread : threads_) thread.join();
}

void ComputeThreads::Run(const std::function<void()>& task) {
  if (current_compute_threads == this) {
    task();
    return;
  }
  Task queued{&task};
  MutexLock lock(&mu_);
  queue_.push_back(&queued);
  mu_.Await(absl::Condition(&queued.done));
}

void ComputeThreads::RunOnEach(const std::function<void()>& task) {
  // Each copy holds its thread until every copy has started, so no thread
  // can take two.
  Mutex started_mu;
  int started = 0;
  const int count = size();
  const std::function<void()> held = [&] {
    {
      MutexLock lock(&started_mu);
      ++started;
      const auto all = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(started_mu) { return started == count; };
      started_mu.Await(absl::Condition(&all));
    }
    task();
  };
  std::vector<Task> tasks(static_cast<size_t>(count), Task{&held});
  MutexLock lock(&mu_);
  for (Task& queued : tasks) queue_.push_back(&queued);
  const auto finished = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return std::all_of(tasks.begin(), tasks.end(), [](const Task& t) { return t.done; });
  };
  mu_.Await(absl::Condition(&finished));
}

void ComputeThreads::RunWaitingTasks() {
  if (current_compute_threads != nullptr) current_compute_threads->Drain();
}

void ComputeThreads::Drain() {
  while (true) {
    Task* task = nullptr;
    {
      MutexLock lock(&mu_);
      if (queue_.empty() || idle_ > 0) return;
      task = queue_.front();
      queue_.pop_front();
    }
    RunTask(task);
  }
}

void ComputeThreads::RunTask(Task* task) {
  (*task->work)();
  MutexLock lock(&mu_);
  task->done = true;
}

void ComputeThreads::Loop(const std::function<void()>& setup) {
  if (setup) setup();
  while (true) {
    Task* task = nullptr;
    {
      MutexLock lock(&mu_);
      const auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stopping_ || !queue_.empty();
      };
      // Idle until a task is taken in the same hold of the lock, so that a
      // long task's RunWaitingTasks never takes what this thread was woken
      // for.
      ++idle_;
      mu_.Await(absl::Condition(&ready));
      --idle_;
      if (queue_.empty()) return;  // stopping, nothing left
      task = queue_.front();
      queue_.pop_front();
    }
    RunTask(task);
  }
}

}  // namespace docsparse
