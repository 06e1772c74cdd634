#include "model/attention/compute_device.h"

#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

#if defined(DOCSPARSE_CUDA_TORCH)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDACachingAllocator.h>
#include <c10/cuda/CUDAFunctions.h>
#include <c10/cuda/CUDAGuard.h>
#include <cuda_runtime_api.h>
#endif

namespace docsparse {

bool CudaBuild() {
#if defined(DOCSPARSE_CUDA_TORCH)
  return true;
#else
  return false;
#endif
}

absl::StatusOr<at::Device> ParseComputeDevice(const std::string& text) {
  if (text == "cpu") return at::Device(at::kCPU);
  // "cuda", or "cuda:N" with N in [0, 255].
  int index = 0;
  const bool names_cuda =
      absl::StartsWith(text, "cuda") &&
      (text.size() == 4 ||
       (text[4] == ':' && absl::SimpleAtoi(text.substr(5), &index) && index >= 0 && index <= 255));
  if (!names_cuda) {
    return absl::InvalidArgumentError(
        absl::StrCat("\"", text, "\" is not a device: \"cpu\", \"cuda\" or \"cuda:N\""));
  }
  if (!CudaBuild()) {
    return absl::FailedPreconditionError(
        absl::StrCat("\"", text,
                     "\": this build runs on the CPU only (build on a CUDA LibTorch: "
                     "scripts/build --cuda)"));
  }
#if defined(DOCSPARSE_CUDA_TORCH)
  const int count = static_cast<int>(c10::cuda::device_count());
  if (index >= count) {
    return absl::FailedPreconditionError(absl::StrCat(
        "\"", text, "\": this machine has ", count, " CUDA device", count == 1 ? "" : "s",
        count == 0 ? " (is the driver loaded, CUDA_VISIBLE_DEVICES set?)" : ""));
  }
#endif
  return at::Device(at::kCUDA, static_cast<c10::DeviceIndex>(index));
}

std::string DescribeDevice(at::Device device) {
#if defined(DOCSPARSE_CUDA_TORCH)
  if (device.is_cuda()) {
    const cudaDeviceProp* properties = at::cuda::getDeviceProperties(device.index());
    return absl::StrCat(device.str(), " (", properties->name, ", ", properties->multiProcessorCount,
                        " SMs, ", absl::SixDigits(properties->totalGlobalMem / double{1 << 30}),
                        " GiB)");
  }
#endif
  return device.str();
}

#if defined(DOCSPARSE_CUDA_TORCH)
struct DeviceStreamScope::Guard {
  explicit Guard(at::Device device)
      : stream(at::cuda::getStreamFromPool(/*isHighPriority=*/false, device.index())),
        guard(stream) {}
  at::cuda::CUDAStream stream;
  c10::cuda::CUDAStreamGuard guard;
};
#else
struct DeviceStreamScope::Guard {};
#endif

DeviceStreamScope::DeviceStreamScope(at::Device device) {
#if defined(DOCSPARSE_CUDA_TORCH)
  if (device.is_cuda()) guard_ = std::make_unique<Guard>(device);
#else
  (void)device;
#endif
}

DeviceStreamScope::~DeviceStreamScope() = default;

std::optional<DeviceMemory> ReadDeviceMemory(at::Device device) {
#if defined(DOCSPARSE_CUDA_TORCH)
  if (!device.is_cuda()) return std::nullopt;
  const auto stats = c10::cuda::CUDACachingAllocator::getDeviceStats(device.index());
  constexpr size_t kAllPools = static_cast<size_t>(c10::CachingAllocator::StatType::AGGREGATE);
  DeviceMemory memory;
  memory.allocated_bytes = stats.allocated_bytes[kAllPools].current;
  memory.reserved_bytes = stats.reserved_bytes[kAllPools].current;
  c10::cuda::CUDAGuard guard(device.index());
  size_t free_bytes = 0, total_bytes = 0;
  if (cudaMemGetInfo(&free_bytes, &total_bytes) == cudaSuccess) {
    memory.total_bytes = static_cast<int64_t>(total_bytes);
  }
  return memory;
#else
  (void)device;
  return std::nullopt;
#endif
}

}  // namespace docsparse
