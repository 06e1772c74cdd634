#include "convert/lsg_positions.h"

#include <algorithm>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace docsparse::convert {

absl::StatusOr<at::Tensor> OrderGlobalPositions(const at::Tensor& positions, int64_t stride) {
  if (positions.dim() != 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("position table has %d dimensions, expected 2", positions.dim()));
  }
  int64_t n = positions.size(0);
  const int64_t d = positions.size(1);
  if (n < kLsgGlobalTableRows) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "the position table has %d rows (without offset rows), fewer than %d: the reference "
        "converter fills the missing global positions with random torch.normal draws, which "
        "cannot be reproduced; convert a checkpoint with at least %d positions",
        n, kLsgGlobalTableRows, kLsgGlobalTableRows));
  }
  at::Tensor table = positions;
  if (n % kLsgGlobalTableRows != 0) {
    n = kLsgGlobalTableRows * (n / kLsgGlobalTableRows);
    table = table.slice(0, 0, n);
  }
  const int64_t factor = n / kLsgGlobalTableRows;
  const int64_t s = stride / factor;
  if (stride <= 0 || s == 0 || kLsgGlobalTableRows % s != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "global positional stride %d does not fit a %d-row table: stride / %d = %d must be a "
        "positive divisor of %d",
        stride, positions.size(0), factor, s, kLsgGlobalTableRows));
  }
  at::Tensor kept = table.reshape({-1, factor, d}).select(1, 0);
  return kept.reshape({-1, s, d}).transpose(0, 1).reshape({-1, d}).contiguous();
}

absl::StatusOr<at::Tensor> GlobalEmbeddings(const at::Tensor& positions, const at::Tensor& word,
                                            int64_t bos_id, int64_t mask_id,
                                            const std::optional<at::Tensor>& token_type_row,
                                            int64_t stride,
                                            const std::optional<at::Tensor>& keep_first) {
  absl::StatusOr<at::Tensor> ordered = OrderGlobalPositions(positions, stride);
  if (!ordered.ok()) return ordered.status();
  // A fresh copy: reshape may have returned a view of the checkpoint table.
  at::Tensor g = ordered->clone();
  for (int64_t id : {bos_id, mask_id}) {
    if (id < 0 || id >= word.size(0)) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "token id %d is outside the word embedding table of %d rows", id, word.size(0)));
    }
  }
  if (word.size(1) != g.size(1)) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "word embeddings are %d wide but position embeddings %d", word.size(1), g.size(1)));
  }
  // Same op order as the reference, each rounded to the table's dtype.
  g[0].add_(word[bos_id]);
  g.slice(0, 1).add_(word[mask_id].unsqueeze(0));
  if (token_type_row.has_value()) g.add_(token_type_row->unsqueeze(0));
  if (keep_first.has_value()) {
    if (!keep_first->sizes().equals(g.sizes())) {
      return absl::InvalidArgumentError(
          "the existing global embedding table does not have 512 rows of the hidden size");
    }
    at::Tensor merged = keep_first->clone();
    merged.slice(0, 1).copy_(g.slice(0, 1));
    return merged;
  }
  return g;
}

absl::StatusOr<at::Tensor> TilePositions(const at::Tensor& table, int64_t offset,
                                         int64_t max_length) {
  const int64_t rows = table.size(0);
  const int64_t period = rows - offset;
  if (period <= 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "position table has %d rows, not more than its %d offset rows", rows, offset));
  }
  if (max_length < period) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "max length %d is smaller than the %d positions the checkpoint already has; the "
        "converter only extends position tables",
        max_length, period));
  }
  std::vector<at::Tensor> parts;
  parts.push_back(table.slice(0, 0, offset));
  const at::Tensor body = table.slice(0, offset);
  for (int64_t filled = 0; filled < max_length; filled += period) {
    parts.push_back(body.slice(0, 0, std::min(period, max_length - filled)));
  }
  return at::cat(parts, 0).contiguous();
}

}  // namespace docsparse::convert
