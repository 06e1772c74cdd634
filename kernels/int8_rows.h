// The two passes around an int8 product (kernels/packed_linear.h, int8
// weights): activations quantized per row on the way in, int32 sums scaled
// back on the way out. Dynamic quantization as ONNX Runtime and PyTorch do
// it: each row of x gets its own scale (max |x| / 127, symmetric, so the
// product needs no zero-point correction), each output channel of the
// weights its own, and y = sum · row_scale · channel_scale + bias in fp32.
// AVX-512 where the CPU has it (chosen at run time), the quantization on AVX2
// too, portable C++ elsewhere.
#ifndef DOCSPARSE_KERNELS_INT8_ROWS_H_
#define DOCSPARSE_KERNELS_INT8_ROWS_H_

#include <cstdint>

namespace docsparse {

struct QuantizeRowsParams {
  const void* x;  // [rows, width] fp32, or bf16 bits when bf16
  bool bf16;
  int8_t* q;      // [rows, width] round(x / scale), in [-127, 127]
  float* scales;  // [rows] max |x| / 127 (0 for a row of zeros)
  int64_t width;
  // Store q + 128 as an unsigned byte (q ^ 0x80) instead of q: the unsigned
  // operand of VPMADDUBSW (int8_gemm_avx2.h).
  bool plus_128 = false;
};

struct DequantizeRowsParams {
  const int32_t* sums;          // [rows, width] int8 products
  const float* row_scales;      // [rows]
  const float* channel_scales;  // [width]
  const float* bias;            // [width], or null
  void* y;                      // [rows, width] fp32, or bf16 bits when bf16
  bool bf16;
  int64_t width;
};

// Rows [row_begin, row_end); rows are independent.
void QuantizeRowsInt8(const QuantizeRowsParams& params, int64_t row_begin, int64_t row_end);
void DequantizeRowsInt8(const DequantizeRowsParams& params, int64_t row_begin, int64_t row_end);

// The portable implementations, for tests of the dispatched ones.
void QuantizeRowsInt8Portable(const QuantizeRowsParams& params, int64_t row_begin, int64_t row_end);
void DequantizeRowsInt8Portable(const DequantizeRowsParams& params, int64_t row_begin,
                                int64_t row_end);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_INT8_ROWS_H_
