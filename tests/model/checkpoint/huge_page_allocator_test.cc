// The CPU allocator that puts large tensors on transparent huge pages
// (huge_page_allocator.h): large blocks aligned to 2 MiB and backed by huge
// pages where the kernel offers them, small ones left to LibTorch, tensors
// made before it freed as before, the raw interface LibTorch may use, and a
// freed large block reused for the next tensor of about its size.
#include "model/checkpoint/huge_page_allocator.h"

#include <ATen/ATen.h>
#include <c10/core/CPUAllocator.h>
#include <gtest/gtest.h>
#include <sys/resource.h>

#include <cstdint>
#include <fstream>
#include <sstream>
#include <string>

namespace docsparse {
namespace {

// "madvise" or "always" in /sys/kernel/mm/transparent_hugepage/enabled.
bool KernelOffersHugePages() {
  std::ifstream enabled("/sys/kernel/mm/transparent_hugepage/enabled");
  std::stringstream text;
  text << enabled.rdbuf();
  return text.str().find("[madvise]") != std::string::npos ||
         text.str().find("[always]") != std::string::npos;
}

// This process's memory on huge pages, in kB (smaps_rollup's AnonHugePages).
int64_t AnonHugePagesKb() {
  std::ifstream rollup("/proc/self/smaps_rollup");
  std::string line;
  while (std::getline(rollup, line)) {
    if (line.rfind("AnonHugePages:", 0) == 0) return std::stoll(line.substr(14));
  }
  return -1;
}

// Page faults this process has taken that needed no disk (getrusage).
int64_t MinorFaults() {
  rusage usage{};
  getrusage(RUSAGE_SELF, &usage);
  return usage.ru_minflt;
}

uintptr_t Address(const at::Tensor& t) { return reinterpret_cast<uintptr_t>(t.data_ptr()); }

TEST(HugePageAllocatorTest, LargeTensorsAreAlignedAndOnHugePagesSmallOnesUnchanged) {
  const at::Tensor before = at::full({1 << 20}, 3.0f);  // 4 MiB, made by LibTorch's allocator
  UseHugePagesForLargeCpuTensors();
  UseHugePagesForLargeCpuTensors();  // idempotent

  const int64_t huge_before = AnonHugePagesKb();
  at::Tensor large = at::empty({16 << 20}, at::kFloat);  // 64 MiB
  EXPECT_EQ(Address(large) % kHugePageTensorBytes, 0u);
  large.fill_(1.0f);  // fault the pages in
  EXPECT_EQ(large.sum().item<double>(), 16.0 * (1 << 20));
  if (KernelOffersHugePages()) {
    // Compaction may leave a few 4 KiB pages; most of 64 MiB is huge.
    EXPECT_GE(AnonHugePagesKb() - huge_before, 32 * 1024)
        << "transparent huge pages are offered, yet the tensor did not get them";
  }

  const at::Tensor small = at::ones({100}, at::kFloat);
  EXPECT_EQ(Address(small) % 64, 0u);
  EXPECT_EQ(small.sum().item<float>(), 100.0f);
  // A tensor from before the switch is still read and freed as before.
  EXPECT_EQ(before.sum().item<double>(), 3.0 * (1 << 20));
}

TEST(HugePageAllocatorTest, RawInterfaceRoundTripsBothSizes) {
  UseHugePagesForLargeCpuTensors();
  c10::Allocator* allocator = c10::GetCPUAllocator();
  ASSERT_NE(allocator->raw_deleter(), nullptr);
  for (size_t bytes : {size_t{256}, kHugePageTensorBytes, 3 * kHugePageTensorBytes + 5}) {
    void* data = allocator->raw_allocate(bytes);
    ASSERT_NE(data, nullptr);
    static_cast<char*>(data)[bytes - 1] = 7;
    allocator->raw_deallocate(data);
  }
}

TEST(HugePageAllocatorTest, AFreedLargeBlockServesTheNextTensorOfAboutItsSize) {
  if (kKeptFreedBlockBytes == 0) GTEST_SKIP() << "no block is kept under AddressSanitizer";
  UseHugePagesForLargeCpuTensors();
  uintptr_t freed = 0;
  {
    at::Tensor first = at::full({3 << 20}, 2.0f);  // 12 MiB
    freed = Address(first);
  }
  // The same shape again gets the same block, whatever it held, its pages
  // still mapped: writing it faults nothing in.
  at::Tensor second = at::empty({3 << 20}, at::kFloat);
  EXPECT_EQ(Address(second), freed);
  const int64_t faults_before = MinorFaults();
  second.fill_(5.0f);
  EXPECT_EQ(MinorFaults() - faults_before, 0);
  EXPECT_EQ(second.sum().item<double>(), 5.0 * (3 << 20));
  // A tensor less than half its size does not take a block that large.
  second.reset();
  const at::Tensor small = at::empty({1 << 20}, at::kFloat);  // 4 MiB
  EXPECT_NE(Address(small), freed);
  EXPECT_EQ(Address(small) % kHugePageTensorBytes, 0u);
}

}  // namespace
}  // namespace docsparse
