#include "model/checkpoint/checkpoint_tensor.h"

#include <c10/util/Exception.h>

#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace docsparse {
namespace {

absl::StatusOr<at::ScalarType> TorchDtype(const TensorView& view) {
  switch (view.dtype) {
    case DType::kF32:
      return at::kFloat;
    case DType::kF16:
      return at::kHalf;
    case DType::kBF16:
      return at::kBFloat16;
    case DType::kF64:
      return at::kDouble;
    default:
      return absl::InvalidArgumentError(absl::StrCat(
          "tensor '", view.name, "' has a non-float dtype ", std::string(DTypeName(view.dtype))));
  }
}

}  // namespace

absl::StatusOr<at::Tensor> ReadFloatTensor(const Checkpoint& checkpoint, const std::string& name,
                                           const std::vector<int64_t>& expected_shape) {
  ASSIGN_OR_RETURN(TensorView view, checkpoint.Get(name));
  if (view.shape != expected_shape) {
    return absl::InvalidArgumentError(
        absl::StrCat("tensor '", view.name, "' has shape [", absl::StrJoin(view.shape, ","),
                     "], config implies [", absl::StrJoin(expected_shape, ","), "]"));
  }
  ASSIGN_OR_RETURN(at::ScalarType dtype, TorchDtype(view));
  try {
    at::Tensor tensor = at::empty(expected_shape, at::TensorOptions().dtype(dtype));
    // The safetensors reader checked nbytes == numel * element size.
    if (view.nbytes > 0) std::memcpy(tensor.data_ptr(), view.data, view.nbytes);
    return tensor.to(at::kFloat);
  } catch (const c10::Error& error) {
    return absl::ResourceExhaustedError(
        absl::StrCat("tensor '", view.name, "': copy failed: ", error.what_without_backtrace()));
  }
}

absl::StatusOr<at::Tensor> ReadBiasOrZeros(const Checkpoint& checkpoint, const std::string& name,
                                           int64_t size, bool present) {
  if (!present) return at::zeros({size}, at::kFloat);
  return ReadFloatTensor(checkpoint, name, {size});
}

}  // namespace docsparse
