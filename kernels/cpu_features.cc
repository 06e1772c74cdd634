#include "kernels/cpu_features.h"

#include <cpuid.h>

#include <cstdint>

namespace docsparse {
namespace {

// XCR0: which register states the OS saves on a context switch. A feature
// whose state the OS does not save must not be used, whatever cpuid says.
uint64_t EnabledRegisterState() {
  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (!__get_cpuid(1, &eax, &ebx, &ecx, &edx)) return 0;
  constexpr uint32_t kOsxsave = 1u << 27;
  if ((ecx & kOsxsave) == 0) return 0;
  uint32_t low = 0, high = 0;
  __asm__ volatile("xgetbv" : "=a"(low), "=d"(high) : "c"(0));
  return (static_cast<uint64_t>(high) << 32) | low;
}

CpuFeatures Detect() {
  CpuFeatures features;
  __builtin_cpu_init();
  features.avx2_fma = __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");

  const uint64_t xcr0 = EnabledRegisterState();
  constexpr uint64_t kAvx512State = 0xE6;     // SSE, AVX, opmask, ZMM_Hi256, Hi16_ZMM
  constexpr uint64_t kAmxState = 3ull << 17;  // XTILECFG, XTILEDATA
  const bool avx512_state = (xcr0 & kAvx512State) == kAvx512State;
  const bool amx_state = (xcr0 & kAmxState) == kAmxState;

  uint32_t eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx)) {
    features.avx512f = avx512_state && (ebx & (1u << 16)) != 0;
    features.avx512bw_vl = features.avx512f && (ebx & (1u << 30)) != 0 && (ebx & (1u << 31)) != 0;
    features.avx512dq = features.avx512f && (ebx & (1u << 17)) != 0;
    const bool amx_tile = (edx & (1u << 24)) != 0;
    features.amx_bf16 = amx_state && amx_tile && (edx & (1u << 22)) != 0;
    features.amx_int8 = amx_state && amx_tile && (edx & (1u << 25)) != 0;
  }
  if (features.avx512f && __get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) {
    features.avx512_bf16 = (eax & (1u << 5)) != 0;
  }
  return features;
}

}  // namespace

const CpuFeatures& HostCpuFeatures() {
  static const CpuFeatures features = Detect();
  return features;
}

std::string_view IsaName(const CpuFeatures& features) {
  if (features.amx_bf16) return "amx";
  if (features.avx512_bf16) return "avx512_bf16";
  if (features.avx512f) return "avx512";
  if (features.avx2_fma) return "avx2";
  return "baseline";
}

bool HasNativeBf16(const CpuFeatures& features) {
  return features.amx_bf16 || features.avx512_bf16;
}

}  // namespace docsparse
