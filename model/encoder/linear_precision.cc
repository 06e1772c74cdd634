#include "model/encoder/linear_precision.h"

namespace docsparse {

Precision ResolvePrecision(Precision requested, const CpuFeatures& cpu) {
  if (requested != Precision::kAuto) return requested;
  return HasNativeBf16(cpu) ? Precision::kBf16 : Precision::kFp32;
}

at::ScalarType ActivationType(Precision precision) {
  return precision == Precision::kBf16 ? at::kBFloat16 : at::kFloat;
}

at::Tensor ParameterForPrecision(const at::Tensor& parameter, Precision precision) {
  return parameter.to(ActivationType(precision)).contiguous();
}

at::Tensor Project(const at::Tensor& x, const at::Tensor& weight, const at::Tensor& bias) {
  return at::linear(x.to(weight.scalar_type()), weight, bias);
}

}  // namespace docsparse
