// The SIMD inner loops of the fp32 block-sparse executor: one key tile
// against a block of queries (scores, online-softmax update, probabilities x
// values), for AVX2+FMA (rows in memory, keys in the lanes) and for AVX-512
// (rows in the lanes). Compiled with per-function target attributes, so the
// library still runs on CPUs without them (the caller checks
// HostCpuFeatures() first).
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
  int32_t head_dim;  // multiple of 8
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
  // Fold the transposed keys and values [tile_keys, head_dim] (read in place,
  // rows `value_stride` floats apart) into the running softmax state. Only
  // the first `rows` rows are touched. TransposeKeys must run first.
  void RunAvx2(const float* values, int64_t value_stride, int32_t tile_keys) const;
};

// A query block on AVX-512 with its rows in the vector lanes, in groups of
// 32 rows (16 for the last one where the padded block is not a multiple of
// 32). Each group's queries and outputs are stored transposed,
// [head_dim][group rows], so a score is a query vector times one key
// element broadcast, keys are read where they lie, and the softmax runs
// down the lanes.
struct Fp32LanesBlock {
  static constexpr int32_t kGroupRows = 32;

  float* q_t;           // [padded_rows · head_dim] the groups' scaled queries
  float* acc_t;         // [padded_rows · head_dim] their unnormalised outputs, zeroed
  float* scores;        // [tile keys · kGroupRows] one group's scores
  float* row_max;       // [padded_rows] -inf at first
  float* row_sum;       // [padded_rows] 0 at first
  int32_t padded_rows;  // the block's rows rounded up to 16
  int32_t head_dim;     // a multiple of 16
  // A sliding span's mask over the current tile, as in Fp32Tile.
  KeySpan mask_span = {0, 0};
  KeySlide mask_slide = {0, 0};
  int32_t first_query = 0;
  int32_t tile_begin = 0;

  static int32_t PaddedRows(int32_t rows) { return (rows + 15) / 16 * 16; }
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

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_FP32_TILE_H_
