// What the CPU we run on can do, read once at run time (cpuid and the OS's
// enabled register state), so that kernels are chosen by the machine that
// runs them, never by the one that built them (STYLE.md).
#ifndef DOCSPARSE_KERNELS_CPU_FEATURES_H_
#define DOCSPARSE_KERNELS_CPU_FEATURES_H_

#include <string_view>

namespace docsparse {

struct CpuFeatures {
  bool avx2_fma = false;
  bool avx512f = false;      // with AVX-512 state enabled by the OS
  bool avx512bw_vl = false;  // byte/word ops and their 256-bit forms
  bool avx512dq = false;     // VREDUCEPS and the other doubleword/quadword ops
  bool avx512_bf16 = false;  // VDPBF16PS
  bool amx_bf16 = false;     // AMX tiles with BF16, tile state enabled by the OS
  bool amx_int8 = false;
};

// This machine's features; computed on first use, then cached (thread-safe).
const CpuFeatures& HostCpuFeatures();

// The best instruction set among the ones above, as benchmarks and the cost
// report print it: "amx", "avx512_bf16", "avx512", "avx2" or "baseline".
std::string_view IsaName(const CpuFeatures& features);

// True where a bf16 matrix product runs on dedicated hardware (AMX tiles or
// AVX512-BF16 dot products), so that bf16 is faster than fp32 rather than an
// emulation of it.
bool HasNativeBf16(const CpuFeatures& features);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_CPU_FEATURES_H_
