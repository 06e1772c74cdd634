#include "model/encoder/residual_layer_norm.h"

#include <ATen/Parallel.h>

#include "kernels/residual_layer_norm.h"

namespace docsparse {

at::Tensor ResidualLayerNorm(const at::Tensor& x, const at::Tensor& residual,
                             const at::Tensor& gamma, const at::Tensor& beta, double eps) {
  const int64_t width = x.size(-1);
  // Our bf16 kernel is the CPU's; a device's LayerNorm accumulates in fp32
  // already, with gamma and beta in x's type (the encoder keeps them so).
  if (!x.is_cpu()) {
    return at::layer_norm(x + residual, {width}, gamma.to(x.scalar_type()),
                          beta.to(x.scalar_type()), eps);
  }
  if (x.scalar_type() != at::kBFloat16) {
    return at::layer_norm(x + residual, {width}, gamma, beta, eps);
  }
  TORCH_CHECK(residual.scalar_type() == at::kBFloat16 && residual.sizes() == x.sizes(),
              "ResidualLayerNorm: residual must match x");
  const at::Tensor a = x.contiguous();
  const at::Tensor b = residual.contiguous();
  const at::Tensor scale = gamma.to(at::kFloat).contiguous();
  const at::Tensor shift = beta.to(at::kFloat).contiguous();
  at::Tensor out = at::empty_like(a);
  const ResidualLayerNormParams params{
      reinterpret_cast<const uint16_t*>(a.data_ptr<at::BFloat16>()),
      reinterpret_cast<const uint16_t*>(b.data_ptr<at::BFloat16>()),
      scale.data_ptr<float>(),
      shift.data_ptr<float>(),
      reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>()),
      width,
      static_cast<float>(eps)};
  at::parallel_for(0, a.numel() / width, 64, [&params](int64_t begin, int64_t end) {
    ResidualLayerNormBf16Rows(params, begin, end);
  });
  return out;
}

}  // namespace docsparse
