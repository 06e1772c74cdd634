#include "kernels/cpu_features.h"

#include <cpuid.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string>

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
    features.int8_dot = features.avx512f && (ecx & (1u << 11)) != 0;  // AVX512_VNNI
    const bool amx_tile = (edx & (1u << 24)) != 0;
    features.amx_bf16 = amx_state && amx_tile && (edx & (1u << 22)) != 0;
    features.amx_int8 = amx_state && amx_tile && (edx & (1u << 25)) != 0;
  }
  if (__get_cpuid_count(7, 1, &eax, &ebx, &ecx, &edx)) {
    features.avx512_bf16 = features.avx512f && (eax & (1u << 5)) != 0;
    features.int8_dot = features.int8_dot || (features.avx2_fma && (eax & (1u << 4)) != 0);
  }
  return features;
}

}  // namespace

bool CapCpuFeatures(std::string_view max_isa, CpuFeatures* features) {
  CpuFeatures capped = *features;
  if (max_isa.empty() || max_isa == "amx") {
    // No cap.
  } else if (max_isa == "avx512_bf16") {
    capped.amx_bf16 = capped.amx_int8 = false;
  } else if (max_isa == "avx512") {
    capped.amx_bf16 = capped.amx_int8 = capped.avx512_bf16 = false;
  } else if (max_isa == "avx2" || max_isa == "baseline") {
    capped = CpuFeatures{};
    capped.avx2_fma = max_isa == "avx2" && features->avx2_fma;
  } else {
    return false;
  }
  *features = capped;
  return true;
}

std::string_view HostMaxCpuIsa() {
  static const std::string cap = [] {
    const char* value = std::getenv(kMaxCpuIsaVariable);
    return std::string(value != nullptr ? value : "");
  }();
  return cap;
}

const CpuFeatures& HostCpuFeatures() {
  static const CpuFeatures features = [] {
    CpuFeatures detected = Detect();
    const std::string_view cap = HostMaxCpuIsa();
    if (!CapCpuFeatures(cap, &detected)) {
      std::fprintf(stderr, "%s=%.*s: expected amx, avx512_bf16, avx512, avx2 or baseline\n",
                   kMaxCpuIsaVariable, static_cast<int>(cap.size()), cap.data());
      std::exit(2);
    }
    return detected;
  }();
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
