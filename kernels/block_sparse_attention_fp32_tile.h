// The SIMD inner loops of the fp32 block-sparse executor: one key tile
// against a block of queries (scores, online-softmax update, probabilities x
// values), with the query rows in the vector lanes, for AVX-512 (16 lanes)
// and AVX2+FMA (8 lanes). Compiled with per-function target attributes, so
// the library still runs on CPUs without them (the caller checks
// HostCpuFeatures() first).
#ifndef DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_FP32_TILE_H_
#define DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_FP32_TILE_H_

#include <cstdint>

#include "kernels/block_sparse_plan.h"

namespace docsparse {

// A query block with its rows in the vector lanes of kLanes floats, in
// groups of two vectors (kGroupRows rows; one vector for the last group
// where the padded block is not a multiple of kGroupRows). Each group's
// queries and outputs are stored transposed, [head_dim][group rows], so a
// score is a query vector times one key element broadcast, keys are read
// where they lie, and the softmax runs down the lanes: one max, one
// exponential and one sum per kLanes rows, no horizontal reduction. The
// rows-in-keys form this replaced spent a quarter (AVX-512) to a third
// (AVX2) of its time outside its products: key transposes, per-row
// reductions and scalar exponentials.
//
// Written once in fp32_lanes_executor.h, and instantiated for kLanes 16
// (block_sparse_attention_avx512.cc) and 8 (block_sparse_attention_avx2.cc).
template <int kLanes>
struct Fp32LanesBlock {
  static constexpr int32_t kGroupRows = 2 * kLanes;

  float* q_t;           // [padded_rows · head_dim] the groups' scaled queries
  float* acc_t;         // [padded_rows · head_dim] their unnormalised outputs, zeroed
  float* scores;        // [tile keys · kGroupRows] one group's scores
  float* row_max;       // [padded_rows] -inf at first
  float* row_sum;       // [padded_rows] 0 at first
  int32_t padded_rows;  // the block's rows rounded up to kLanes
  int32_t head_dim;     // a multiple of kLanes
  // A sliding span's mask over the current tile (MaskSlidingScores), applied
  // between the scores and the softmax; mask_slide.width 0: none.
  KeySpan mask_span = {0, 0};
  KeySlide mask_slide = {0, 0};
  int32_t first_query = 0;  // the query of row 0
  int32_t tile_begin = 0;   // the first key of the current tile

  static int32_t PaddedRows(int32_t rows) { return (rows + kLanes - 1) / kLanes * kLanes; }
  // Reads the block's `rows` queries (rows `row_stride` floats apart),
  // scaled; the padding rows are zero queries.
  void LoadQueries(const float* q, int64_t row_stride, int32_t rows, float scale) const;
  // Folds keys and values [tile_keys, head_dim], read in place, into every
  // group's softmax state.
  void Run(const float* keys, int64_t key_stride, const float* values, int64_t value_stride,
           int32_t tile_keys) const;
  // Writes the first `rows` normalised outputs (0 where a row had no key).
  void StoreOutput(float* out, int64_t row_stride, int32_t rows) const;
};

template <>
void Fp32LanesBlock<16>::LoadQueries(const float* q, int64_t row_stride, int32_t rows,
                                     float scale) const;
template <>
void Fp32LanesBlock<16>::Run(const float* keys, int64_t key_stride, const float* values,
                             int64_t value_stride, int32_t tile_keys) const;
template <>
void Fp32LanesBlock<16>::StoreOutput(float* out, int64_t row_stride, int32_t rows) const;
template <>
void Fp32LanesBlock<8>::LoadQueries(const float* q, int64_t row_stride, int32_t rows,
                                    float scale) const;
template <>
void Fp32LanesBlock<8>::Run(const float* keys, int64_t key_stride, const float* values,
                            int64_t value_stride, int32_t tile_keys) const;
template <>
void Fp32LanesBlock<8>::StoreOutput(float* out, int64_t row_stride, int32_t rows) const;

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_FP32_TILE_H_
