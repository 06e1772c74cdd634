// --device's parsing and the CPU side of model/attention/compute_device.h
// (the CUDA side runs on the GPU machine: tests/cuda_torch).
#include "model/attention/compute_device.h"

#include <gtest/gtest.h>

#include <string>

namespace docsparse {
namespace {

TEST(ComputeDeviceTest, CpuParsesAndHasNoDeviceMemory) {
  absl::StatusOr<at::Device> device = ParseComputeDevice("cpu");
  ASSERT_TRUE(device.ok()) << device.status();
  EXPECT_TRUE(device->is_cpu());
  EXPECT_EQ(DescribeDevice(*device), "cpu");
  EXPECT_FALSE(ReadDeviceMemory(*device).has_value());
  EXPECT_FALSE(ReadDeviceUtilization(*device).has_value());
  DeviceStreamScope nothing_to_do(*device);
  FinishQueuedDeviceWork(*device);  // nothing queued, nothing to wait for
}

TEST(ComputeDeviceTest, TheCpuHasNoDeviceTime) {
  DeviceStopwatch stopwatch(at::Device(at::kCPU));
  (void)at::ones({64, 64}).matmul(at::ones({64, 64}));
  EXPECT_FALSE(stopwatch.Stop().has_value());
}

TEST(ComputeDeviceTest, HostFloatCopyOnTheCpuConvertsOnlyWhatIsNotFp32) {
  const at::Tensor fp32 = at::randn({3, 5, 4});
  const at::Tensor view = fp32.narrow(1, 0, 3);
  const at::Tensor same = HostFloatCopy(view);
  EXPECT_TRUE(same.is_same(view));  // no copy: the planners read it in place
  const at::Tensor bf16 = fp32.to(at::kBFloat16);
  const at::Tensor converted = HostFloatCopy(bf16.narrow(1, 1, 3));
  EXPECT_EQ(converted.scalar_type(), at::kFloat);
  EXPECT_TRUE(converted.is_cpu());
  EXPECT_TRUE(at::equal(converted, bf16.narrow(1, 1, 3).to(at::kFloat)));
}

TEST(ComputeDeviceTest, WhatIsNotADeviceIsInvalidArgument) {
  for (const std::string text :
       {"", "gpu", "CPU", "cuda:", "cuda:x", "cuda:-1", "cuda:256", "cuda0", "cuda:0:1", "cudax"}) {
    absl::StatusOr<at::Device> device = ParseComputeDevice(text);
    ASSERT_FALSE(device.ok()) << text;
    EXPECT_EQ(device.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(device.status().message().find("\"cpu\", \"cuda\" or \"cuda:N\""), std::string::npos)
        << device.status();
  }
}

TEST(ComputeDeviceTest, CudaWithoutCudaIsAFailedPreconditionThatSaysWhy) {
  for (const std::string text : {"cuda", "cuda:0", "cuda:7"}) {
    absl::StatusOr<at::Device> device = ParseComputeDevice(text);
    if (device.ok()) {
      // A CUDA build on a machine with that GPU.
      EXPECT_TRUE(CudaBuild());
      EXPECT_TRUE(device->is_cuda());
      continue;
    }
    EXPECT_EQ(device.status().code(), absl::StatusCode::kFailedPrecondition) << text;
    const std::string why = CudaBuild() ? "CUDA device" : "scripts/build --cuda";
    EXPECT_NE(device.status().message().find(why), std::string::npos) << device.status();
  }
}

}  // namespace
}  // namespace docsparse
