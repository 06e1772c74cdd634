// LayerNorm(x + residual) over rows of bf16 activations, in one pass over
// memory: each row is read once (both inputs), its statistics accumulated in
// fp32 (two passes over an fp32 copy of the row, for a variance without
// cancellation), and the normalised row written back as bf16.
//
// It replaces LibTorch's add followed by its bf16 layer_norm, which on the
// AMX machines ran 4x slower than the fp32 one and took half the non-matmul
// time of a bf16 encoder layer. AVX-512 where the CPU has it (chosen at run
// time), portable C++ elsewhere; both round to nearest even.
#ifndef DOCSPARSE_KERNELS_RESIDUAL_LAYER_NORM_H_
#define DOCSPARSE_KERNELS_RESIDUAL_LAYER_NORM_H_

#include <cstdint>

namespace docsparse {

struct ResidualLayerNormParams {
  const uint16_t* x;         // [rows, width] bf16 bits
  const uint16_t* residual;  // [rows, width] bf16 bits, or nullptr for LayerNorm(x)
  const float* gamma;        // [width]
  const float* beta;         // [width]
  uint16_t* out;             // [rows, width] bf16 bits; may alias x or residual
  int64_t width;
  float eps;
};

// Rows [row_begin, row_end); rows are independent, so callers split them
// over threads.
void ResidualLayerNormBf16Rows(const ResidualLayerNormParams& params, int64_t row_begin,
                               int64_t row_end);

// The portable implementation, for tests of the dispatched one.
void ResidualLayerNormBf16RowsPortable(const ResidualLayerNormParams& params, int64_t row_begin,
                                       int64_t row_end);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_RESIDUAL_LAYER_NORM_H_
