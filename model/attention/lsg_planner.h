// LsgPlanner: which keys each query of one sequence attends to under LSG, as
// a block-sparse plan (kernels/block_sparse_attention.h) over the extended
// key sequence [global tokens ; derived (sparse) keys ; tokens], the derived
// keys and the tokens each starting at a multiple of kLsgKeyAlignment.
//
// The reference (modeling_lsg_*.py, LSGAttentionProduct) builds, for token
// block j (block_size B), the keys
//   global:  every global token;
//   sparse:  derived keys at positions [(j-1)·st − S, (j-1)·st) and
//            [(j+2)·st, (j+2)·st + S) of the derived sequence (st = B /
//            sparsity_factor derived keys per block, S = sparse_block_size;
//            when st is 1 the right window is [j, j + S), the reference's
//            slicing for its "odd" case);
//   local:   tokens of blocks j-1, j, j+1;
// and masks padding, tokens beyond the sequence, the first token when
// mask_first_token, and derived keys the sparsity type marks invalid. Global
// queries attend to every global token and every token. A sequence of at
// most 2·B tokens runs full attention over [global ; tokens] instead.
// Masked keys are left out of the plan (the reference adds finfo.min, whose
// weight underflows to exactly 0), so the plan's pairs are what is computed.
#ifndef DOCSPARSE_MODEL_ATTENTION_LSG_PLANNER_H_
#define DOCSPARSE_MODEL_ATTENTION_LSG_PLANNER_H_

#include <cstdint>
#include <vector>

#include "kernels/block_sparse_attention.h"
#include "model/checkpoint/lsg_config.h"

namespace docsparse {

// Where the extended key sequence starts its derived keys and its tokens
// (unused zero rows before each): the AMX executor packs keys in aligned
// chunks of 32 once per head and reuses them across blocks, while keys off
// that grid are packed again for every block that reaches them.
inline constexpr int32_t kLsgKeyAlignment = 32;

// How one sequence is laid out for LSG attention.
struct LsgLayout {
  int32_t global = 0;  // global tokens, in front of the tokens
  int32_t tokens = 0;  // real tokens n
  // Short-input fallback (n <= 2·block_size): full attention, over
  // [global ; tokens] as the projection leaves them.
  bool full = false;
  // Tokens the blocks cover: n rounded up to block_size (adaptive padding;
  // we pad even when adaptive is false, where the reference would fail);
  // n when full.
  int32_t padded_tokens = 0;
  int32_t derived_keys = 0;  // padded_tokens / sparsity_factor, 0 without sparse keys
  bool first_token_masked = false;

  int32_t num_token_blocks(int32_t block_size) const { return padded_tokens / block_size; }
  // Index in the extended key sequence.
  int32_t derived_begin() const { return full ? global : AlignKey(global); }
  int32_t token_begin() const { return full ? global : AlignKey(derived_begin() + derived_keys); }
  int32_t TokenKey(int32_t token) const { return token_begin() + token; }
  int32_t DerivedKey(int32_t derived) const { return derived_begin() + derived; }
  int32_t extended_keys() const { return token_begin() + padded_tokens; }

 private:
  static int32_t AlignKey(int32_t key) {
    return (key + kLsgKeyAlignment - 1) / kLsgKeyAlignment * kLsgKeyAlignment;
  }
};

LsgLayout LayoutLsgSequence(const LsgConfig& config, int32_t global, int32_t tokens);

struct LsgPlan {
  // Query blocks over [global ; tokens]: the global queries, then one block
  // per token block (64-row blocks when full).
  std::vector<int32_t> query_block_starts;
  std::vector<int32_t> span_offsets;  // [heads * blocks + 1]
  std::vector<KeySpan> spans;
  // Pairs computed for real queries (global and the n tokens), per head.
  std::vector<int64_t> head_edges;

  BlockSparsePlanView View() const {
    return {static_cast<int32_t>(query_block_starts.size()) - 1, query_block_starts.data(),
            span_offsets.data(), spans.data()};
  }
};

// `derived_valid` is [heads × layout.derived_keys] (head-major): whether
// derived key s of head h may be attended. `padding_rows` also plans the
// queries of padding tokens in [n, padded_tokens) (needed when a sparsity
// type lets padding reach real tokens, as bos_pooling does); they are not
// counted in head_edges.
LsgPlan PlanLsgSequence(const LsgConfig& config, const LsgLayout& layout, int heads,
                        const std::vector<uint8_t>& derived_valid, bool padding_rows);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_LSG_PLANNER_H_
