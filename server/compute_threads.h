// The threads on which the server runs all model computation: loading,
// warm-up and every batch of every model. Each is one model instance: a
// batch runs on one of them, and as many batches run at once as there are
// threads (docsparse-server --instances).
//
// Why so few: LibTorch and oneDNN parallelise each operation with OpenMP, and
// libgomp gives every thread that starts a parallel region a team of its own.
// While it manages more threads than there are CPUs, libgomp stops spinning
// between parallel regions and puts its workers to sleep after each one, so
// every operation of a forward pass pays a wake-up. With a batcher thread per
// model (and the loader) that was the server's normal state: a 512-token
// MiniLM forward took 30-48 ms in the server against 22 ms on a single
// thread. Through these threads the process keeps one team per instance, and
// on the CPU the server divides --threads among them, so that the teams
// together never outnumber the cores.
//
// One instance (the CPU's default) gives a lone request every core. Two
// instances of one thread each compute two batches side by side without
// OpenMP's barriers: more documents a second under concurrent load, each
// request slower (docs/BENCHMARKS.md). On a GPU an instance is a CUDA stream
// of its own: while one batch waits for the host (planning, launches, copies)
// another's kernels run.
//
// A long task (an abstractive summary decodes for seconds) calls
// RunWaitingTasks() between steps, so that batches queued meanwhile run then
// instead of waiting for it to end, unless another compute thread is free to
// take them.
#ifndef DOCSPARSE_SERVER_COMPUTE_THREADS_H_
#define DOCSPARSE_SERVER_COMPUTE_THREADS_H_

#include <deque>
#include <functional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "common/mutex.h"

namespace docsparse {

// How the server's compute is laid out: `instances` compute threads, each
// parallelising an operation over `threads_per_instance` OpenMP threads.
struct ComputeLayout {
  int instances = 1;
  int threads_per_instance = 1;
};
inline constexpr int kMaxInstances = 64;

// What docsparse-server's --instances and --threads come to on a machine
// with `cores` cores, models on a GPU or not: --instances 0 is 1 on the CPU
// and 2 on a GPU; --threads 0 (or less) is every core; the threads are
// divided among the instances, at least one each. INVALID_ARGUMENT naming
// --instances outside 0..kMaxInstances.
absl::StatusOr<ComputeLayout> LayOutCompute(int instances_flag, int threads_flag, bool gpu,
                                            int cores);

class ComputeThreads {
 public:
  // `count` (>= 1) threads; each runs `setup` (may be empty) once when it
  // starts, before any task: what a thread of its own needs (its OpenMP
  // thread count, its CUDA stream).
  explicit ComputeThreads(int count = 1, std::function<void()> setup = nullptr);
  ~ComputeThreads();  // runs what is queued, then joins
  ComputeThreads(const ComputeThreads&) = delete;
  ComputeThreads& operator=(const ComputeThreads&) = delete;

  int size() const { return static_cast<int>(threads_.size()); }

  // Runs `task` on the first free compute thread and returns once it has
  // finished (in place when called from one of these threads).
  void Run(const std::function<void()>& task);

  // Runs `task` once on every compute thread (at once) and returns when all
  // have finished: per-instance warm-up. Call it from another thread, while
  // no long task holds a compute thread.
  void RunOnEach(const std::function<void()>& task);

  // On a compute thread, inside a long task: runs the tasks queued since,
  // while no other compute thread is idle (an idle one takes them), then
  // returns. Does nothing on any other thread, so model code may call it
  // whoever runs it (tests run batches on their own threads).
  static void RunWaitingTasks();

 private:
  struct Task {
    const std::function<void()>* work;
    bool done = false;
  };
  void Loop(const std::function<void()>& setup);
  // Inside a long task: pops and runs queued tasks until the queue is empty
  // or another compute thread waits for work.
  void Drain();
  // Runs a popped task and marks it done.
  void RunTask(Task* task);

  Mutex mu_;
  std::deque<Task*> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int idle_ ABSL_GUARDED_BY(mu_) = 0;  // threads waiting for a task
  std::vector<std::thread> threads_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_COMPUTE_THREADS_H_
