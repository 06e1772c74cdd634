// LayerNorm(x + residual), the step that closes both halves of an encoder
// layer, in the activations' element type (fp32 or bf16): on the CPU
// kernels/residual_layer_norm (one fused pass, fp32 statistics), the scale and
// shift fp32. On a CUDA device: LibTorch's add and LayerNorm, which keeps
// fp32 statistics for bf16 itself.
#ifndef DOCSPARSE_MODEL_ENCODER_RESIDUAL_LAYER_NORM_H_
#define DOCSPARSE_MODEL_ENCODER_RESIDUAL_LAYER_NORM_H_

#include <ATen/ATen.h>

namespace docsparse {

// x and residual: [..., width], the same shape and type (fp32 or bf16);
// gamma, beta: [width] fp32. Returns a new tensor of x's shape and type, or,
// given `out` (contiguous, x's shape and type; it may alias x or residual),
// writes the result there and returns it.
at::Tensor ResidualLayerNorm(const at::Tensor& x, const at::Tensor& residual,
                             const at::Tensor& gamma, const at::Tensor& beta, double eps,
                             const at::Tensor& out = at::Tensor());

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ENCODER_RESIDUAL_LAYER_NORM_H_
