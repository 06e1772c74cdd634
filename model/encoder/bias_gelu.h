// The feed-forward's first half for an encoder on the CPU: the product runs
// without its bias (Linear::Bias::kByCaller), then kernels/bias_gelu adds the
// bias and applies GELU in one pass over the [rows, intermediate]
// activations, the largest of a layer, instead of a pass for each (or
// oneDNN's erf inside the product, twice as slow).
#ifndef DOCSPARSE_MODEL_ENCODER_BIAS_GELU_H_
#define DOCSPARSE_MODEL_ENCODER_BIAS_GELU_H_

#include <ATen/ATen.h>

namespace docsparse {

// GELU(product + bias) in place and returned, for a contiguous bf16 or fp32
// CPU product [..., width] and a bias [width] of its type; `tanh_form` picks
// "gelu_new" over the exact (erf) GELU.
at::Tensor BiasGelu(at::Tensor product, const at::Tensor& bias, bool tanh_form);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ENCODER_BIAS_GELU_H_
