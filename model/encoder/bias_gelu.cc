#include "model/encoder/bias_gelu.h"

#include <ATen/Parallel.h>

#include "kernels/bias_gelu.h"

namespace docsparse {

at::Tensor ProjectBiasGeluBf16(const at::Tensor& x, const at::Tensor& weight,
                               const at::Tensor& bias, bool tanh_form) {
  TORCH_CHECK(x.scalar_type() == at::kBFloat16 && weight.scalar_type() == at::kBFloat16 &&
                  bias.scalar_type() == at::kBFloat16,
              "ProjectBiasGeluBf16: bf16 tensors expected");
  at::Tensor out = at::linear(x, weight).contiguous();
  const at::Tensor shift = bias.contiguous();
  const int64_t width = out.size(-1);
  const BiasGeluParams params{reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>()),
                              reinterpret_cast<const uint16_t*>(shift.data_ptr<at::BFloat16>()),
                              width, tanh_form};
  at::parallel_for(0, out.numel() / width, 16,
                   [&params](int64_t begin, int64_t end) { BiasGeluBf16Rows(params, begin, end); });
  return out;
}

}  // namespace docsparse
