// The one thread on which the server runs all model computation: loading,
// warm-up and every batch of every model.
//
// Why one: LibTorch and oneDNN parallelise each operation with OpenMP, and
// libgomp gives every thread that starts a parallel region a team of its own.
// While it manages more threads than there are CPUs, libgomp stops spinning
// between parallel regions and puts its workers to sleep after each one, so
// every operation of a forward pass pays a wake-up. With a batcher thread per
// model (and the loader) that was the server's normal state: a 512-token
// MiniLM forward took 30-48 ms in the server against 22 ms on a single
// thread. Through this thread the process keeps a single team. On a CPU
// server two models computing at once would only share the same cores.
//
// A long task (an abstractive summary decodes for seconds) calls
// RunWaitingTasks() between steps, so that batches of other models queued
// meanwhile run then instead of waiting for it to end.
#ifndef DOCSPARSE_SERVER_COMPUTE_THREAD_H_
#define DOCSPARSE_SERVER_COMPUTE_THREAD_H_

#include <deque>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"

namespace docsparse {

class ComputeThread {
 public:
  ComputeThread();
  ~ComputeThread();  // runs what is queued, then joins
  ComputeThread(const ComputeThread&) = delete;
  ComputeThread& operator=(const ComputeThread&) = delete;

  // Runs `task` on the compute thread and returns once it has finished (in
  // place when called from the compute thread itself).
  void Run(const std::function<void()>& task);

  // On a compute thread, inside a long task: runs the tasks queued since,
  // then returns. Does nothing on any other thread, so model code may call
  // it whoever runs it (tests run batches on their own threads).
  static void RunWaitingTasks();

 private:
  struct Task {
    const std::function<void()>* work;
    bool done = false;
  };
  void Loop();
  // Pops and runs queued tasks until the queue is empty (or, for the loop,
  // until stopping).
  void Drain();

  Mutex mu_;
  std::deque<Task*> queue_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_COMPUTE_THREAD_H_
