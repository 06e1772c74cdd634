// What a GPU server reads of its device beyond memory: a batch's time on the
// stream (DeviceStopwatch) and the driver's utilisation (NVML), on a real
// device. Built only with a CUDA LibTorch (scripts/build --cuda).
#include <ATen/ATen.h>
#include <ATen/cuda/CUDAContext.h>
#include <dlfcn.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <chrono>

#include "model/attention/compute_device.h"

namespace docsparse {
namespace {

TEST(DeviceReadingsTest, StopwatchTimesTheStreamsWorkWithinTheHostsWallTime) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const at::Device device(at::kCUDA, 0);
  DeviceStreamScope stream(device);
  const at::Tensor a = at::randn({4096, 4096}, at::TensorOptions().device(device));
  (void)a.sum().item<float>();  // the allocation and the draw are done
  const auto started = std::chrono::steady_clock::now();
  DeviceStopwatch stopwatch(device);
  at::Tensor product = a;
  for (int i = 0; i < 20; ++i) product = product.matmul(a).tanh();  // ~2.7 TFLOP
  const std::optional<double> seconds = stopwatch.Stop();
  const double wall =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - started).count();
  ASSERT_TRUE(seconds.has_value());
  EXPECT_GT(*seconds, 0);
  EXPECT_LE(*seconds, wall);
  // Stop waited for the work: it is done without another synchronisation.
  EXPECT_TRUE(at::cuda::getCurrentCUDAStream().query());
  EXPECT_FALSE(stopwatch.Stop().has_value()) << "a second Stop";
}

// What a model's loader queued on its stream has run once it returns, so
// another instance's stream reads finished weights.
TEST(DeviceReadingsTest, FinishQueuedDeviceWorkWaitsForThisThreadsStream) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const at::Device device(at::kCUDA, 0);
  DeviceStreamScope stream(device);
  const at::Tensor a = at::randn({4096, 4096}, at::TensorOptions().device(device));
  at::Tensor product = a;
  for (int i = 0; i < 20; ++i) product = product.matmul(a).tanh();
  FinishQueuedDeviceWork(device);
  EXPECT_TRUE(at::cuda::getCurrentCUDAStream().query());
}

TEST(DeviceReadingsTest, UtilizationIsAFractionWhereTheDriverHasNvml) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const std::optional<double> utilization = ReadDeviceUtilization(at::Device(at::kCUDA, 0));
  void* nvml = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
  if (nvml == nullptr) {
    EXPECT_FALSE(utilization.has_value());
    GTEST_SKIP() << "the driver's libnvidia-ml.so.1 is not on this machine";
  }
  dlclose(nvml);
  ASSERT_TRUE(utilization.has_value());
  EXPECT_GE(*utilization, 0);
  EXPECT_LE(*utilization, 1);
}

}  // namespace
}  // namespace docsparse
