#include "model/attention/edge_attention_device.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <tuple>
#include <utility>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/align_up.h"

#if defined(DOCSPARSE_CUDA_TORCH)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/edge_attention_cuda.h"
#include "model/attention/cuda_operands.h"
#endif

namespace docsparse {

#if defined(DOCSPARSE_CUDA_TORCH)

namespace {

absl::Status CheckOperand(const char* name, const at::Tensor& t, const at::Tensor& q) {
  if (absl::Status status = CheckOnQsDevice(name, t, q); !status.ok()) return status;
  if (t.dim() != 2 || t.size(1) != q.size(1)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name, " must be [len, head_dim] with q's head_dim"));
  }
  if (!t.is_contiguous())
    return absl::InvalidArgumentError(absl::StrCat(name, " is not contiguous"));
  return absl::OkStatus();
}

// A wrong key would read outside k on the device and poison the context for
// every later request, so the list is checked on the host first: O(rows +
// edges), small beside planning it.
absl::Status CheckEdges(const HeadEdgeList& edges, int64_t q_len, int64_t k_len) {
  const int64_t rows = static_cast<int64_t>(edges.row_offsets.size()) - 1;
  if (rows < 0 || rows > q_len) {
    return absl::InvalidArgumentError(
        absl::StrCat("edge list has ", rows, " rows for ", q_len, " queries"));
  }
  if (edges.row_offsets[0] != 0 || edges.row_offsets[rows] != edges.edges() ||
      !std::is_sorted(edges.row_offsets.begin(), edges.row_offsets.end())) {
    return absl::InvalidArgumentError(
        "edge list's row offsets must rise from 0 to the number of keys");
  }
  if (!edges.logit_bias.empty() && edges.logit_bias.size() != edges.keys.size()) {
    return absl::InvalidArgumentError("edge list's logit bias must have one value per key");
  }
  if (!edges.keys.empty()) {
    const auto [low, high] = std::minmax_element(edges.keys.begin(), edges.keys.end());
    if (*low < 0 || *high >= k_len) {
      return absl::InvalidArgumentError(
          absl::StrCat("edge list names key ", *low < 0 ? *low : *high, " of ", k_len));
    }
  }
  return absl::OkStatus();
}

// q, k, v and out checked, and their element type.
absl::StatusOr<CudaElementType> CheckOperands(const at::Tensor& q, const at::Tensor& k,
                                              const at::Tensor& v, const at::Tensor& out) {
  if (q.dim() != 2) return absl::InvalidArgumentError("q must be [len, head_dim]");
  for (const auto& [name, t] :
       {std::pair<const char*, const at::Tensor&>{"q", q}, {"k", k}, {"v", v}, {"out", out}}) {
    if (absl::Status status = CheckOperand(name, t, q); !status.ok()) return status;
  }
  if (k.size(0) != v.size(0)) return absl::InvalidArgumentError("k and v differ in length");
  if (out.size(0) != q.size(0)) return absl::InvalidArgumentError("out and q differ in length");
  return CudaElementTypeOf(q);
}

