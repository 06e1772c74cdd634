// The arithmetic precision an encoder model runs in, as docsparse.json
// ("precision") and the server's --precision flag name it.
#ifndef DOCSPARSE_MODEL_CHECKPOINT_PRECISION_H_
#define DOCSPARSE_MODEL_CHECKPOINT_PRECISION_H_

#include <optional>
#include <string_view>

namespace docsparse {

enum class Precision {
  kAuto,  // bf16 where the CPU multiplies bf16 natively (AMX, AVX512-BF16), else fp32
  kFp32,
  kBf16,  // bf16 parameters and activations, fp32 accumulation (linear_precision.h)
};

std::string_view PrecisionName(Precision precision);  // "auto", "fp32", "bf16"
std::optional<Precision> ParsePrecision(std::string_view name);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_CHECKPOINT_PRECISION_H_
