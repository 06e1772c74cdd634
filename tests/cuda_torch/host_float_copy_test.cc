// HostFloatCopy from a CUDA device (model/attention/compute_device.h): a
// strided bf16 view comes back as contiguous fp32 in page-locked memory,
// equal to the same conversion on the CPU. Built only with a CUDA LibTorch
// (scripts/build --cuda).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include "model/attention/compute_device.h"

namespace docsparse {
namespace {

TEST(HostFloatCopyTest, AStridedBf16ViewComesBackAsPinnedFp32) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const at::Tensor values = at::randn({2, 37, 24}).to(at::kBFloat16);
  const at::Tensor on_device = values.cuda().narrow(1, 1, 30);
  const at::Tensor copied = HostFloatCopy(on_device);
  EXPECT_TRUE(copied.is_cpu());
  EXPECT_TRUE(copied.is_pinned());
  EXPECT_TRUE(copied.is_contiguous());
  EXPECT_EQ(copied.scalar_type(), at::kFloat);
  EXPECT_TRUE(at::equal(copied, values.narrow(1, 1, 30).to(at::kFloat)));
}

}  // namespace
}  // namespace docsparse
