// LayerNorm(x + residual) over rows of bf16 or fp32 activations, in one pass
// over memory: each row is read once (both inputs), its statistics
// accumulated in fp32 (two passes over an fp32 copy of the row, for a
// variance without cancellation), and the normalised row written back in the
// activations' type.
//
// It replaces LibTorch's add followed by its layer_norm: in bf16 that
// layer_norm ran 4x slower than the fp32 one on the AMX machines and took half
// the non-matmul time of a bf16 encoder layer; in fp32 the add's temporary
// made it two passes over memory. AVX-512 where the CPU has it (chosen at run
// time), portable C++ elsewhere; bf16 rounds to nearest even.
#ifndef DOCSPARSE_KERNELS_RESIDUAL_LAYER_NORM_H_
#define DOCSPARSE_KERNELS_RESIDUAL_LAYER_NORM_H_

#include <cstdint>

namespace docsparse {

// Element: uint16_t (bf16 bits) or float.
template <typename Element>
struct ResidualLayerNormRowsParams {
  const Element* x;         // [rows, width]
  const Element* residual;  // [rows, width], or nullptr for LayerNorm(x)
  const float* gamma;       // [width]
  const float* beta;        // [width]
  Element* out;             // [rows, width]; may alias x or residual
  int64_t width;
  float eps;
};
using ResidualLayerNormParams = ResidualLayerNormRowsParams<uint16_t>;
using ResidualLayerNormFp32Params = ResidualLayerNormRowsParams<float>;

// Rows [row_begin, row_end); rows are independent, so callers split them
// over threads.
void ResidualLayerNormBf16Rows(const ResidualLayerNormParams& params, int64_t row_begin,
                               int64_t row_end);

// The portable implementation, for tests of the dispatched one.
void ResidualLayerNormBf16RowsPortable(const ResidualLayerNormParams& params, int64_t row_begin,
                                       int64_t row_end);

void ResidualLayerNormFp32Rows(const ResidualLayerNormFp32Params& params, int64_t row_begin,
                               int64_t row_end);
void ResidualLayerNormFp32RowsPortable(const ResidualLayerNormFp32Params& params, int64_t row_begin,
                                       int64_t row_end);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_RESIDUAL_LAYER_NORM_H_
