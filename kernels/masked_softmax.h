// The softmax of dense attention in one pass over bf16 scores: for each row,
//   probs[c] = exp(scale·s[c] − max) / Σ exp(...)  for c < valid, 0 for c >= valid,
// read as bf16, computed in fp32, written as bf16 for the next bf16 product.
// It replaces five passes over an fp32 score matrix (to fp32, scale, mask,
// softmax, to bf16), which took most of dense attention's time at 512 tokens.
//
// Masked columns get exactly 0: what Hugging Face's additive finfo.min mask
// gives after exp underflows. Rows are independent: callers split them over
// threads. AVX-512 where the CPU has it (chosen at run time), portable C++
// elsewhere; both round to bf16 to nearest even.
#ifndef DOCSPARSE_KERNELS_MASKED_SOFTMAX_H_
#define DOCSPARSE_KERNELS_MASKED_SOFTMAX_H_

#include <cstdint>

namespace docsparse {

struct MaskedSoftmaxParams {
  const uint16_t* scores;     // [items, rows_per_item, cols] bf16 bits, unscaled q·kᵀ
  uint16_t* probs;            // [items, rows_per_item, cols] bf16 bits; may alias scores
  const int64_t* valid_cols;  // [items] keys that are not padding, in [1, cols]
  int64_t rows_per_item;      // heads x queries
  int64_t cols;               // keys (the row stride)
  float scale;                // 1/√d_head
};

// Rows [row_begin, row_end) of the flattened [items x rows_per_item] rows.
void MaskedSoftmaxBf16Rows(const MaskedSoftmaxParams& params, int64_t row_begin, int64_t row_end);

// The portable implementation, for tests of the dispatched one.
void MaskedSoftmaxBf16RowsPortable(const MaskedSoftmaxParams& params, int64_t row_begin,
                                   int64_t row_end);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_MASKED_SOFTMAX_H_
