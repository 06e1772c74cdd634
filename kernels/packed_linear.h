// A linear layer y = x·Wᵀ + b on oneDNN's matmul with its weights reordered
// once, at load, into the blocked layout the chosen kernel reads (on AMX
// machines brgemm's bf16 tiles, on AVX-512 ones its fp32 panels).
//
// LibTorch's at::linear reaches the same oneDNN matmul for bf16, but hands it
// the weights in their plain layout and the bias as a broadcast copy, so the
// kernel repacks the weights at every call: [512 x 384] x [384 x 1536] ran at
// ~1.7 TFLOP/s there and ~3.3 TFLOP/s here (docs/BENCHMARKS.md). For fp32
// oneDNN's brgemm also beats OpenBLAS's sgemm (~380 against ~310 GFLOP/s).
//
// A oneDNN primitive is compiled for a fixed number of rows (a runtime row
// count falls back to oneDNN's reference kernel, ~1,000x slower in 2.6), so a
// product runs as chunks of a few fixed row counts, each compiled once per
// layer (packed_linear.cc: NextChunkRows); compiling one costs well under a
// millisecond.
#ifndef DOCSPARSE_KERNELS_PACKED_LINEAR_H_
#define DOCSPARSE_KERNELS_PACKED_LINEAR_H_

#include <cstdint>
#include <memory>
#include <string>

namespace docsparse {

// The element type of x and y (the bias and every sum stay fp32).
enum class LinearElement { kFp32, kBf16 };

// The weights: in the element type, or int8 (per-output-channel scales) with
// x quantized per row at every call and int32 sums (kernels/int8_rows.h):
// AMX-INT8 tiles or VNNI through oneDNN where the CPU has them; elsewhere
// our VPMADDUBSW kernel for every row count (int8_gemm_avx2.h; oneDNN's
// AVX2 int8 GEMM for bf16 activations).
enum class LinearWeights { kElementType, kInt8 };

// An activation applied to the fp32 sum (bias included) before it is written,
// inside the product (a oneDNN post-op): the feed-forward's GELU then costs no
// pass of its own over the intermediate. Element-type weights, and int8
// weights where TakesActivation says so (there bias and GELU are one pass
// after the product, kernels/bias_gelu.h).
enum class LinearActivation { kNone, kGeluErf, kGeluTanh, kRelu };

class PackedLinear {
 public:
  // Packs `weight` [out_features, in_features] (fp32, row-major) and copies
  // `bias` [out_features] (fp32; null for none). Returns null where oneDNN has
  // no matmul for `element` on this CPU (bf16 without AVX-512), and for an
  // activation where TakesActivation is false.
  static std::unique_ptr<PackedLinear> Create(
      const float* weight, const float* bias, int64_t out_features, int64_t in_features,
      LinearElement element, LinearWeights weights = LinearWeights::kElementType,
      LinearActivation activation = LinearActivation::kNone);
  // Whether Create applies an activation for these element and weight types
  // on this CPU: always for element-type weights; for int8 ones where they
  // run on int8_gemm_avx2 (oneDNN's int8 products take no post-op here).
  static bool TakesActivation(LinearElement element, LinearWeights weights);
  ~PackedLinear();
  PackedLinear(const PackedLinear&) = delete;
  PackedLinear& operator=(const PackedLinear&) = delete;

  // y[rows, out_features] = activation(x[rows, in_features]·Wᵀ + bias), both row-major
  // and contiguous, of the element type. Safe to call from several threads.
  void Run(const void* x, int64_t rows, void* y) const;

  // Rows of the product at a time, for callers that put them elsewhere than
  // one row-major matrix (the encoder's q, k and v, head by head):
  // kStagingRows rows into a staging buffer of the calling thread's, which
  // stays in L2, then consume(staged, first_row, count) on the calling
  // thread, which must be done with them before it returns.
  static constexpr int64_t kStagingRows = 256;
  template <typename Consume>
  void RunStaged(const void* x, int64_t rows, Consume&& consume) const {
    void* staged = StagingBuffer();
    const auto* from = static_cast<const uint8_t*>(x);
    for (int64_t first = 0; first < rows; first += kStagingRows) {
      const int64_t count = rows - first < kStagingRows ? rows - first : kStagingRows;
      Run(from + first * in_row_bytes(), count, staged);
      consume(static_cast<const void*>(staged), first, count);
    }
  }

  // The kernel: "onednn:" and oneDNN's name for the one it chose (e.g.
  // "onednn:brg:avx512_core_amx_bf16"), or "docsparse:int8_gemm_avx2".
  const std::string& implementation() const;

  // Bytes of one row of x and of y.
  int64_t in_row_bytes() const;
  int64_t out_row_bytes() const;

  // How many row counts have a compiled product so far: at most 69, however
  // many different row counts Run saw (packed_linear.cc, NextChunkRows).
  size_t compiled_row_counts() const;

 private:
  struct State;
  explicit PackedLinear(std::unique_ptr<State> state);
  // The calling thread's staging buffer, grown to kStagingRows of y.
  void* StagingBuffer() const;
  std::unique_ptr<State> state_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_PACKED_LINEAR_H_
