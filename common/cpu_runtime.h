// Process-wide settings that decide whether a CPU forward pass runs at the
// machine's speed, applied once at start-up by the server and the tools.
//
// Measured on the 2-core AMX machine (docs/BENCHMARKS.md, "CPU engine"):
// glibc's default returns every tensor above 128 KiB to the kernel on free,
// so each operation of a forward pass page-faults its output in again (a
// third of the time at 512 tokens); and OpenBLAS built on pthreads runs its
// own threads beside LibTorch's OpenMP ones, which then spin against each
// other on 2 cores (fp32 linear layers at 80 GFLOP/s instead of 320).
#ifndef DOCSPARSE_COMMON_CPU_RUNTIME_H_
#define DOCSPARSE_COMMON_CPU_RUNTIME_H_

#include <dlfcn.h>
#include <malloc.h>

#include <string>

namespace docsparse {

// Keeps freed memory in the process for reuse: blocks up to 32 MiB (glibc's
// largest mmap threshold) come from the heap, and the heap is not trimmed.
// One arena for every thread: a thread other than main gets an arena of
// 64 MiB heaps, and glibc unmaps such a heap whenever all of it is free,
// whatever the trim threshold, so a server computing on its own thread
// faulted its memory in afresh at every request (512 tokens: 29 ms with one
// arena against 42 ms). Call it before starting threads that allocate.
inline void KeepFreedMemoryForReuse() {
  mallopt(M_ARENA_MAX, 1);
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 1 << 30);
}

// Which BLAS LibTorch's fp32 products run on, for the start-up log:
// "OpenBLAS (openmp)" is the one to have; "OpenBLAS (pthreads)" oversubscribes
// the cores (scripts/setup selects the OpenMP build).
inline std::string BlasDescription() {
  using GetParallel = int (*)();
  const auto get_parallel =
      reinterpret_cast<GetParallel>(dlsym(RTLD_DEFAULT, "openblas_get_parallel"));
  if (get_parallel == nullptr) return "not OpenBLAS";
  switch (get_parallel()) {
    case 0:
      return "OpenBLAS (sequential)";
    case 1:
      return "OpenBLAS (pthreads: oversubscribes the cores beside LibTorch's OpenMP threads)";
    case 2:
      return "OpenBLAS (openmp)";
  }
  return "OpenBLAS";
}

}  // namespace docsparse

#endif  // DOCSPARSE_COMMON_CPU_RUNTIME_H_
