// The feed-forward's first half for a bf16 encoder: the product without its
// bias, then kernels/bias_gelu adds the bias and applies GELU in one pass
// over the [rows, intermediate] activations (LibTorch copied the bias into
// the product's output first and ran the activation as a pass of its own).
#ifndef DOCSPARSE_MODEL_ENCODER_BIAS_GELU_H_
#define DOCSPARSE_MODEL_ENCODER_BIAS_GELU_H_

#include <ATen/ATen.h>

namespace docsparse {

// GELU(x·weightᵀ + bias) for bf16 x, weight and bias; `tanh_form` picks
// "gelu_new" over the exact (erf) GELU.
at::Tensor ProjectBiasGeluBf16(const at::Tensor& x, const at::Tensor& weight,
                               const at::Tensor& bias, bool tanh_form);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ENCODER_BIAS_GELU_H_
