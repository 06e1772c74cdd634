// GELU(x + bias) in place over rows of bf16 or fp32 activations, in one pass: the
// feed-forward's first product runs without its bias, and this adds it and
// applies the activation (erf GELU, or the tanh form of "gelu_new") in fp32
// (before rounding back to bf16). It replaces LibTorch's bias pass (addmm
// copies the bias into the output before the product) and its separate
// activation pass over the largest activations of an encoder layer.
// AVX-512 where the CPU has it (chosen at run time), portable C++ elsewhere.
#ifndef DOCSPARSE_KERNELS_BIAS_GELU_H_
#define DOCSPARSE_KERNELS_BIAS_GELU_H_

#include <cstdint>

namespace docsparse {

// Element: uint16_t (bf16 bits) or float.
template <typename Element>
struct BiasGeluRowsParams {
  Element* x;           // [rows, width], overwritten
  const Element* bias;  // [width]
  int64_t width;
  bool tanh_form;  // 0.5x(1 + tanh(√(2/π)(x + 0.044715x³))) instead of 0.5x(1 + erf(x/√2))
};
using BiasGeluParams = BiasGeluRowsParams<uint16_t>;
using BiasGeluFp32Params = BiasGeluRowsParams<float>;

// Rows [row_begin, row_end); rows are independent.
void BiasGeluBf16Rows(const BiasGeluParams& params, int64_t row_begin, int64_t row_end);
void BiasGeluFp32Rows(const BiasGeluFp32Params& params, int64_t row_begin, int64_t row_end);

// The portable implementations, for tests of the dispatched ones.
void BiasGeluBf16RowsPortable(const BiasGeluParams& params, int64_t row_begin, int64_t row_end);
void BiasGeluFp32RowsPortable(const BiasGeluFp32Params& params, int64_t row_begin, int64_t row_end);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_BIAS_GELU_H_
