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
  // int8 linear layers (dynamic per-row activation scales, per-channel weight
  // scales, int32 sums); everything else as bf16 where the CPU has native
  // bf16, else fp32. Never chosen by kAuto: opt-in, like OpenVINO's int8.
  kInt8,
  // fp16 parameters and activations on a CUDA device (cuBLAS and our CUDA
  // attention kernels, fp32 accumulation), as TEI's and vLLM's float16. Not
  // on the CPU, which has no fp16 products here.
  kFp16,
};

// Every precision, in the order docsparse.json's and --precision's errors
// list them.
inline constexpr Precision kPrecisions[] = {Precision::kAuto, Precision::kFp32, Precision::kBf16,
                                            Precision::kInt8, Precision::kFp16};

std::string_view PrecisionName(Precision precision);  // "auto", "fp32", "bf16", "int8", "fp16"
std::optional<Precision> ParsePrecision(std::string_view name);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_CHECKPOINT_PRECISION_H_
