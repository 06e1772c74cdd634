#include "model/encoder/linear_precision.h"

#include "absl/strings/str_cat.h"

namespace docsparse {
namespace {

// Under kMaxCpuIsaVariable's cap (kernels/cpu_features.h), where the capped
// CPU has no bf16 products, LibTorch's own bf16 operations must not take
// oneDNN's either: LibTorch chooses by the CPU's flags, which the cap leaves
// alone, and oneDNN, capped, has none to give. LibTorch's own loops run
// instead, as on such a CPU.
void LibTorchFollowsTheIsaCap() {
  static const bool applied = [] {
    if (HostMaxCpuIsa().empty() || HasNativeBf16(HostCpuFeatures())) return false;
    at::globalContext().setUserEnabledMkldnn(false);
    return true;
  }();
  (void)applied;
}

}  // namespace

Precision ResolvePrecision(Precision requested, const CpuFeatures& cpu) {
  if (requested != Precision::kAuto) return requested;
  if (HasNativeBf16(cpu)) return Precision::kBf16;
  // AVX2 without AVX-512: int8 products on kernels/int8_gemm_avx2 run at
  // twice the fp32 rate there (a 512-token MiniLM forward 1.6x faster), and
  // int8 passes the gate (embedding cosine to fp32 0.997 at 512 to 16,384
  // tokens, gate 0.995). AVX-512 machines without bf16 keep fp32: nobody
  // has measured int8 on them.
  if (cpu.avx2_fma && !cpu.avx512f) return Precision::kInt8;
  return Precision::kFp32;
}

at::ScalarType ActivationType(Precision precision, const CpuFeatures& cpu) {
  LibTorchFollowsTheIsaCap();
  if (precision == Precision::kFp16) return at::kHalf;
  const bool bf16 =
      precision == Precision::kBf16 || (precision == Precision::kInt8 && HasNativeBf16(cpu));
  return bf16 ? at::kBFloat16 : at::kFloat;
}

Precision AttentionPrecision(at::ScalarType type) {
  if (type == at::kBFloat16) return Precision::kBf16;
  if (type == at::kHalf) return Precision::kFp16;
  return Precision::kFp32;
}

absl::Status CheckPrecisionOn(Precision precision, at::Device device, const char* model) {
  if (!device.is_cpu() && precision == Precision::kInt8) {
    return absl::InvalidArgumentError(
        absl::StrCat("precision: \"int8\": ", model, " runs int8 on the CPU only; on ",
                     device.str(), " write \"bf16\", \"fp16\", \"fp32\" or \"auto\""));
  }
  if (device.is_cpu() && precision == Precision::kFp16) {
    return absl::InvalidArgumentError(
        absl::StrCat("precision: \"fp16\": ", model,
                     " runs fp16 on a CUDA device only (--device=cuda); on the CPU write "
                     "\"bf16\", \"int8\", \"fp32\" or \"auto\""));
  }
  return absl::OkStatus();
}

}  // namespace docsparse
