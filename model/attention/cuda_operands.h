// What the torch-facing CUDA executors (block_sparse_attention_device,
// edge_attention_device) check of every operand before a launch, and the
// element type they hand the kernels. Included only by a build on a CUDA
// LibTorch (DOCSPARSE_CUDA_TORCH).
#ifndef DOCSPARSE_MODEL_ATTENTION_CUDA_OPERANDS_H_
#define DOCSPARSE_MODEL_ATTENTION_CUDA_OPERANDS_H_

#include <ATen/ATen.h>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "kernels/cuda_attention_params.h"

namespace docsparse {

// `t` (named `name` in the error) lies on q's CUDA device in q's dtype.
inline absl::Status CheckOnQsDevice(const char* name, const at::Tensor& t, const at::Tensor& q) {
  if (!t.is_cuda()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is not on a CUDA device"));
  }
  if (t.device() != q.device()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " is on another device than q"));
  }
  if (t.scalar_type() != q.scalar_type()) {
    return absl::InvalidArgumentError(absl::StrCat(name, " has another dtype than q"));
  }
  return absl::OkStatus();
}

// q's dtype as the kernels take it: bf16, fp16 or fp32.
inline absl::StatusOr<CudaElementType> CudaElementTypeOf(const at::Tensor& q) {
  switch (q.scalar_type()) {
    case at::kBFloat16:
      return CudaElementType::kBFloat16;
    case at::kHalf:
      return CudaElementType::kFloat16;
    case at::kFloat:
      return CudaElementType::kFloat32;
    default:
      return absl::InvalidArgumentError("q must be bf16, fp16 or fp32");
  }
}

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_CUDA_OPERANDS_H_
