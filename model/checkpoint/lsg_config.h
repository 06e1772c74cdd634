// LSG attention settings (Condevaux & Harispe 2022), with the field names,
// defaults and semantics of the reference implementation
// (ccdv-ai/convert_checkpoint_to_lsg, modeling_lsg_*.py): published LSG
// checkpoints carry them in config.json; docsparse.json can set them for a
// plain checkpoint.
#ifndef DOCSPARSE_MODEL_CHECKPOINT_LSG_CONFIG_H_
#define DOCSPARSE_MODEL_CHECKPOINT_LSG_CONFIG_H_

#include <optional>
#include <string_view>

#include "absl/status/status.h"

namespace docsparse {

// How the sparse (derived) keys of a block are chosen; see LsgSparseKeys.
enum class LsgSparsity {
  kNone,         // local + global only
  kNorm,         // the keys of highest norm in each chunk
  kPooling,      // average of each sparsity_factor keys
  kLsh,          // sums of keys hashed to the same bucket (random)
  kStride,       // every sparsity_factor-th key, offset by head
  kBlockStride,  // a strided subset per block, offset by head
  kBosPooling,   // per chunk, a softmax-weighted sum driven by the first query
};

std::string_view LsgSparsityName(LsgSparsity sparsity);  // "norm", ...
// The reference's names; "none" and JSON null both mean kNone.
std::optional<LsgSparsity> ParseLsgSparsity(std::string_view name);

struct LsgConfig {
  int block_size = 128;         // query block and local window block
  int sparse_block_size = 128;  // derived keys per side; 0 = none
  int sparsity_factor = 2;      // tokens per derived key
  LsgSparsity sparsity_type = LsgSparsity::kNorm;
  int num_global_tokens = 1;  // [1, 512]
  bool adaptive = true;       // pad lengths to a multiple of block_size
  bool mask_first_token = false;
  bool pool_with_global = true;  // output of global token 0 replaces token 0's
  int lsh_num_pre_rounds = 1;

  bool HasSparseKeys() const {
    return sparse_block_size > 0 && sparsity_factor > 0 && sparsity_type != LsgSparsity::kNone;
  }
  // Derived keys per block of tokens.
  int SparseStep() const { return block_size / sparsity_factor; }
  // Tokens per chunk for norm and lsh selection.
  int SelectionChunk() const {
    return sparse_block_size < block_size ? sparse_block_size : block_size;
  }
};

// Checks what the reference asserts or silently breaks on, naming the field
// with `source` in front: block_size >= 1; sparsity_factor dividing
// block_size; block_size / sparsity_factor even or 1 (the reference's
// sparse-window slicing is only correct then); num_global_tokens in
// [1, 512]; for norm and lsh with a sparse block smaller than the block,
// sparse_block_size dividing block_size and sparsity_factor dividing
// sparse_block_size; lsh_num_pre_rounds in [0, 16].
absl::Status ValidateLsgConfig(const LsgConfig& config, std::string_view source);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_CHECKPOINT_LSG_CONFIG_H_
