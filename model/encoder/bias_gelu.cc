#include "model/encoder/bias_gelu.h"

#include <ATen/Parallel.h>

#include "kernels/bias_gelu.h"

namespace docsparse {

at::Tensor BiasGeluBf16(at::Tensor product, const at::Tensor& bias, bool tanh_form) {
  TORCH_CHECK(product.scalar_type() == at::kBFloat16 && bias.scalar_type() == at::kBFloat16,
              "BiasGeluBf16: bf16 tensors expected");
  TORCH_CHECK(product.is_contiguous() && bias.dim() == 1 && bias.size(0) == product.size(-1),
              "BiasGeluBf16: a contiguous product and a bias of its width expected");
  const at::Tensor shift = bias.contiguous();
  const int64_t width = product.size(-1);
  const BiasGeluParams params{reinterpret_cast<uint16_t*>(product.data_ptr<at::BFloat16>()),
                              reinterpret_cast<const uint16_t*>(shift.data_ptr<at::BFloat16>()),
                              width, tanh_form};
  at::parallel_for(0, product.numel() / width, 16,
                   [&params](int64_t begin, int64_t end) { BiasGeluBf16Rows(params, begin, end); });
  return product;
}

}  // namespace docsparse
