// fastRG sampling of one SBM head on the GPU: the same process, streams and
// arithmetic as the CPU planner's SbmHeadSampler::Sample (see
// model/attention/sbm_head_sampler.h), so the same tables and head key give
// the same edges. Per row i of the head, on the device:
//   m_i ~ Poisson(λ_i) from the row's stream DeriveKey(head_key, i);
//   per copy, one 64-bit draw: its high half picks the key cluster b from the
//   row's cumulative weights R_ib·κ_b (fp32, as the CPU sums them), its low
//   half the key j from cluster b's alias table;
// then each row's copies are sorted and deduplicated (CUB's segmented sort)
// and compacted into CSR. Rows come out ascending (the CPU keeps a sparse
// row in draw order; the sets are equal).
#ifndef DOCSPARSE_KERNELS_SBM_FASTRG_CUDA_H_
#define DOCSPARSE_KERNELS_SBM_FASTRG_CUDA_H_

#include <cuda_runtime_api.h>

#include <cstdint>

#include "kernels/sbm_sampling.h"

namespace docsparse {

// One head's sampling tables, in device memory.
struct SbmHeadTablesView {
  int32_t tokens;               // n
  int32_t clusters;             // k, 1..kSbmMaxClusters
  const double* row_rate;       // λ [n]
  const float* row_profile;     // R = Q̂ S [n, k]
  const double* key_mass;       // κ [k]
  const AliasEntry* key_alias;  // [k, n]: cluster b's table over keys
};

constexpr int kSbmMaxClusters = 64;

// One head's sampled graph in device memory (cudaMallocAsync'd on the
// sampling stream; free with FreeSbmDeviceEdges on a stream ordered after it).
struct SbmDeviceEdges {
  int64_t* row_offsets = nullptr;  // [n + 1]
  int32_t* keys = nullptr;         // [edges], ascending within a row
  int64_t edges = 0;               // distinct edges
  int64_t multigraph_edges = 0;    // copies drawn before deduplication
};

// Samples on `stream` and waits for it (the edge count sizes the outputs).
// Returns cudaErrorInvalidValue for tables it does not take.
cudaError_t SampleSbmHeadCuda(const SbmHeadTablesView& tables, uint64_t head_key,
                              cudaStream_t stream, SbmDeviceEdges* edges);

void FreeSbmDeviceEdges(SbmDeviceEdges* edges, cudaStream_t stream);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_SBM_FASTRG_CUDA_H_
