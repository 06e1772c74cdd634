#include "model/checkpoint/huge_page_allocator.h"

#include <c10/core/Allocator.h>
#include <c10/core/CPUAllocator.h>
#include <c10/util/Exception.h>
#include <sys/mman.h>

#include <cstdlib>

namespace docsparse {
namespace {

class HugePageCpuAllocator final : public c10::Allocator {
 public:
  explicit HugePageCpuAllocator(c10::Allocator* fallback) : fallback_(fallback) {}

  c10::DataPtr allocate(size_t bytes) const override {
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
