// Products with int8 weights on CPUs without int32 dot products (AVX2
// without VNNI), of any number of rows: an encoder's int8 linear layers and
// a summarizer's decode steps there.
//
// oneDNN 2.6 runs such a product through gemm:jit, which reorders the weights
// at every call and reached 140 GFLOP/s on a 2-core Zen 3, no faster than
// its fp32 (148), so int8 gained nothing on that kind (docs/BENCHMARKS.md,
// "CPU engine, sixteenth part"). Yet the instructions are there: VPMADDUBSW
// multiplies 32 unsigned bytes by 32 signed ones and adds neighbouring
// products in int16, VPMADDWD against ones adds those pairs into int32, and
// VPADDD accumulates: 32 multiply-adds in three instructions, of which the
// two multiplies issue two a cycle on Zen 3, where an fp32 FMA does 8
// (measured in registers: 98 against 51 G multiply-adds a second a core).
//
// The rows are quantized per row as the oneDNN path does (int8_rows.h,
// symmetric, |q| <= 127) and stored as the unsigned bytes q + 128; the
// weights have 7 bits (|w| <= 63, packed_linear.cc: WeightLevels), so a pair
// of products never saturates int16 (2 · 255 · 63 = 32,130). The + 128 is
// taken back per channel (128 · Σk w), and the sums leave the registers
// already scaled to fp32: y = sum · row scale · channel scale + bias.
#ifndef DOCSPARSE_KERNELS_INT8_GEMM_AVX2_H_
#define DOCSPARSE_KERNELS_INT8_GEMM_AVX2_H_

#include <cstdint>
#include <vector>

#include "kernels/aligned_vector.h"

namespace docsparse {

// Output channels per panel of the packed weights: two AVX2 vectors of int32
// sums.
inline constexpr int64_t kInt8GemmPanel = 16;

// Row-major int8 weights [out_features, in_features] as the kernel reads
// them: panels of kInt8GemmPanel channels; in each, for every group of four
// inputs, the 16 channels' four weights side by side (64 bytes, one
// cache line: two vector loads); zeros past the last input and channel.
struct Int8GemmWeights {
  CacheLineVector<int8_t> packed;
  std::vector<int32_t> compensation;  // [panels · 16]: 128 · Σk w[n][k]
  int64_t in_features = 0;
  int64_t out_features = 0;

  int64_t input_groups() const { return (in_features + 3) / 4; }
  int64_t panels() const { return (out_features + kInt8GemmPanel - 1) / kInt8GemmPanel; }
};

Int8GemmWeights PackInt8GemmWeights(const int8_t* weights, int64_t out_features,
                                    int64_t in_features);

struct Int8GemmParams {
  const Int8GemmWeights* weights;
  // [rows, in_features] q + 128 (QuantizeRowsParams::plus_128), rows
  // in_features bytes apart; readable up to 3 bytes past the last row (the
  // last group of four inputs is read whole; its weights past in_features
  // are zero).
  const uint8_t* x;
  const float* row_scales;      // [rows]: x ≈ q · scale
  const float* channel_scales;  // [out_features]: w ≈ weights · scale
  const float* bias;            // [out_features], or null
  float* y;                     // [rows, out_features]
  int64_t rows;
};

// y for every row and the channels of panels [panel_begin, panel_end):
// panels are independent, so threads split them. The CPU must have AVX2
// (HostCpuFeatures().avx2_fma).
void Int8GemmAvx2(const Int8GemmParams& params, int64_t panel_begin, int64_t panel_end);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_INT8_GEMM_AVX2_H_
