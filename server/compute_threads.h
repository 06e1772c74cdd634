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
// Two instances of one thread each compute two batches side by side without
// OpenMP's barriers: more documents a second under concurrent load than one
// instance of two threads (docs/BENCHMARKS.md). A lone request would then get
// one core of two; so on the CPU the first instance widens a batch it runs
// alone (no other instance computing, nothing else queued) to every thread,
// gives the borrowed cores back at its next layer once another batch waits,
// which the other instances run meanwhile, and takes them again at a later
// layer if it is alone again (a summary decoding for seconds). The first
// instance only: libgomp keeps a pool of workers per thread that starts
// parallel regions and, once its pools hold more threads than there are
// cores, stops spinning between regions; one wide instance keeps them within
// the cores.
// On a GPU an instance is a CUDA stream of its own: while one batch waits for
// the host (planning, launches, copies) another's kernels run.
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
// parallelising an operation over `threads_per_instance` OpenMP threads, and
// over `lone_batch_threads` for a batch the first instance runs alone.
struct ComputeLayout {
  int instances = 1;
  int threads_per_instance = 1;
  int lone_batch_threads = 1;
};
inline constexpr int kMaxInstances = 64;

// What docsparse-server's --instances, --threads and --widen_lone_batches
// come to on a machine with `cores` cores, models on a GPU or not:
// --instances 0 is 2 on a GPU, and on the CPU 2 when lone batches widen and
// there are two threads or more, else 1; --threads 0 (or less) is every core;
// the threads are divided among the instances, at least one each; a lone
// batch gets them all when widening (CPU only, more than one instance).
// INVALID_ARGUMENT naming --instances outside 0..kMaxInstances.
absl::StatusOr<ComputeLayout> LayOutCompute(int instances_flag, int threads_flag, bool gpu,
                                            int cores, bool widen_lone_batches);

// How a thread's share of the cores changes: before a task runs, and at a
// layer boundary of one, its thread calls `set_threads` with the threads the
// task gets from then on where that differs from its last (`lone` for a task
// the first thread runs alone, `shared` for any other). Off while `lone` <=
// `shared`.
struct LoneTaskWidening {
  int shared = 1;
  int lone = 1;
  std::function<void(int threads)> set_threads;
};

class ComputeThreads {
 public:
  // `count` (>= 1) threads; each runs `setup` (may be empty) once when it
  // starts, before any task: what a thread of its own needs (its OpenMP
  // thread count; with widening, each task sets it again; its CUDA stream).
  explicit ComputeThreads(int count = 1, std::function<void()> setup = nullptr,
                          LoneTaskWidening widening = {});
  ~ComputeThreads();  // runs what is queued, then joins
  ComputeThreads(const ComputeThreads&) = delete;
  ComputeThreads& operator=(const ComputeThreads&) = delete;

  int size() const { return static_cast<int>(threads_.size()); }

  // Runs `task` on the first free compute thread and returns once it has
  // finished (in place when called from one of these threads). With
  // widening, a task queued alone while no thread computes runs on the first
  // thread with the lone share, and no other task starts until it gives
  // the borrowed threads back (AtLayerBoundary) or ends.
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

  // Between two layers (or decode steps) of a task on the first compute
  // thread, with widening: a lone task gives its borrowed threads back once
  // another task waits (an idle thread takes that one), and a task that
  // finds itself alone again widens. Installed as the compute threads'
  // layer boundary (common/layer_boundary.h); RunWaitingTasks does it too.
  static void AtLayerBoundary();

 private:
  struct Task {
    const std::function<void()>* work;
    bool done = false;
  };
  void Loop(int index, const std::function<void()>& setup);
  // Whether thread `index` may take the queue's front task now: with
  // widening, none while a lone task runs, and a lone task (one queued,
  // nothing computing) is left to the first thread.
  bool MayTake(int index) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Inside a long task: pops and runs queued tasks until the queue is empty
  // or another compute thread waits for work it may take.
  void Drain();
  // AtLayerBoundary's work, on this ComputeThreads.
  void AdjustWidth();
  // Sets this thread's OpenMP threads to `threads` where they differ.
  void SetWidth(int threads);
  // Runs a popped task and marks it done.
  void RunTask(Task* task);

  Mutex mu_;
  std::deque<Task*> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  int idle_ ABSL_GUARDED_BY(mu_) = 0;               // threads waiting for a task
  int busy_ ABSL_GUARDED_BY(mu_) = 0;               // threads running a task
  bool first_busy_ ABSL_GUARDED_BY(mu_) = false;    // the first thread runs a task
  bool lone_running_ ABSL_GUARDED_BY(mu_) = false;  // ... alone, on borrowed threads
  const LoneTaskWidening widening_;
  const bool widens_;
  std::vector<std::thread> threads_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_COMPUTE_THREADS_H_
