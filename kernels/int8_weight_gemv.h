// A few rows times int8 weights, the weights widened to fp32 in registers and
// the rows left unquantized: the products of a decode step (one row per beam
// and sequence) on CPUs without int32 dot products (AVX2 without VNNI).
//
// There oneDNN 2.6 runs an s8 x s8 product through gemm:jit, which packs
// the weights at every call: a BART-base-shaped decode step at int8 took
// 82 ms a token against 24 ms in fp32 on a 2-core EPYC (Zen 3), and
// CTranslate2's int8 26 ms (docs/BENCHMARKS.md, "CPU engine, sixteenth
// part"). A step reads every weight once for a handful of rows, so it is
// bound by memory, and int8 weights are a quarter of fp32's bytes; the
// activations stay fp32 (more exact than the per-row quantization of the
// large-row path, never less).
#ifndef DOCSPARSE_KERNELS_INT8_WEIGHT_GEMV_H_
#define DOCSPARSE_KERNELS_INT8_WEIGHT_GEMV_H_

#include <cstdint>
#include <vector>

namespace docsparse {

// Output channels per panel of the packed weights: two AVX2 vectors.
inline constexpr int64_t kInt8GemvPanel = 16;

// Row-major int8 weights [out_features, in_features] as the kernels read
// them: panels of kInt8GemvPanel channels, each [in_features][16] (for every
// input, the panel's 16 weights side by side), the last panel zero-padded.
// The kernels then multiply like a GEMM micro-kernel, one broadcast row
// element against 16 channels, with no horizontal sums: 1.5x the rate of
// the row-major dot products they replace (docs/BENCHMARKS.md, "CPU
// engine, seventeenth part").
std::vector<int8_t> PackInt8GemvWeights(const int8_t* weights, int64_t out_features,
                                        int64_t in_features);

struct Int8WeightGemvParams {
  const int8_t* packed_weights;  // PackInt8GemvWeights's layout
  const float* channel_scales;   // [out_features]: w ≈ weights · scale
  const float* bias;             // [out_features], or null
  const float* x;                // [rows, in_features], fp32
  float* y;                      // [rows, out_features], fp32
  int64_t rows;
  int64_t in_features;
  int64_t out_features;
};

// y = x · (weights · scales)ᵀ + bias for output channels [begin, end), begin
// a multiple of kInt8GemvPanel; channels are independent, so threads split
// them. AVX2 + FMA where the CPU has it, portable C++ elsewhere.
void Int8WeightGemv(const Int8WeightGemvParams& params, int64_t begin, int64_t end);
void Int8WeightGemvPortable(const Int8WeightGemvParams& params, int64_t begin, int64_t end);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_INT8_WEIGHT_GEMV_H_
