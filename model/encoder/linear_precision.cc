#include "model/encoder/linear_precision.h"

namespace docsparse {

Precision ResolvePrecision(Precision requested, const CpuFeatures& cpu) {
  if (requested != Precision::kAuto) return requested;
  return HasNativeBf16(cpu) ? Precision::kBf16 : Precision::kFp32;
}

at::Tensor WeightForPrecision(const at::Tensor& weight, Precision precision) {
  if (precision != Precision::kBf16) return weight;
  return weight.to(at::kBFloat16).contiguous();
}

at::Tensor Project(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  if (weight.scalar_type() == at::kFloat) return at::linear(x, weight, bias);
  return at::linear(x.to(weight.scalar_type()), weight).to(at::kFloat).add_(bias);
}

}  // namespace docsparse
