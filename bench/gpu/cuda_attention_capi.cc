// A C interface to the CUDA attention executors, for the GPU benchmark
// (bench/gpu/attention_vs_torch.py loads it with ctypes and passes torch
// tensors' device pointers and the current stream). Returns cudaError_t.
#include <cuda_runtime_api.h>

#include <cstdint>
#include <cstring>

#include "kernels/block_sparse_attention_cuda.h"
#include "kernels/edge_attention_cuda.h"
#include "kernels/sbm_fastrg_cuda.h"
#include "kernels/sbm_sampling.h"

namespace {

docsparse::CudaAttentionParams Params(const void* q, const void* k, const void* v, void* out,
                                      int element_type, int batch, int heads, int q_len, int k_len,
                                      int head_dim, float scale) {
  return docsparse::CudaAttentionParams{
      q,     k,     v,     out,   static_cast<docsparse::CudaElementType>(element_type),
      batch, heads, q_len, k_len, head_dim,
      scale};
}

}  // namespace

extern "C" {

// element_type: 0 fp32, 1 bf16, 2 fp16. spans: [n, 2] int32 (begin, length).
int docsparse_block_sparse_attention(const void* q, const void* k, const void* v, void* out,
                                     int element_type, int batch, int heads, int q_len, int k_len,
                                     int head_dim, float scale, int num_query_blocks,
                                     const int32_t* query_block_starts, const int32_t* span_offsets,
                                     const int32_t* spans, int max_query_block_rows, void* stream) {
  static_assert(sizeof(docsparse::KeySpan) == 2 * sizeof(int32_t), "spans are int32 pairs");
  const docsparse::BlockSparsePlanView plan{num_query_blocks, query_block_starts, span_offsets,
                                            reinterpret_cast<const docsparse::KeySpan*>(spans)};
  return docsparse::BlockSparseAttentionCuda(
      Params(q, k, v, out, element_type, batch, heads, q_len, k_len, head_dim, scale), plan,
      max_query_block_rows, static_cast<cudaStream_t>(stream));
}

int docsparse_edge_view_bytes() { return sizeof(docsparse::EdgeListView); }

// Writes batch_heads EdgeListViews into `host_views` (docsparse_edge_view_bytes()
// each): view i reads row offsets at row_offsets + i * offsets_stride (device
// pointers; offsets index `keys`) and has `rows` rows.
void docsparse_fill_edge_views(void* host_views, const int64_t* row_offsets, int64_t offsets_stride,
                               const int32_t* keys, int batch_heads, int rows) {
  for (int i = 0; i < batch_heads; ++i) {
    const docsparse::EdgeListView view{row_offsets + i * offsets_stride, keys, rows};
    std::memcpy(static_cast<char*>(host_views) + i * sizeof(view), &view, sizeof(view));
  }
}

int docsparse_edge_attention(const void* q, const void* k, const void* v, void* out,
                             int element_type, int batch, int heads, int q_len, int k_len,
                             int head_dim, float scale, const void* device_views, void* stream) {
  return docsparse::EdgeAttentionCuda(
      Params(q, k, v, out, element_type, batch, heads, q_len, k_len, head_dim, scale),
      static_cast<const docsparse::EdgeListView*>(device_views), static_cast<cudaStream_t>(stream));
}

int docsparse_alias_entry_bytes() { return sizeof(docsparse::AliasEntry); }

// Builds the alias table of `weights` [size] (host) into `entries` (host,
// size * docsparse_alias_entry_bytes()).
void docsparse_build_alias_table(const float* weights, int size, void* entries) {
  docsparse::AliasTable table;
  docsparse::AliasScratch scratch;
  table.Build(weights, size, &scratch);
  std::memcpy(entries, table.entries(), sizeof(docsparse::AliasEntry) * size);
}

// Samples one SBM head on the GPU (device tables as SbmHeadTablesView says);
// out[0..3] = row_offsets pointer, keys pointer, distinct edges, copies.
// Free with docsparse_sbm_free.
int docsparse_sbm_sample(int tokens, int clusters, const double* row_rate, const float* row_profile,
                         const double* key_mass, const void* key_alias, uint64_t head_key,
                         void* stream, int64_t* out) {
  const docsparse::SbmHeadTablesView tables{
      tokens,      clusters, row_rate,
      row_profile, key_mass, static_cast<const docsparse::AliasEntry*>(key_alias)};
  docsparse::SbmDeviceEdges edges;
  const cudaError_t status =
      docsparse::SampleSbmHeadCuda(tables, head_key, static_cast<cudaStream_t>(stream), &edges);
  out[0] = reinterpret_cast<int64_t>(edges.row_offsets);
  out[1] = reinterpret_cast<int64_t>(edges.keys);
  out[2] = edges.edges;
  out[3] = edges.multigraph_edges;
  return status;
}

void docsparse_sbm_free(void* row_offsets, void* keys, void* stream) {
  docsparse::SbmDeviceEdges edges;
  edges.row_offsets = static_cast<int64_t*>(row_offsets);
  edges.keys = static_cast<int32_t*>(keys);
  docsparse::FreeSbmDeviceEdges(&edges, static_cast<cudaStream_t>(stream));
}

}  // extern "C"
