// Where a model runs: the CPU, or one CUDA device (docsparse-server
// --device). The CUDA parts exist only in a build on a CUDA LibTorch
// (scripts/build --cuda, DOCSPARSE_CUDA_TORCH); elsewhere asking for a CUDA
// device is a clear error, not a crash at the first forward pass.
#ifndef DOCSPARSE_MODEL_ATTENTION_COMPUTE_DEVICE_H_
#define DOCSPARSE_MODEL_ATTENTION_COMPUTE_DEVICE_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"

namespace docsparse {

// "cpu", "cuda" (device 0) or "cuda:N". INVALID_ARGUMENT for anything else;
// FAILED_PRECONDITION when this build has no CUDA, or the machine no such
// device.
absl::StatusOr<at::Device> ParseComputeDevice(const std::string& text);

// "cpu", or "cuda:0 (NVIDIA H100 80GB HBM3, 132 SMs, 79.2 GiB)".
std::string DescribeDevice(at::Device device);

// Whether this build runs models on CUDA devices (a CUDA LibTorch and our
// CUDA kernels).
bool CudaBuild();

// Makes a stream of its own current on this thread for CUDA work on
// `device` for the scope's life (one stream per batch worker, so that two
// workers' batches overlap on the GPU); nothing on the CPU.
class DeviceStreamScope {
 public:
  explicit DeviceStreamScope(at::Device device);
  ~DeviceStreamScope();
  DeviceStreamScope(const DeviceStreamScope&) = delete;
  DeviceStreamScope& operator=(const DeviceStreamScope&) = delete;

 private:
  struct Guard;
  std::unique_ptr<Guard> guard_;
};

// Waits until the work this thread queued on its current stream of `device`
// has run; nothing on the CPU. A model loaded on one compute thread (its
// weights converted and packed by kernels on that thread's stream) is read
// by the others from their own streams: the loader calls this first.
void FinishQueuedDeviceWork(at::Device device);

// `x` in fp32 on the host: on the CPU x itself, converted if it is not fp32
// already; from a device, converted there and copied straight into
// page-locked memory (contiguous). LibTorch's blocking `x.to(kCPU, kFloat)`
// would copy x's own type into pageable memory through the driver's staging
// buffer and convert it on the host's cores (its Copy.cu: "For blocking
// transfers conversions are performed on CPU"): 12.6 MB of bf16 for a
// 16k-token document's hidden states, or for an SBM layer's queries. The
// caching host allocator keeps the buffers for reuse.
at::Tensor HostFloatCopy(const at::Tensor& x);

// A CUDA device's memory as LibTorch's caching allocator and the driver see
// it.
struct DeviceMemory {
  int64_t allocated_bytes = 0;  // held by live tensors
  int64_t reserved_bytes = 0;   // held by the caching allocator
  int64_t total_bytes = 0;      // the device's
};
// Unset on the CPU and in a build without CUDA.
std::optional<DeviceMemory> ReadDeviceMemory(at::Device device);

// The fraction of the driver's last sample period (1/6 s to 1 s) in which a
// kernel ran on `device`, from any process, as NVML reports it (the driver's
// libnvidia-ml, loaded at the first call: nothing to link, and a machine
// without it only loses this reading). Unset on the CPU, in a build without
// CUDA, or where NVML does not answer.
std::optional<double> ReadDeviceUtilization(at::Device device);

// How long a piece of work took on a CUDA device: CUDA events recorded on the
// thread's current stream at construction and at Stop. That is the stream's
// time from the first to the last of the work, gaps in which the device
// waited for the host included: for a host-bound batch it is close to the
// wall time, for a device-bound one it includes the device's queue that the
// host's clock would not see. Nothing on the CPU.
class DeviceStopwatch {
 public:
  explicit DeviceStopwatch(at::Device device);
  ~DeviceStopwatch();
  DeviceStopwatch(const DeviceStopwatch&) = delete;
  DeviceStopwatch& operator=(const DeviceStopwatch&) = delete;

  // Waits for the work queued on the stream so far and returns its seconds
  // since construction; unset on the CPU, if a CUDA call failed, or on a
  // second call.
  std::optional<double> Stop();

 private:
  struct Events;
  std::unique_ptr<Events> events_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_COMPUTE_DEVICE_H_
