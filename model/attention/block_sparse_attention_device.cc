#include "model/attention/block_sparse_attention_device.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

#if defined(DOCSPARSE_CUDA_TORCH)
#include <ATen/cuda/CUDAContext.h>
#include <c10/cuda/CUDAGuard.h>

#include "kernels/block_sparse_attention_cuda.h"
#include "model/attention/cuda_operands.h"
#endif

namespace docsparse {

#if defined(DOCSPARSE_CUDA_TORCH)

namespace {

absl::Status CheckOperand(const char* name, const at::Tensor& t, const at::Tensor& q) {
  if (absl::Status status = CheckOnQsDevice(name, t, q); !status.ok()) return status;
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
  const absl::StatusOr<CudaElementType> type = CudaElementTypeOf(q);
  if (!type.ok()) return type.status();
  const int64_t batch_heads = q.size(0) * q.size(1);
  const int32_t blocks = plan.num_query_blocks;
  const int64_t rows = batch_heads * blocks;
  int32_t max_rows = 0;
  for (int32_t i = 0; i < blocks; ++i) {
    max_rows = std::max(max_rows, plan.query_block_starts[i + 1] - plan.query_block_starts[i]);
  }
  const c10::cuda::CUDAGuard guard(q.device());
  const cudaStream_t stream = at::cuda::getCurrentCUDAStream();
  // The plan in one pinned buffer, copied without waiting on the current
  // stream: a copy from pageable memory waits for the stream to drain, and
  // there were three per item and layer. On the H100 end to end (minilm-lsg
  // alone, docs/BENCHMARKS.md) throughput moved within run-to-run noise and
  // p99 fell 25-32%. The caching host allocator keeps the buffer until the
  // copy has run.
  const int64_t span_count = plan.span_offsets[rows];
  const int64_t span_ints = 2 * std::max<int64_t>(1, span_count);
  // The spans start 8-byte aligned, as a KeySpan array of its own would.
  const int64_t spans_at = ((blocks + 1) + (rows + 1) + 1) / 2 * 2;
  const int64_t total = spans_at + span_ints;
  const at::Tensor host =
      at::empty({total}, at::TensorOptions().dtype(at::kInt).pinned_memory(true));
  int32_t* cursor = host.data_ptr<int32_t>();
  std::memcpy(cursor, plan.query_block_starts, sizeof(int32_t) * (blocks + 1));
  std::memcpy(cursor + blocks + 1, plan.span_offsets, sizeof(int32_t) * (rows + 1));
  std::memcpy(cursor + spans_at, plan.spans,
              sizeof(int32_t) * (span_count > 0 ? 2 * span_count : 0));
  const at::Tensor uploaded =
      at::empty({total}, q.options().dtype(at::kInt)).copy_(host, /*non_blocking=*/true);
  const at::Tensor starts = uploaded.narrow(0, 0, blocks + 1);
  const at::Tensor offsets = uploaded.narrow(0, blocks + 1, rows + 1);
  const at::Tensor spans = uploaded.narrow(0, spans_at, span_ints);
  at::Tensor out = at::zeros(q.sizes(), q.options());
  CudaAttentionParams params{q.data_ptr(),
                             k.data_ptr(),
                             v.data_ptr(),
                             out.data_ptr(),
                             *type,
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
