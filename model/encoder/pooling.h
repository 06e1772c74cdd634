// Sequence pooling of encoder outputs.
#ifndef DOCSPARSE_MODEL_ENCODER_POOLING_H_
#define DOCSPARSE_MODEL_ENCODER_POOLING_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "model/checkpoint/serving_config.h"

namespace docsparse {

// hidden: [batch, seq, h]; lengths: real tokens per row (right padding).
// Returns [batch, h]: the first token (CLS) or the mean over real tokens, as
// sentence-transformers' Pooling module computes them.
at::Tensor Pool(const at::Tensor& hidden, const std::vector<int64_t>& lengths, PoolingMode mode);

// Rows scaled to unit L2 norm (norm clamped at 1e-12, as torch's normalize).
at::Tensor L2Normalize(const at::Tensor& rows);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ENCODER_POOLING_H_
