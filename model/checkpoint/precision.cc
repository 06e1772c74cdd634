#include "model/checkpoint/precision.h"

namespace docsparse {

std::string_view PrecisionName(Precision precision) {
  switch (precision) {
    case Precision::kAuto:
      return "auto";
    case Precision::kFp32:
      return "fp32";
    case Precision::kBf16:
      return "bf16";
    case Precision::kInt8:
      return "int8";
    case Precision::kFp16:
      return "fp16";
  }
  return "?";
}

std::optional<Precision> ParsePrecision(std::string_view name) {
  for (Precision precision : kPrecisions) {
    if (PrecisionName(precision) == name) return precision;
  }
  return std::nullopt;
}

}  // namespace docsparse
