#include "model/checkpoint/lsg_config.h"

#include "absl/strings/str_format.h"

namespace docsparse {

std::string_view LsgSparsityName(LsgSparsity sparsity) {
  switch (sparsity) {
    case LsgSparsity::kNone:
      return "none";
    case LsgSparsity::kNorm:
      return "norm";
    case LsgSparsity::kPooling:
      return "pooling";
    case LsgSparsity::kLsh:
      return "lsh";
    case LsgSparsity::kStride:
      return "stride";
    case LsgSparsity::kBlockStride:
      return "block_stride";
    case LsgSparsity::kBosPooling:
      return "bos_pooling";
  }
  return "?";
}

std::optional<LsgSparsity> ParseLsgSparsity(std::string_view name) {
  for (LsgSparsity sparsity :
       {LsgSparsity::kNone, LsgSparsity::kNorm, LsgSparsity::kPooling, LsgSparsity::kLsh,
        LsgSparsity::kStride, LsgSparsity::kBlockStride, LsgSparsity::kBosPooling}) {
    if (LsgSparsityName(sparsity) == name) return sparsity;
  }
  return std::nullopt;
}

absl::Status ValidateLsgConfig(const LsgConfig& c, std::string_view source) {
  auto error = [&](std::string_view field, const std::string& what) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: field '%s': %s", source, field, what));
  };
  if (c.block_size < 1 || c.block_size > 65536) {
    return error("block_size", absl::StrFormat("%d is out of range [1, 65536]", c.block_size));
  }
  if (c.sparse_block_size < 0 || c.sparse_block_size > 65536) {
    return error("sparse_block_size",
                 absl::StrFormat("%d is out of range [0, 65536]", c.sparse_block_size));
  }
  if (c.sparsity_factor < 0 || c.sparsity_factor > c.block_size) {
    return error("sparsity_factor", absl::StrFormat("%d is out of range [0, block_size=%d]",
                                                    c.sparsity_factor, c.block_size));
  }
  if (c.num_global_tokens < 1 || c.num_global_tokens > 512) {
    return error("num_global_tokens",
                 absl::StrFormat("%d is out of range [1, 512]", c.num_global_tokens));
  }
  if (c.lsh_num_pre_rounds < 0 || c.lsh_num_pre_rounds > 16) {
    return error("lsh_num_pre_rounds",
                 absl::StrFormat("%d is out of range [0, 16]", c.lsh_num_pre_rounds));
  }
  if (c.sparsity_factor > 0) {
    if (c.block_size % c.sparsity_factor != 0) {
      return error("sparsity_factor", absl::StrFormat("%d does not divide block_size %d",
                                                      c.sparsity_factor, c.block_size));
    }
    const int step = c.SparseStep();
    if (c.HasSparseKeys() && step != 1 && step % 2 != 0) {
      return error("sparsity_factor",
                   absl::StrFormat("block_size / sparsity_factor = %d must be even or 1 (the "
                                   "reference builds wrong sparse windows otherwise)",
                                   step));
    }
    // The reference slices each side's window from a 6·S-key unfold at an
    // offset that goes negative below this, leaving no sparse keys at all.
    if (c.HasSparseKeys() && 4 * c.sparse_block_size < 3 * step) {
      return error("sparse_block_size",
                   absl::StrFormat("%d is below 3/4 of block_size / sparsity_factor = %d (the "
                                   "reference then attends to no sparse key)",
                                   c.sparse_block_size, step));
    }
  }
  const bool chunked =
      c.sparsity_type == LsgSparsity::kNorm || c.sparsity_type == LsgSparsity::kLsh;
  if (c.HasSparseKeys() && chunked && c.sparsity_factor > 1) {
    const int chunk = c.SelectionChunk();
    if (c.block_size % chunk != 0) {
      return error("sparse_block_size",
                   absl::StrFormat("%d must divide block_size %d for %s", chunk, c.block_size,
                                   LsgSparsityName(c.sparsity_type)));
    }
    if (chunk % c.sparsity_factor != 0) {
      return error("sparsity_factor",
                   absl::StrFormat("%d must divide min(block_size, sparse_block_size) = %d for %s",
                                   c.sparsity_factor, chunk, LsgSparsityName(c.sparsity_type)));
    }
  }
  return absl::OkStatus();
}

}  // namespace docsparse
