// The tensor arithmetic of the reference LSG converter
// (github.com/ccdv-ai/convert_checkpoint_to_lsg, lsg_converter/
// conversion_utils.py and */convert_*_checkpoint.py), op for op in ATen so
// that results are bit-identical in every floating dtype: each op runs in
// the table's own dtype, as the reference's in-place torch ops do.
#ifndef DOCSPARSE_CONVERT_LSG_POSITIONS_H_
#define DOCSPARSE_CONVERT_LSG_POSITIONS_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <optional>

#include "absl/status/statusor.h"

namespace docsparse::convert {

// LSG models always carry 512 global embeddings (nn.Embedding(512, d)); the
// config's num_global_tokens says how many of them are used.
inline constexpr int64_t kLsgGlobalTableRows = 512;

// ConversionScript.order_positions: 512 rows picked from a position table
// [n, d] so that global token k sits at a strided position. With n >= 512:
// the table is cut to a multiple of 512 rows, every (n / 512)-th row kept
// (512 rows), and those are reordered with stride s = stride / (n / 512):
// output row k = kept row (k % (512 / s)) * s + k / (512 / s).
// Errors (INVALID_ARGUMENT): n < 512 — the reference pads the table with
// torch.normal draws there, which no other RNG reproduces, so such
// checkpoints are refused; s == 0 or s not dividing 512 — torch's reshape
// fails there too.
absl::StatusOr<at::Tensor> OrderGlobalPositions(const at::Tensor& positions, int64_t stride);

// update_global: the global embedding table [512, d].
//   g = OrderGlobalPositions(positions, stride)
//   g[0] += word[bos_id]; g[1:] += word[mask_id]; then, when token_type_row
//   is given (BERT with use_token_ids), g += token_type_row.
// `positions` is the table without its offset rows (RoBERTa/BART drop 2).
// When `keep_first` holds a previous global table (an LSG input with
// --keep-first-global-token), its row 0 is kept and rows 1.. are replaced.
absl::StatusOr<at::Tensor> GlobalEmbeddings(const at::Tensor& positions, const at::Tensor& word,
                                            int64_t bos_id, int64_t mask_id,
                                            const std::optional<at::Tensor>& token_type_row,
                                            int64_t stride,
                                            const std::optional<at::Tensor>& keep_first);

// update_positions: a table [offset + max_length, d] made of the first
// `offset` rows of `table`, then its remaining rows repeated. The reference
// concatenates max_length / rows + 1 copies and truncates; for an offset
// table (RoBERTa, BART) that can fall short of offset + max_length rows (e.g.
// 514-row RoBERTa, max_length 60000), leaving a table shorter than the config
// says; we always fill all offset + max_length rows, which equals the
// reference wherever the reference is consistent.
// INVALID_ARGUMENT when max_length is smaller than the table's rows - offset
// (the reference would silently cut the table).
absl::StatusOr<at::Tensor> TilePositions(const at::Tensor& table, int64_t offset,
                                         int64_t max_length);

}  // namespace docsparse::convert

#endif  // DOCSPARSE_CONVERT_LSG_POSITIONS_H_
