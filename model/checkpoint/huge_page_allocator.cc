#include "model/checkpoint/huge_page_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <sys/mman.h>
#include <torch/version.h>

#include <cstdlib>
#include <optional>
#include <unordered_map>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/align_up.h"
#include "common/mutex.h"
#include "model/checkpoint/freed_block_cache.h"

// LibTorch 2.3 made Allocator::allocate non-const and added a pure
// copy_data. The project builds against Debian's LibTorch (1.13) and, with
// --cuda, PyPI's (2.11): this file takes both.
#if TORCH_VERSION_MAJOR > 2 || (TORCH_VERSION_MAJOR == 2 && TORCH_VERSION_MINOR >= 3)
#define DOCSPARSE_ALLOCATOR_2_3 1
#else
#define DOCSPARSE_ALLOCATOR_2_3 0
#endif

namespace docsparse {
namespace {

class HugePageCpuAllocator final : public c10::Allocator {
 public:
  explicit HugePageCpuAllocator(c10::Allocator* fallback) : fallback_(fallback) {}

#if DOCSPARSE_ALLOCATOR_2_3
  c10::DataPtr allocate(size_t bytes) override {
#else
  c10::DataPtr allocate(size_t bytes) const override {
#endif
    if (bytes < kHugePageTensorBytes) return fallback_->allocate(bytes);
    void* data = Allocate(static_cast<size_t>(
        AlignUp(static_cast<int64_t>(bytes), static_cast<int64_t>(kHugePageTensorBytes))));
    return {data, data, &Free, c10::Device(c10::DeviceType::CPU)};
  }

  // LibTorch's default CPU allocator frees with free() too, so blocks of
  // either size may come back through this one.
  c10::DeleterFnPtr raw_deleter() const override { return &Free; }

#if DOCSPARSE_ALLOCATOR_2_3
  void copy_data(void* dest, const void* src, std::size_t count) const override {
    default_copy_data(dest, src, count);
  }
#endif

  size_t kept_bytes() const {
    MutexLock lock(&mu_);
    return freed_.kept_bytes();
  }

  // The one instance, which Free (a plain function pointer, as LibTorch
  // wants) returns blocks to.
  static HugePageCpuAllocator* installed;

 private:
  // A block of `bytes` (whole huge pages): a kept one of about that size, or
  // a new one.
  void* Allocate(size_t bytes) const {
    {
      MutexLock lock(&mu_);
      if (const std::optional<FreedBlockCache::Block> kept = freed_.Take(bytes)) {
        live_.emplace(kept->data, kept->bytes);
        return kept->data;
      }
    }
    void* data = nullptr;
    TORCH_CHECK(posix_memalign(&data, kHugePageTensorBytes, bytes) == 0,
                "out of CPU memory allocating ", bytes, " bytes");
    // A kernel without THP refuses; the block works as before.
    (void)madvise(data, bytes, MADV_HUGEPAGE);
    MutexLock lock(&mu_);
    live_.emplace(data, bytes);
    return data;
  }

  // Keeps a block this allocator made for reuse; frees anything else (small
  // blocks come here through raw_deleter), and what the cache drops.
  void Release(void* data) const {
    std::vector<FreedBlockCache::Block> dropped;
    {
      MutexLock lock(&mu_);
      const auto live = live_.find(data);
      if (live != live_.end()) {
        dropped = freed_.Keep({data, live->second});
        live_.erase(live);
      } else {
        dropped.push_back({data, 0});
      }
    }
    for (const FreedBlockCache::Block& block : dropped) std::free(block.data);
  }

  static void Free(void* data) {
    if (data != nullptr) installed->Release(data);
  }

  c10::Allocator* fallback_;
  // allocate() is const before LibTorch 2.3.
  mutable Mutex mu_;
  mutable std::unordered_map<void*, size_t> live_ ABSL_GUARDED_BY(mu_);  // block -> bytes
  mutable FreedBlockCache freed_ ABSL_GUARDED_BY(mu_){kKeptFreedBlockBytes};
};

HugePageCpuAllocator* HugePageCpuAllocator::installed = nullptr;

}  // namespace

void UseHugePagesForLargeCpuTensors() {
  // Once: the allocator lives as long as the process (tensors made with it
  // may be freed at any time, exit included).
  static const bool once = [] {
    HugePageCpuAllocator::installed = new HugePageCpuAllocator(c10::GetDefaultCPUAllocator());
    c10::SetCPUAllocator(HugePageCpuAllocator::installed);
    return true;
  }();
  (void)once;
}

size_t KeptFreedBlockBytesNow() {
  const HugePageCpuAllocator* allocator = HugePageCpuAllocator::installed;
  return allocator == nullptr ? 0 : allocator->kept_bytes();
}

}  // namespace docsparse
