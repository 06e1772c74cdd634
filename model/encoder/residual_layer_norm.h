// LayerNorm(x + residual), the step that closes both halves of an encoder
// layer, in the activations' element type: LibTorch's add and layer_norm in
// fp32; kernels/residual_layer_norm (one fused pass, fp32 statistics) in
// bf16. The scale and shift stay fp32 in both. On a CUDA device: LibTorch's,
// whose LayerNorm keeps fp32 statistics for bf16 itself.
#ifndef DOCSPARSE_MODEL_ENCODER_RESIDUAL_LAYER_NORM_H_
#define DOCSPARSE_MODEL_ENCODER_RESIDUAL_LAYER_NORM_H_

#include <ATen/ATen.h>

namespace docsparse {

// x and residual: [..., width], the same shape and type (fp32 or bf16);
// gamma, beta: [width] fp32. Returns a new tensor of x's shape and type.
at::Tensor ResidualLayerNorm(const at::Tensor& x, const at::Tensor& residual,
                             const at::Tensor& gamma, const at::Tensor& beta, double eps);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ENCODER_RESIDUAL_LAYER_NORM_H_
