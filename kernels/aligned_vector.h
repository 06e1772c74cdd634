// std::vector with storage aligned to a cache line (64 bytes).
//
// malloc aligns to 16 bytes only, so a buffer that tile or 64-byte vector
// loads read row by row would have every 64-byte row straddle two cache
// lines: the AMX attention's packed keys and values read that way cost it
// 10-28% (docs/BENCHMARKS.md, "CPU engine, thirteenth part").
#ifndef DOCSPARSE_KERNELS_ALIGNED_VECTOR_H_
#define DOCSPARSE_KERNELS_ALIGNED_VECTOR_H_

#include <cstddef>
#include <cstring>
#include <new>
#include <type_traits>
#include <utility>
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

// A CacheLineAllocator whose vector::resize leaves new elements
// default-initialised (for numbers: unwritten), for buffers the caller
// writes whole next. resize value-initialises otherwise, which at -O2 is a
// scalar store per element: 19 M two-byte stores, most of the 32 ms that
// assembling LSG's key segments took at 16,384 tokens and d = 64
// (key_segments.h), on one thread.
template <typename T>
struct UninitializedCacheLineAllocator : CacheLineAllocator<T> {
  UninitializedCacheLineAllocator() = default;
  template <typename U>
  UninitializedCacheLineAllocator(const UninitializedCacheLineAllocator<U>&) {}  // NOLINT

  template <typename U>
  void construct(U* p) noexcept(std::is_nothrow_default_constructible_v<U>) {
    ::new (static_cast<void*>(p)) U;
  }
  template <typename U, typename... Args>
  void construct(U* p, Args&&... args) {
    ::new (static_cast<void*>(p)) U(std::forward<Args>(args)...);
  }
};

template <typename T>
using UninitializedCacheLineVector = std::vector<T, UninitializedCacheLineAllocator<T>>;

// `v` resized to `n` elements, all zero bits (0 for integers, +0.0 for
// floats). vector::assign fills element by element, which at -O2 is a scalar
// store per float: 3.6% of the AVX512-BF16 LSG attention at 4,096 tokens
// went to zeroing its per-block accumulators that way; memset is vectorized.
template <typename T>
void AssignZeros(CacheLineVector<T>& v, size_t n) {
  static_assert(std::is_arithmetic_v<T>, "all-zero bits must mean zero");
  v.resize(n);
  if (n != 0) std::memset(v.data(), 0, n * sizeof(T));
}

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_ALIGNED_VECTOR_H_
