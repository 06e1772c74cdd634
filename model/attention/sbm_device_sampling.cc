#include "model/attention/sbm_device_sampling.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "absl/strings/str_cat.h"
#include "common/align_up.h"

#if defined(DOCSPARSE_CUDA_TORCH)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/sbm_fastrg_cuda.h"
#endif

namespace docsparse {

#if defined(DOCSPARSE_CUDA_TORCH)

absl::StatusOr<SampledDeviceHead> SampleSbmHeadOnDevice(const SbmHeadSampler& sampler,
                                                        uint64_t head_key, at::Device device) {
  if (!device.is_cuda()) return absl::InvalidArgumentError("not a CUDA device");
  const int64_t n = sampler.tokens();
  const int k = sampler.num_clusters();
  if (!sampler.prepared()) {
    return absl::InvalidArgumentError("the SBM sampler has no alias tables (PrepareSampling)");
  }
  if (k < 1 || k > kSbmMaxClusters || n >= std::numeric_limits<int32_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("the GPU sampler takes 1 to ", kSbmMaxClusters,
                                                   " clusters, got ", k, " over ", n, " tokens"));
  }
  for (int b = 0; b < k; ++b) {
    if (sampler.key_alias(b).size() != n) {
      return absl::InvalidArgumentError(absl::StrCat(
          "cluster ", b, "'s alias table has ", sampler.key_alias(b).size(), " keys, not ", n));
    }
  }
  // One pinned buffer, one copy: λ, R, κ, then the alias tables cluster by
  // cluster ([k, n], as the kernel reads them).
  const int64_t profile_at = sizeof(double) * n;
  const int64_t mass_at = AlignUp(profile_at + static_cast<int64_t>(sizeof(float)) * n * k, 8);
  const int64_t alias_at = mass_at + static_cast<int64_t>(sizeof(double)) * k;
  const int64_t alias_bytes = static_cast<int64_t>(sizeof(AliasEntry)) * n;
  const int64_t total = std::max<int64_t>(1, alias_at + alias_bytes * k);
  const c10::cuda::CUDAGuard guard(device);
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream(device.index());
  const at::Tensor host =
      at::empty({total}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  auto* cursor = host.data_ptr<uint8_t>();
  std::memcpy(cursor, sampler.row_rate(), profile_at);
  std::memcpy(cursor + profile_at, sampler.row_profile(), sizeof(float) * n * k);
  std::memcpy(cursor + mass_at, sampler.key_mass(), sizeof(double) * k);
  for (int b = 0; b < k; ++b) {
    std::memcpy(cursor + alias_at + alias_bytes * b, sampler.key_alias(b).entries(), alias_bytes);
  }
  const at::Tensor uploaded =
      at::empty({total}, at::TensorOptions().dtype(at::kByte).device(device))
          .copy_(host, /*non_blocking=*/true);
  const auto* base = uploaded.data_ptr<uint8_t>();
  const SbmHeadTablesView tables{static_cast<int32_t>(n),
                                 k,
                                 reinterpret_cast<const double*>(base),
                                 reinterpret_cast<const float*>(base + profile_at),
                                 reinterpret_cast<const double*>(base + mass_at),
                                 reinterpret_cast<const AliasEntry*>(base + alias_at)};
  // The sampler waits for its stream before returning, so `uploaded` may go.
  SbmDeviceEdges edges;
  const cudaError_t status = SampleSbmHeadCuda(tables, head_key, stream, &edges);
  if (status != cudaSuccess) {
    FreeSbmDeviceEdges(&edges, stream);
    return absl::InternalError(
        absl::StrCat("SBM sampling on ", device.str(), ": ", cudaGetErrorString(status)));
  }
  // The sampler's buffers become tensors that free them on the same stream,
  // ordered after the attention that reads them.
  const auto free_on_stream = [stream](void* data) {
    if (data != nullptr) cudaFreeAsync(data, stream);
  };
  const at::TensorOptions on_device = at::TensorOptions().device(device);
  SampledDeviceHead sampled;
  sampled.list.row_offsets =
      at::from_blob(edges.row_offsets, {n + 1}, free_on_stream, on_device.dtype(at::kLong));
  sampled.list.keys =
      edges.keys != nullptr
          ? at::from_blob(edges.keys, {edges.edges}, free_on_stream, on_device.dtype(at::kInt))
          : at::empty({0}, on_device.dtype(at::kInt));
  sampled.list.edges = edges.edges;
  sampled.multigraph_edges = edges.multigraph_edges;
  return sampled;
}

#else  // no CUDA LibTorch

absl::StatusOr<SampledDeviceHead> SampleSbmHeadOnDevice(const SbmHeadSampler&, uint64_t,
                                                        at::Device) {
  return absl::FailedPreconditionError(
      "this build has no CUDA LibTorch (scripts/build --cuda builds one)");
}

#endif

}  // namespace docsparse
