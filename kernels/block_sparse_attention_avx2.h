// The AVX2+FMA inner loops of the block-sparse executor: one key tile against
// a block of queries (scores, online-softmax update, probabilities x values).
// Compiled with per-function target attributes, so the library still runs on
// CPUs without AVX2 (the caller checks HostCpuFeatures().avx2_fma first).
#ifndef DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_AVX2_H_
#define DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_AVX2_H_

#include <cstdint>

namespace docsparse {

// Views of one thread's scratch buffers for one query block.
struct Avx2Tile {
  const float* q;    // [rows, head_dim] scaled queries
  float* scores;     // [rows, stride]
  float* acc;        // [rows, head_dim]
  float* row_max;    // [rows]
  float* row_sum;    // [rows]
  float* keys_t;     // [head_dim, stride] transposed key tile
  int32_t rows;      // multiple of 4
  int32_t head_dim;  // multiple of 8
  int32_t stride;    // >= tile_keys rounded up to 16

  // Folds keys/values [tile_keys, head_dim] (row-major, in place) into the
  // running softmax state. Only the first `rows` rows are touched.
  void Run(const float* keys, const float* values, int32_t tile_keys) const;
};

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_AVX2_H_
