#include "model/attention/block_sparse_attention_device.h"

#include <algorithm>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#if defined(DOCSPARSE_CUDA_TORCH)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/block_sparse_attention_cuda.h"
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
  if (t.dim() != 4 || t.size(0) != q.size(0) || t.size(1) != q.size(1) || t.size(3) != q.size(3)) {
    return absl::InvalidArgumentError(
        absl::StrCat(name,
                     " must be [batch, heads, len, head_dim] with q's batch, heads and "
                     "head_dim"));
  }
  if (t.stride(3) != 1) {
    return absl::InvalidArgumentError(absl::StrCat(name, "'s head dimension is not contiguous"));
  }
  return absl::OkStatus();
}

RowLayout LayoutOf(const at::Tensor& t) { return RowLayout{t.stride(0), t.stride(1), t.stride(2)}; }

}  // namespace

absl::StatusOr<at::Tensor> BlockSparseAttentionOnDevice(const at::Tensor& q, const at::Tensor& k,
                                                        const at::Tensor& v,
                                                        const BlockSparsePlanView& plan,
                                                        float scale) {
  if (q.dim() != 4) return absl::InvalidArgumentError("q must be [batch, heads, q_len, head_dim]");
  for (const auto& [name, t] :
       {std::pair<const char*, const at::Tensor&>{"q", q}, {"k", k}, {"v", v}}) {
    if (absl::Status status = CheckOperand(name, t, q); !status.ok()) return status;
  }
  if (k.size(2) != v.size(2)) return absl::InvalidArgumentError("k and v differ in length");
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
  const int64_t batch_heads = q.size(0) * q.size(1);
  const int32_t blocks = plan.num_query_blocks;
  const int64_t rows = batch_heads * blocks;
  int32_t max_rows = 0;
  for (int32_t i = 0; i < blocks; ++i) {
    max_rows = std::max(max_rows, plan.query_block_starts[i + 1] - plan.query_block_starts[i]);
  }
  const c10::cuda::CUDAGuard guard(q.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  // The plan, copied on the current stream (from pageable host memory, so
  // the copy has finished with the host arrays when it returns).
  const auto upload = [&](const void* data, int64_t count) {
    return at::from_blob(const_cast<void*>(data), {count}, at::kInt).to(q.device());
  };
  const at::Tensor starts = upload(plan.query_block_starts, blocks + 1);
  const at::Tensor offsets = upload(plan.span_offsets, rows + 1);
  const int64_t span_count = plan.span_offsets[rows];
  const at::Tensor spans = upload(plan.spans, 2 * std::max<int64_t>(1, span_count));
  at::Tensor out = at::zeros(q.sizes(), q.options());
  CudaAttentionParams params{q.data_ptr(),
                             k.data_ptr(),
                             v.data_ptr(),
                             out.data_ptr(),
                             type,
                             static_cast<int32_t>(q.size(0)),
                             static_cast<int32_t>(q.size(1)),
                             static_cast<int32_t>(q.size(2)),
                             static_cast<int32_t>(k.size(2)),
                             static_cast<int32_t>(q.size(3)),
                             scale};
  params.q_layout = LayoutOf(q);
  params.k_layout = LayoutOf(k);
  params.v_layout = LayoutOf(v);
  const BlockSparsePlanView device_plan{
      blocks, starts.data_ptr<int32_t>(), offsets.data_ptr<int32_t>(),
      reinterpret_cast<const KeySpan*>(spans.data_ptr<int32_t>())};
  const cudaError_t status = BlockSparseAttentionCuda(params, device_plan, max_rows, stream);
  if (status != cudaSuccess) {
    return absl::InternalError(absl::StrCat("block-sparse attention on ", q.device().str(), ": ",
                                            cudaGetErrorString(status)));
  }
  return out;
}

#else  // no CUDA LibTorch

absl::StatusOr<at::Tensor> BlockSparseAttentionOnDevice(const at::Tensor&, const at::Tensor&,
                                                        const at::Tensor&,
                                                        const BlockSparsePlanView&, float) {
  return absl::FailedPreconditionError(
      "this build has no CUDA LibTorch (scripts/build --cuda builds one)");
}

#endif

}  // namespace docsparse
