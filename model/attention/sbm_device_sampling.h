// An SBM head's graph sampled on a CUDA device: the host planner's tables
// (memberships, rates, alias tables: O(tokens·k), built where β was chosen)
// copied up, then the GPU fastRG (kernels/sbm_fastrg_cuda.h) draws the
// copies, deduplicates and builds the CSR there, so that the edges, hundreds
// of MB a layer at 16k tokens, are neither drawn by the host nor copied.
// Built with a CUDA LibTorch (scripts/build --cuda); in the default build it
// answers FAILED_PRECONDITION.
#ifndef DOCSPARSE_MODEL_ATTENTION_SBM_DEVICE_SAMPLING_H_
#define DOCSPARSE_MODEL_ATTENTION_SBM_DEVICE_SAMPLING_H_

#include <ATen/ATen.h>

#include <cstdint>

#include "absl/status/statusor.h"
#include "model/attention/edge_plan.h"
#include "model/attention/sbm_head_sampler.h"

namespace docsparse {

struct SampledDeviceHead {
  DeviceHeadEdgeList list;       // rows ascending
  int64_t multigraph_edges = 0;  // copies drawn before deduplication
};

// The graph SbmHeadSampler::Sample(head_key) draws (the same edges: the GPU
// sampler runs the CPU's streams and arithmetic), in `device`'s memory, on
// the thread's current stream; waits for the edge count. INVALID_ARGUMENT for
// a sampler without its alias tables or tables the kernel does not take
// (more than kSbmMaxClusters clusters); INTERNAL for a CUDA error.
absl::StatusOr<SampledDeviceHead> SampleSbmHeadOnDevice(const SbmHeadSampler& sampler,
                                                        uint64_t head_key, at::Device device);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_SBM_DEVICE_SAMPLING_H_
