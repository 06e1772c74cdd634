// Copying one weight out of a safetensors Checkpoint into a float32 tensor,
// shared by every loader of model weights (encoder, classification head).
#ifndef DOCSPARSE_MODEL_CHECKPOINT_CHECKPOINT_TENSOR_H_
#define DOCSPARSE_MODEL_CHECKPOINT_CHECKPOINT_TENSOR_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/checkpoint/safetensors.h"

namespace docsparse {

// Returns tensor `name` of `checkpoint` as a new, owned, contiguous float32
// CPU tensor of `expected_shape`, converting from F16, BF16 or F64 (the
// mapping is copied, never wrapped: it may be unaligned and is read-only).
// Errors: NOT_FOUND naming the tensor and the checkpoint when it is absent;
// INVALID_ARGUMENT naming it when its shape differs from `expected_shape`
// ("tensor 'x' has shape [3,32], config implies [4,32]") or its dtype is not
// floating-point. Thread-safe (the checkpoint is immutable).
absl::StatusOr<at::Tensor> ReadFloatTensor(const Checkpoint& checkpoint, const std::string& name,
                                           const std::vector<int64_t>& expected_shape);

// A bias of `size` entries: ReadFloatTensor's when the config says the layer
// has one (`present`), else zeros (a layer built with bias=False stores none).
absl::StatusOr<at::Tensor> ReadBiasOrZeros(const Checkpoint& checkpoint, const std::string& name,
                                           int64_t size, bool present);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_CHECKPOINT_CHECKPOINT_TENSOR_H_
