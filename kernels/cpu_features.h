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
  // int8 dot products that sum in int32 (AVX512-VNNI or AVX-VNNI). Without
  // them int8 products go through VPMADDUBSW, whose pairs of products
  // saturate at int16.
  bool int8_dot = false;
};

// The environment variable that caps the instruction sets our kernels use,
// as ONEDNN_MAX_CPU_ISA caps oneDNN's: "amx", "avx512_bf16", "avx512",
// "avx2" or "baseline" (the names IsaName prints); unset or empty: no cap. A
// cap only removes what the CPU has, so that the code paths of an older kind
// of machine (AVX2 only, say) can be tested and measured on a newer one;
// kernels/packed_linear caps oneDNN's products to match (OpenBLAS, which
// LibTorch's fp32 fallbacks call, takes OPENBLAS_CORETYPE=Haswell). Any
// other value stops the process with a message naming the variable.
inline constexpr char kMaxCpuIsaVariable[] = "DOCSPARSE_MAX_CPU_ISA";

// Removes from `features` what lies above `max_isa` (one of the names
// above, or empty for none); false, and `features` untouched, for any other
// name.
bool CapCpuFeatures(std::string_view max_isa, CpuFeatures* features);

// This machine's features under kMaxCpuIsaVariable's cap; computed on first
// use, then cached (thread-safe).
const CpuFeatures& HostCpuFeatures();

// kMaxCpuIsaVariable's value in this process ("" where unset): whether, and
// where, HostCpuFeatures is capped. Read once.
std::string_view HostMaxCpuIsa();

// The best instruction set among the ones above, as benchmarks and the cost
// report print it: "amx", "avx512_bf16", "avx512", "avx2" or "baseline".
std::string_view IsaName(const CpuFeatures& features);

// True where a bf16 matrix product runs on dedicated hardware (AMX tiles or
// AVX512-BF16 dot products), so that bf16 is faster than fp32 rather than an
// emulation of it.
bool HasNativeBf16(const CpuFeatures& features);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_CPU_FEATURES_H_