// One head on `stream`; `view` in device memory.
absl::Status Launch(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v, at::Tensor& out,
                    CudaElementType type, const EdgeListView* view, float scale,
                    cudaStream_t stream) {
  CudaAttentionParams params{q.data_ptr(),
                             k.data_ptr(),
                             v.data_ptr(),
                             out.data_ptr(),
                             type,
                             1,
                             1,
                             static_cast<int32_t>(q.size(0)),
                             static_cast<int32_t>(k.size(0)),
                             static_cast<int32_t>(q.size(1)),
                             scale};
  const cudaError_t status = EdgeAttentionCuda(params, view, stream);
  if (status != cudaSuccess) {
    return absl::InternalError(
        absl::StrCat("edge attention on ", q.device().str(), ": ", cudaGetErrorString(status)));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status EdgeAttentionHeadOnDevice(const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v, const HeadEdgeList& edges, float scale,
                                       at::Tensor& out) {
  const absl::StatusOr<CudaElementType> type = CheckOperands(q, k, v, out);
  if (!type.ok()) return type.status();
  if (absl::Status status = CheckEdges(edges, q.size(0), k.size(0)); !status.ok()) return status;
  const c10::cuda::CUDAGuard guard(q.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  // One pinned buffer, one copy: offsets, keys, biases, then the view the
  // kernel reads, which points into the device's copy of the same buffer.
  const int64_t rows = edges.rows();
  const int64_t count = edges.edges();
  const int64_t keys_at = sizeof(int64_t) * (rows + 1);
  const int64_t bias_at = keys_at + static_cast<int64_t>(sizeof(int32_t)) * count;
  const int64_t bias_bytes =
      static_cast<int64_t>(sizeof(float)) * static_cast<int64_t>(edges.logit_bias.size());
  const int64_t view_at = AlignUp(bias_at + bias_bytes, alignof(EdgeListView));
  const int64_t total = view_at + static_cast<int64_t>(sizeof(EdgeListView));
  const at::Tensor host =
      at::empty({total}, at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  at::Tensor uploaded = at::empty({total}, q.options().dtype(at::kByte));
  auto* cursor = host.data_ptr<uint8_t>();
  auto* base = uploaded.data_ptr<uint8_t>();
  std::memcpy(cursor, edges.row_offsets.data(), keys_at);
  if (count > 0) std::memcpy(cursor + keys_at, edges.keys.data(), bias_at - keys_at);
  if (bias_bytes > 0) std::memcpy(cursor + bias_at, edges.logit_bias.data(), bias_bytes);
  const EdgeListView view{
      reinterpret_cast<const int64_t*>(base), reinterpret_cast<const int32_t*>(base + keys_at),
      static_cast<int32_t>(rows),
      bias_bytes > 0 ? reinterpret_cast<const float*>(base + bias_at) : nullptr};
  std::memcpy(cursor + view_at, &view, sizeof(view));
  uploaded.copy_(host, /*non_blocking=*/true);
  return Launch(q, k, v, out, *type, reinterpret_cast<const EdgeListView*>(base + view_at), scale,
                stream);
}

absl::Status EdgeAttentionHeadOnDevice(const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v, const DeviceHeadEdgeList& edges,
                                       float scale, at::Tensor& out) {
  const absl::StatusOr<CudaElementType> type = CheckOperands(q, k, v, out);
  if (!type.ok()) return type.status();
  for (const auto& [name, t, dtype] : {std::tuple<const char*, const at::Tensor&, at::ScalarType>{
                                           "row_offsets", edges.row_offsets, at::kLong},
                                       {"keys", edges.keys, at::kInt}}) {
    if (!t.defined() || t.device() != q.device() || t.scalar_type() != dtype || t.dim() != 1 ||
        !t.is_contiguous()) {
      return absl::InvalidArgumentError(
          absl::StrCat("device edge list's ", name, " must be a contiguous vector of ",
                       dtype == at::kLong ? "int64" : "int32", " on ", q.device().str()));
    }
  }
  if (edges.rows() < 0 || edges.rows() > q.size(0) || edges.keys.numel() < edges.edges) {
    return absl::InvalidArgumentError(absl::StrCat("device edge list of ", edges.rows(),
                                                   " rows and ", edges.edges, " keys for ",
                                                   q.size(0), " queries"));
  }
  const c10::cuda::CUDAGuard guard(q.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  const EdgeListView view{edges.row_offsets.data_ptr<int64_t>(), edges.keys.data_ptr<int32_t>(),
                          edges.rows(), nullptr};
  const at::Tensor host = at::empty({static_cast<int64_t>(sizeof(view))},
                                    at::TensorOptions().dtype(at::kByte).pinned_memory(true));
  std::memcpy(host.data_ptr<uint8_t>(), &view, sizeof(view));
  const at::Tensor uploaded =
      at::empty({host.numel()}, q.options().dtype(at::kByte)).copy_(host, /*non_blocking=*/true);
  return Launch(q, k, v, out, *type, reinterpret_cast<const EdgeListView*>(uploaded.data_ptr()),
                scale, stream);
}

#else  // no CUDA LibTorch

namespace {

absl::Status NoCuda() {
  return absl::FailedPreconditionError(
      "this build has no CUDA LibTorch (scripts/build --cuda builds one)");
}

}  // namespace

absl::Status EdgeAttentionHeadOnDevice(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                       const HeadEdgeList&, float, at::Tensor&) {
  return NoCuda();
}

absl::Status EdgeAttentionHeadOnDevice(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                       const DeviceHeadEdgeList&, float, at::Tensor&) {
  return NoCuda();
}

#endif

}  // namespace docsparse
