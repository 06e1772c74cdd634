// Runs a kernel's worker function on the calling thread's OpenMP team: the
// same libgomp threads LibTorch and oneDNN run every other operation on.
// Kernels used to start std::threads per call; beside LibTorch's workers,
// which spin for a while after each operation, those extra threads fought
// them for the cores. One pool for everything.
#ifndef DOCSPARSE_KERNELS_PARALLEL_WORKERS_H_
#define DOCSPARSE_KERNELS_PARALLEL_WORKERS_H_

namespace docsparse {

// Calls `worker()` once on each of `threads` threads (the caller is one of
// them) and returns when all have returned. Workers share their work through
// their own means (the kernels hand out items with an atomic counter). Inside
// another parallel region it runs on the calling thread alone.
template <typename Worker>
void RunParallelWorkers(int threads, Worker&& worker) {
  if (threads <= 1) {
    worker();
    return;
  }
#pragma omp parallel num_threads(threads)
  worker();
}

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_PARALLEL_WORKERS_H_
