#include "model/encoder/bias_gelu.h"

#include <ATen/Parallel.h>

#include "kernels/bias_gelu.h"

namespace docsparse {
namespace {

template <typename Element, typename Storage>
void RunRows(at::Tensor& product, const at::Tensor& bias, bool tanh_form,
             void (*rows)(const BiasGeluRowsParams<Element>&, int64_t, int64_t)) {
  const int64_t width = product.size(-1);
  const BiasGeluRowsParams<Element> params{
      reinterpret_cast<Element*>(product.data_ptr<Storage>()),
      reinterpret_cast<const Element*>(bias.data_ptr<Storage>()), width, tanh_form};
  at::parallel_for(0, product.numel() / width, 16,
                   [&params, rows](int64_t begin, int64_t end) { rows(params, begin, end); });
}

}  // namespace

at::Tensor BiasGelu(at::Tensor product, const at::Tensor& bias, bool tanh_form) {
  TORCH_CHECK(product.is_cpu() && product.scalar_type() == bias.scalar_type() &&
                  (product.scalar_type() == at::kBFloat16 || product.scalar_type() == at::kFloat),
              "BiasGelu: bf16 or fp32 CPU tensors of one type expected");
  TORCH_CHECK(product.is_contiguous() && bias.dim() == 1 && bias.size(0) == product.size(-1),
              "BiasGelu: a contiguous product and a bias of its width expected");
  const at::Tensor shift = bias.contiguous();
  if (product.scalar_type() == at::kBFloat16) {
    RunRows<uint16_t, at::BFloat16>(product, shift, tanh_form, BiasGeluBf16Rows);
  } else {
    RunRows<float, float>(product, shift, tanh_form, BiasGeluFp32Rows);
  }
  return product;
}

}  // namespace docsparse
