#include "model/attention/compute_device.h"

#include <array>
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
#include <dlfcn.h>
#endif

namespace docsparse {

at::Tensor HostFloatCopy(const at::Tensor& x) {
  if (x.is_cpu()) return x.to(at::kFloat);
  const at::Tensor fp32 = x.to(at::kFloat);
  at::Tensor host = at::empty(
      fp32.sizes(), at::TensorOptions().dtype(at::kFloat).device(at::kCPU).pinned_memory(true));
  host.copy_(fp32);
  return host;
}

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

void FinishQueuedDeviceWork(at::Device device) {
#if defined(DOCSPARSE_CUDA_TORCH)
  if (device.is_cuda()) at::cuda::getCurrentCUDAStream(device.index()).synchronize();
#else
  (void)device;
#endif
}

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

#if defined(DOCSPARSE_CUDA_TORCH)
namespace {

// The few NVML entry points the utilisation needs, by their C ABI (nvml.h is
// not part of the CUDA toolkit the build uses): NVML_SUCCESS is 0, a device
// handle is opaque, nvmlUtilization_t is two unsigned percentages.
struct NvmlUtilization {
  unsigned int gpu;
  unsigned int memory;
};
using NvmlDevice = struct NvmlDeviceOpaque*;
constexpr int kNvmlSuccess = 0;

class Nvml {
 public:
  // Loaded once; null when the driver's library is missing or fails to start.
  static const Nvml* Get() {
    static const Nvml* const nvml = Load();
    return nvml;
  }

  std::optional<double> Utilization(int cuda_index) const {
    // CUDA's and NVML's device numbers differ under CUDA_VISIBLE_DEVICES: the
    // PCI bus id is common to both.
    std::array<char, 32> bus_id{};
    if (cudaDeviceGetPCIBusId(bus_id.data(), static_cast<int>(bus_id.size()), cuda_index) !=
        cudaSuccess) {
      return std::nullopt;
    }
    NvmlDevice device = nullptr;
    NvmlUtilization rates{};
    if (handle_by_bus_id_(bus_id.data(), &device) != kNvmlSuccess ||
        utilization_(device, &rates) != kNvmlSuccess) {
      return std::nullopt;
    }
    return rates.gpu / 100.0;
  }

 private:
  using Init = int (*)();
  using HandleByBusId = int (*)(const char*, NvmlDevice*);
  using UtilizationRates = int (*)(NvmlDevice, NvmlUtilization*);

  static const Nvml* Load() {
    void* library = dlopen("libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
    if (library == nullptr) return nullptr;
    const auto init = reinterpret_cast<Init>(dlsym(library, "nvmlInit_v2"));
    auto* nvml = new Nvml;
    nvml->handle_by_bus_id_ =
        reinterpret_cast<HandleByBusId>(dlsym(library, "nvmlDeviceGetHandleByPciBusId_v2"));
    nvml->utilization_ =
        reinterpret_cast<UtilizationRates>(dlsym(library, "nvmlDeviceGetUtilizationRates"));
    if (init == nullptr || nvml->handle_by_bus_id_ == nullptr || nvml->utilization_ == nullptr ||
        init() != kNvmlSuccess) {
      delete nvml;
      return nullptr;
    }
    return nvml;  // kept for the process's life, as the library is
  }

  HandleByBusId handle_by_bus_id_ = nullptr;
  UtilizationRates utilization_ = nullptr;
};

}  // namespace
#endif

std::optional<double> ReadDeviceUtilization(at::Device device) {
#if defined(DOCSPARSE_CUDA_TORCH)
  if (!device.is_cuda()) return std::nullopt;
  const Nvml* nvml = Nvml::Get();
  if (nvml == nullptr) return std::nullopt;
  return nvml->Utilization(device.index() < 0 ? 0 : device.index());
#else
  (void)device;
  return std::nullopt;
#endif
}

#if defined(DOCSPARSE_CUDA_TORCH)
struct DeviceStopwatch::Events {
  explicit Events(at::Device device)
      : guard(device), stream(at::cuda::getCurrentCUDAStream(device.index())) {}
  ~Events() {
    if (start != nullptr) cudaEventDestroy(start);
    if (end != nullptr) cudaEventDestroy(end);
  }
  c10::cuda::CUDAGuard guard;
  cudaStream_t stream;
  cudaEvent_t start = nullptr;
  cudaEvent_t end = nullptr;
  bool ok = false;
};
#else
struct DeviceStopwatch::Events {};
#endif

DeviceStopwatch::DeviceStopwatch(at::Device device) {
#if defined(DOCSPARSE_CUDA_TORCH)
  if (!device.is_cuda()) return;
  events_ = std::make_unique<Events>(device);
  events_->ok = cudaEventCreate(&events_->start) == cudaSuccess &&
                cudaEventCreate(&events_->end) == cudaSuccess &&
                cudaEventRecord(events_->start, events_->stream) == cudaSuccess;
#else
  (void)device;
#endif
}

DeviceStopwatch::~DeviceStopwatch() = default;

std::optional<double> DeviceStopwatch::Stop() {
#if defined(DOCSPARSE_CUDA_TORCH)
  if (events_ == nullptr || !events_->ok) return std::nullopt;
  events_->ok = false;
  float milliseconds = 0;
  if (cudaEventRecord(events_->end, events_->stream) != cudaSuccess ||
      cudaEventSynchronize(events_->end) != cudaSuccess ||
      cudaEventElapsedTime(&milliseconds, events_->start, events_->end) != cudaSuccess) {
    return std::nullopt;
  }
  return milliseconds / 1e3;
#else
  return std::nullopt;
#endif
}

}  // namespace docsparse
