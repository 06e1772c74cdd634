#include "model/attention/edge_attention_device.h"

#include <algorithm>
#include <cstdint>
#include <cstring>

#include "absl/strings/str_cat.h"

#if defined(DOCSPARSE_CUDA_TORCH)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/edge_attention_cuda.h"
#endif

namespace docsparse {

#if defined(DOCSPARSE_CUDA_TORCH)

namespace {

absl::Status CheckOperand(const char* name, const at::Tensor& t, const at::Tensor& q) {
  if (!t.is_cuda())
    return absl::InvalidArgumentError(absl::StrCat(name, " is not on a CUDA device"));
  if (t.device() != q.device()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is on another device than q"));
  }
  if (t.scalar_type() != q.scalar_type()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " has another dtype than q"));
  }
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

int64_t AlignUp(int64_t bytes, int64_t to) { return (bytes + to - 1) / to * to; }

}  // namespace

absl::Status EdgeAttentionHeadOnDevice(const at::Tensor& q, const at::Tensor& k,
                                       const at::Tensor& v, const HeadEdgeList& edges, float scale,
                                       at::Tensor& out) {
  if (q.dim() != 2) return absl::InvalidArgumentError("q must be [len, head_dim]");
  for (const auto& [name, t] :
       {std::pair<const char*, const at::Tensor&>{"q", q}, {"k", k}, {"v", v}, {"out", out}}) {
    if (absl::Status status = CheckOperand(name, t, q); !status.ok()) return status;
  }
  if (k.size(0) != v.size(0)) return absl::InvalidArgumentError("k and v differ in length");
  if (out.size(0) != q.size(0)) return absl::InvalidArgumentError("out and q differ in length");
  if (absl::Status status = CheckEdges(edges, q.size(0), k.size(0)); !status.ok()) return status;
  CudaElementType type;
  switch (q.scalar_type()) {
    case at::kBFloat16:
      type = CudaElementType::kBFloat16;
      break;
    case at::kHalf:
      type = CudaElementType::kFloat16;
      break;
    case at::kFloat:
      type = CudaElementType::kFloat32;
      break;
    default:
      return absl::InvalidArgumentError("q must be bf16, fp16 or fp32");
  }
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
  at::Tensor device = at::empty({total}, q.options().dtype(at::kByte));
  auto* cursor = host.data_ptr<uint8_t>();
  auto* base = device.data_ptr<uint8_t>();
  std::memcpy(cursor, edges.row_offsets.data(), keys_at);
  if (count > 0) std::memcpy(cursor + keys_at, edges.keys.data(), bias_at - keys_at);
  if (bias_bytes > 0) std::memcpy(cursor + bias_at, edges.logit_bias.data(), bias_bytes);
  const EdgeListView view{
      reinterpret_cast<const int64_t*>(base), reinterpret_cast<const int32_t*>(base + keys_at),
      static_cast<int32_t>(rows),
      bias_bytes > 0 ? reinterpret_cast<const float*>(base + bias_at) : nullptr};
  std::memcpy(cursor + view_at, &view, sizeof(view));
  device.copy_(host, /*non_blocking=*/true);
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
  const cudaError_t status =
      EdgeAttentionCuda(params, reinterpret_cast<const EdgeListView*>(base + view_at), stream);
  if (status != cudaSuccess) {
    return absl::InternalError(
        absl::StrCat("edge attention on ", q.device().str(), ": ", cudaGetErrorString(status)));
  }
  return absl::OkStatus();
}

#else  // no CUDA LibTorch

absl::Status EdgeAttentionHeadOnDevice(const at::Tensor&, const at::Tensor&, const at::Tensor&,
                                       const HeadEdgeList&, float, at::Tensor&) {
  return absl::FailedPreconditionError(
      "this build has no CUDA LibTorch (scripts/build --cuda builds one)");
}

#endif

}  // namespace docsparse
