// std::vector with storage aligned to a cache line (64 bytes).
//
// malloc aligns to 16 bytes only, so a buffer that tile or 64-byte vector
// loads read row by row would have every 64-byte row straddle two cache
// lines: the AMX attention's packed keys and values read that way cost it
// 10-28% (docs/BENCHMARKS.md, "CPU engine, thirteenth part").
#ifndef DOCSPARSE_KERNELS_ALIGNED_VECTOR_H_
#define DOCSPARSE_KERNELS_ALIGNED_VECTOR_H_

#include <cstddef>
#include <new>
#include <vector>

namespace docsparse {

template <typename T>
struct CacheLineAllocator {
  static constexpr std::align_val_t kAlignment{64};
  using value_type = T;

  CacheLineAllocator() = default;
  template <typename U>
  CacheLineAllocator(const CacheLineAllocator<U>&) {}  // NOLINT: rebinding converts implicitly

  T* allocate(size_t n) { return static_cast<T*>(::operator new(n * sizeof(T), kAlignment)); }
  void deallocate(T* p, size_t) { ::operator delete(p, kAlignment); }

  template <typename U>
  bool operator==(const CacheLineAllocator<U>&) const {
    return true;
  }
};

template <typename T>
using CacheLineVector = std::vector<T, CacheLineAllocator<T>>;

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_ALIGNED_VECTOR_H_
