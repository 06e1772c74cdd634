#include "model/encoder/linear_precision.h"

namespace docsparse {

Precision ResolvePrecision(Precision requested, const CpuFeatures& cpu) {
  if (requested != Precision::kAuto) return requested;
  return HasNativeBf16(cpu) ? Precision::kBf16 : Precision::kFp32;
}

at::ScalarType ActivationType(Precision precision, const CpuFeatures& cpu) {
  const bool bf16 =
      precision == Precision::kBf16 || (precision == Precision::kInt8 && HasNativeBf16(cpu));
  return bf16 ? at::kBFloat16 : at::kFloat;
}

}  // namespace docsparse
