#include "server/process_memory.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>

#include "model/checkpoint/huge_page_allocator.h"
#include "server/metrics.h"
#include "tests/common/exposition.h"

namespace docsparse {
namespace {

constexpr int64_t kMiB = 1 << 20;

TEST(ProcessMemoryTest, HeapInUseFollowsAnAllocationAndFallsBackWhenItIsFreed) {
  const ProcessMemory before = ReadProcessMemory();
  EXPECT_GT(before.resident_bytes, 0);
  EXPECT_GT(before.heap_in_use_bytes, 0);
  constexpr size_t kBytes = 64 * kMiB;
  auto block = std::make_unique<char[]>(kBytes);
  std::memset(block.get(), 1, kBytes);  // resident, not only reserved
  const ProcessMemory holding = ReadProcessMemory();
  EXPECT_GE(holding.heap_in_use_bytes - before.heap_in_use_bytes, 60 * kMiB);
  EXPECT_GE(holding.resident_bytes - before.resident_bytes, 60 * kMiB);
  block.reset();
  const ProcessMemory after = ReadProcessMemory();
  EXPECT_LT(after.heap_in_use_bytes - before.heap_in_use_bytes, 4 * kMiB);
}

TEST(ProcessMemoryTest, TensorBlocksKeptForReuseCountAsFreed) {
  if (kKeptFreedBlockBytes == 0) GTEST_SKIP() << "no block is kept under AddressSanitizer";
  UseHugePagesForLargeCpuTensors();
  const ProcessMemory before = ReadProcessMemory();
  {
    const at::Tensor tensor = at::ones({16 * kMiB}, at::kFloat);  // 64 MiB
    EXPECT_EQ(tensor.sum().item<double>(), 16.0 * kMiB);
    const ProcessMemory holding = ReadProcessMemory();
    EXPECT_GE(holding.heap_in_use_bytes - before.heap_in_use_bytes, 60 * kMiB);
  }
  // Its block is kept by the CPU allocator, and counted as freed.
  EXPECT_GE(KeptFreedBlockBytesNow(), static_cast<size_t>(64 * kMiB));
  const ProcessMemory after = ReadProcessMemory();
  EXPECT_LT(after.heap_in_use_bytes - before.heap_in_use_bytes, 4 * kMiB);
  EXPECT_GE(after.heap_free_bytes, 64 * kMiB);
}

TEST(ProcessMemoryTest, MetricsShowIt) {
  Metrics metrics("test");
  const testing::Exposition exposition(metrics.Render());
  EXPECT_GT(exposition.Value("process_resident_memory_bytes"), 0);
  EXPECT_GT(exposition.Value("docsparse_heap_in_use_bytes"), 0);
  EXPECT_GE(exposition.Value("docsparse_heap_free_bytes"), 0);
}

}  // namespace
}  // namespace docsparse
