#include "model/checkpoint/huge_page_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <sys/mman.h>
#include <torch/version.h>

#include <cstdlib>

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
    void* data = nullptr;
    TORCH_CHECK(posix_memalign(&data, kHugePageTensorBytes, bytes) == 0,
                "out of CPU memory allocating ", bytes, " bytes");
    // Whole huge pages only: the block's tail may share a page with other
    // heap memory. A kernel without THP refuses; the block works as before.
    (void)madvise(data, bytes / kHugePageTensorBytes * kHugePageTensorBytes, MADV_HUGEPAGE);
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

 private:
  static void Free(void* data) { std::free(data); }

  c10::Allocator* fallback_;
};

}  // namespace

void UseHugePagesForLargeCpuTensors() {
  static HugePageCpuAllocator* const allocator = [] {
    auto* created = new HugePageCpuAllocator(c10::GetDefaultCPUAllocator());
    c10::SetCPUAllocator(created);
    return created;
  }();
  (void)allocator;
}

}  // namespace docsparse
