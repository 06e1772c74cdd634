// The SIMD inner loops of the fp32 block-sparse executor: one key tile
// against a block of queries (scores, online-softmax update, probabilities x
// values), for AVX2+FMA and for AVX-512. Compiled with per-function target
// attributes, so the library still runs on CPUs without them (the caller
// checks HostCpuFeatures() first).
#ifndef DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_FP32_TILE_H_
#define DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_FP32_TILE_H_

#include <cstdint>

#include "kernels/block_sparse_plan.h"

namespace docsparse {

// Views of one thread's scratch buffers for one query block.
struct Fp32Tile {
  const float* q;    // [rows, head_dim] scaled queries
  float* scores;     // [rows, stride]
  float* acc;        // [rows, head_dim]
  float* row_max;    // [rows]
  float* row_sum;    // [rows]
  float* keys_t;     // [head_dim, stride] transposed key tile
  int32_t rows;      // multiple of 4
  int32_t head_dim;  // multiple of 8 (AVX2) or 16 (AVX-512)
  int32_t stride;    // >= tile_keys rounded up to 16, a multiple of 16
  // A sliding span's mask over the tile (MaskSlidingScores), applied
  // between the scores and the softmax; slide.width 0: none.
  KeySpan mask_span = {0, 0};
  KeySlide mask_slide = {0, 0};
  int32_t first_query = 0;  // the query of row 0
  int32_t tile_begin = 0;   // the key of column 0

  // Applies the mask above to the tile's scores.
  void MaskScores(int32_t tile_keys) const;

  // Writes keys [tile_keys, head_dim] (rows `key_stride` floats apart) into
  // keys_t transposed, so the score loops read 16 keys per load; the spare
  // columns up to the next multiple of 16 are zero.
  void TransposeKeys(const float* keys, int64_t key_stride, int32_t tile_keys) const;
  // The same 16 x 16 floats at a time in registers (head_dim a multiple of
  // 16; AVX-512 only): the element-by-element form took a tenth of the fp32
  // LSG attention.
  void TransposeKeysAvx512(const float* keys, int64_t key_stride, int32_t tile_keys) const;

  // Fold the transposed keys and values [tile_keys, head_dim] (read in place,
  // rows `value_stride` floats apart) into the running softmax state. Only
  // the first `rows` rows are touched. TransposeKeys must run first.
  void RunAvx2(const float* values, int64_t value_stride, int32_t tile_keys) const;
  void RunAvx512(const float* values, int64_t value_stride, int32_t tile_keys) const;
};

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_FP32_TILE_H_
