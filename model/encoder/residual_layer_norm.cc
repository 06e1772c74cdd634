#include "model/encoder/residual_layer_norm.h"

#include <ATen/Parallel.h>

#include <type_traits>

#include "kernels/residual_layer_norm.h"

namespace docsparse {
namespace {

template <typename Element>
void NormalizeOnCpu(const at::Tensor& x, const at::Tensor& residual, const at::Tensor& gamma,
                    const at::Tensor& beta, double eps, const at::Tensor& out) {
  const int64_t width = x.size(-1);
  const at::Tensor a = x.contiguous();
  const at::Tensor b = residual.contiguous();
  const at::Tensor scale = gamma.to(at::kFloat).contiguous();
  const at::Tensor shift = beta.to(at::kFloat).contiguous();
  const ResidualLayerNormRowsParams<Element> params{static_cast<const Element*>(a.data_ptr()),
                                                    static_cast<const Element*>(b.data_ptr()),
                                                    scale.data_ptr<float>(),
                                                    shift.data_ptr<float>(),
                                                    static_cast<Element*>(out.data_ptr()),
                                                    width,
                                                    static_cast<float>(eps)};
  at::parallel_for(0, a.numel() / width, 64, [&params](int64_t begin, int64_t end) {
    if constexpr (std::is_same_v<Element, float>) {
      ResidualLayerNormFp32Rows(params, begin, end);
    } else {
      ResidualLayerNormBf16Rows(params, begin, end);
    }
  });
}

}  // namespace

at::Tensor ResidualLayerNorm(const at::Tensor& x, const at::Tensor& residual,
                             const at::Tensor& gamma, const at::Tensor& beta, double eps,
                             const at::Tensor& out) {
  const int64_t width = x.size(-1);
  // Our kernel is the CPU's; a device's LayerNorm accumulates in fp32
  // already, with gamma and beta in x's type (the encoder keeps them so).
  if (!x.is_cpu()) {
    at::Tensor normed = at::layer_norm(x + residual, {width}, gamma.to(x.scalar_type()),
                                       beta.to(x.scalar_type()), eps);
    return out.defined() ? out.copy_(normed) : normed;
  }
  const at::ScalarType type = x.scalar_type();
  TORCH_CHECK(type == at::kFloat || type == at::kBFloat16,
              "ResidualLayerNorm: x must be fp32 or bf16");
  TORCH_CHECK(residual.scalar_type() == type && residual.sizes() == x.sizes(),
              "ResidualLayerNorm: residual must match x");
  TORCH_CHECK(!out.defined() ||
                  (out.scalar_type() == type && out.sizes() == x.sizes() && out.is_contiguous()),
              "ResidualLayerNorm: out must be contiguous and match x");
  const at::Tensor result = out.defined() ? out : at::empty(x.sizes(), x.options());
  if (type == at::kFloat) {
    NormalizeOnCpu<float>(x, residual, gamma, beta, eps, result);
  } else {
    NormalizeOnCpu<uint16_t>(x, residual, gamma, beta, eps, result);
  }
  return result;
}

}  // namespace docsparse
