#include "server/compute_threads.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/layer_boundary.h"

namespace docsparse {
namespace {

// The ComputeThreads this thread is one of, if any.
thread_local ComputeThreads* current_compute_threads = nullptr;
// Which of its ComputeThreads this thread is, and the threads its tasks run
// on now (with widening; 0 until its first task sets them).
thread_local int current_index = -1;
thread_local int current_width = 0;

}  // namespace

absl::StatusOr<ComputeLayout> LayOutCompute(int instances_flag, int threads_flag, bool gpu,
                                            int cores, bool widen_lone_batches) {
  if (instances_flag < 0 || instances_flag > kMaxInstances) {
    return absl::InvalidArgumentError(
        absl::StrCat("--instances: ", instances_flag,
                     " is not 0 (2 on a GPU or a CPU of two cores or more, else 1) or a ",
                     "count from 1 to ", kMaxInstances));
  }
  const int threads = threads_flag > 0 ? threads_flag : std::max(1, cores);
  ComputeLayout layout;
  if (instances_flag > 0) {
    layout.instances = instances_flag;
  } else {
    layout.instances = gpu || (widen_lone_batches && threads >= 2) ? 2 : 1;
  }
  layout.threads_per_instance = std::max(1, threads / layout.instances);
  const bool widens = widen_lone_batches && !gpu && layout.instances > 1;
  layout.lone_batch_threads =
      widens ? std::max(threads, layout.threads_per_instance) : layout.threads_per_instance;
  return layout;
}

ComputeThreads::ComputeThreads(int count, std::function<void()> setup, LoneTaskWidening widening)
    : widening_(std::move(widening)),
      widens_(widening_.lone > widening_.shared && widening_.set_threads != nullptr) {
  for (int i = 0; i < std::max(1, count); ++i) {
    threads_.emplace_back([this, i, setup] {
      current_compute_threads = this;
      Loop(i, setup);
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

void ComputeThreads::AtLayerBoundary() {
  if (current_compute_threads != nullptr) current_compute_threads->AdjustWidth();
}

void ComputeThreads::AdjustWidth() {
  if (!widens_ || current_index != 0) return;
  bool lone = false;
  {
    MutexLock lock(&mu_);
    if (lone_running_) {
      if (queue_.empty()) return;
      lone_running_ = false;  // an idle thread may take the queue's front now
    } else {
      if (busy_ != 1 || !queue_.empty()) return;  // another computes, or waits
      lone_running_ = lone = true;
    }
  }
  SetWidth(lone ? widening_.lone : widening_.shared);
}

void ComputeThreads::SetWidth(int threads) {
  if (threads == current_width) return;
  widening_.set_threads(threads);
  current_width = threads;
}

bool ComputeThreads::MayTake(int index) const {
  if (!widens_) return true;
  if (lone_running_) return false;
  return index == 0 || first_busy_ || queue_.size() >= 2;
}

void ComputeThreads::Drain() {
  AdjustWidth();
  while (true) {
    Task* task = nullptr;
    {
      MutexLock lock(&mu_);
      // An idle thread takes what is queued, unless this task still holds
      // every core (queued after AdjustWidth looked): then it runs them
      // itself, at its width.
      if (queue_.empty() || (idle_ > 0 && !lone_running_)) return;
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

void ComputeThreads::Loop(int index, const std::function<void()>& setup) {
  if (setup) setup();
  current_index = index;
  if (widens_) layer_boundary_hook = &ComputeThreads::AtLayerBoundary;
  while (true) {
    Task* task = nullptr;
    bool lone = false;
    {
      MutexLock lock(&mu_);
      const auto ready = [this, index]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return queue_.empty() ? stopping_ : MayTake(index);
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
      lone = widens_ && index == 0 && busy_ == 0 && queue_.empty();
      ++busy_;
      if (index == 0) {
        first_busy_ = true;
        lone_running_ = lone;
      }
    }
    if (widens_) SetWidth(lone ? widening_.lone : widening_.shared);
    (*task->work)();
    MutexLock lock(&mu_);
    --busy_;
    if (index == 0) {
      first_busy_ = false;
      lone_running_ = false;  // whether it started alone or widened since
    }
    task->done = true;
  }
}

}  // namespace docsparse
