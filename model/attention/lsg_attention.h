// LSG attention as an AttentionMechanism: per sequence, the derived keys
// (model/attention/lsg_sparse_keys.h), a block-sparse plan (model/attention/lsg_planner.h) over
// [global ; derived ; tokens], and the kernels/ executor.
//
// Inputs are the encoder's [global ; tokens] sequences: lengths count the
// global tokens, and query/key/value rows [global, global + padded) hold
// the tokens with their adaptive padding. Each sequence is planned as the
// reference would run it alone (batch of one), so a result never depends on
// what else shares the batch.
#ifndef DOCSPARSE_MODEL_ATTENTION_LSG_ATTENTION_H_
#define DOCSPARSE_MODEL_ATTENTION_LSG_ATTENTION_H_

#include <memory>
#include <optional>

#include "model/attention/attention.h"
#include "model/checkpoint/lsg_config.h"

namespace docsparse {

// LSG's knobs (ItemAttentionOptions::knobs): sparse_block_size 0 drops the
// sparse keys.
inline constexpr char kLsgBlockSizeKnob[] = "block_size";
inline constexpr char kLsgSparseBlockSizeKnob[] = "sparse_block_size";
inline constexpr char kLsgSparsityFactorKnob[] = "sparsity_factor";

// The config with a request's knob overrides (ItemAttentionOptions) applied;
// native for an item that runs another kind (the encoder lays out an LSG
// checkpoint's sequences with it whatever attention runs).
LsgConfig ApplyLsgKnobs(const LsgConfig& native, const ItemAttentionOptions& options);

// `num_threads` <= 0: LibTorch's intra-op thread count at call time.
std::unique_ptr<AttentionMechanism> MakeLsgAttention(const LsgConfig& config, int num_threads = 0);

// The attention a checkpoint runs as published: LSG with the LSG fields of its
// config.json, dense when it has none.
std::unique_ptr<AttentionMechanism> MakeCheckpointAttention(const std::optional<LsgConfig>& lsg);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_LSG_ATTENTION_H_
