// The embedding step of a BERT-family encoder in one pass per row:
// LayerNorm(word[id] + position[p] + token_type[t]) with the rows gathered
// from fp32 tables, summed and normalised in fp32 (two passes over an fp32
// copy of the row), and written in the activations' type (fp32, or bf16
// rounded to nearest even).
//
// It replaces two or three at::embedding gathers, their adds, at::layer_norm
// and the conversion to the activations' type: ~0.5 ms of a 512-token MiniLM
// forward and 3-9 ms at 4,096 tokens on the 2-core machines. AVX-512 where
// the CPU has it (chosen at run time), portable C++ elsewhere.
#ifndef DOCSPARSE_KERNELS_EMBEDDING_LAYER_NORM_H_
#define DOCSPARSE_KERNELS_EMBEDDING_LAYER_NORM_H_

#include <cstdint>

namespace docsparse {

struct EmbeddingLayerNormParams {
  const float* word;          // [vocab, width]: row ids[r]
  const int64_t* ids;         // [rows]
  const float* position;      // [positions, width], or null: row positions[r]
  const int64_t* positions;   // [rows] (unread without `position`)
  const float* token_type;    // [types, width], or null: row types[r]
  const int64_t* types;       // [rows] (unread without `token_type`)
  const float* gamma;         // [width]
  const float* beta;          // [width]
  void* out;                  // [rows, width], rows `out_stride` elements apart
  int64_t out_stride;
  bool out_bf16;              // bf16 bits (uint16_t) instead of fp32
  int64_t width;
  float eps;
};

// Rows [row_begin, row_end); rows are independent, so callers split them
// over threads. Indices are not checked: the caller validated them.
void EmbeddingLayerNormRows(const EmbeddingLayerNormParams& params, int64_t row_begin,
                            int64_t row_end);

// The portable implementation, for tests of the dispatched one.
void EmbeddingLayerNormRowsPortable(const EmbeddingLayerNormParams& params, int64_t row_begin,
                                    int64_t row_end);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_EMBEDDING_LAYER_NORM_H_
