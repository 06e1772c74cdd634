// BigBird's attention pattern (Zaheer et al. 2020, "Big Bird: Transformers
// for Longer Sequences"), the ITC variant (global tokens taken from the
// sequence), at block granularity as the paper implements it. Tokens are cut
// into blocks of b (the last one possibly partial). The global blocks are
// [0, g), and the last block too when last_block_global. Query block qb:
//   qb global: attends to every token;
//   else:      attends to the global blocks, the window blocks
//              |kb − qb| <= (w − 1)/2, and r random blocks.
// So global blocks are symmetric: they see all and all see them.
//
// transformers' BigBirdBlockSparseAttention is this pattern with g = 1,
// last_block_global, w = 3, and two quirks a checkpoint's answers depend on,
// which the knobs below reproduce: at inference (eval mode) it draws every
// random block as block 0, so a non-global query attends block 0 once as
// global and r more times as copies (random_at_first_block); and at or below
// (5 + 2r)·b tokens it runs full attention instead (dense_up_to).
#ifndef DOCSPARSE_MODEL_ATTENTION_BIGBIRD_PATTERN_H_
#define DOCSPARSE_MODEL_ATTENTION_BIGBIRD_PATTERN_H_

#include <cstdint>
#include <vector>

#include "model/attention/pattern_plan.h"

namespace docsparse {

struct BigBirdKnobs {
  int32_t block_size = 64;    // b >= 1 tokens
  int32_t window_blocks = 3;  // w: odd, >= 1: the own block and (w − 1)/2 on each side
  int32_t global_blocks = 1;  // g >= 0: the first g blocks are global
  int32_t random_blocks = 3;  // r >= 0 per (head, query block)
  // The last block is global as well (transformers' layout).
  bool last_block_global = false;
  // Every random block is a copy of block 0 (transformers at inference)
  // instead of a block drawn per (seed, layer, head, query block).
  bool random_at_first_block = false;
  // At or below this many tokens every query attends every token.
  int32_t dense_up_to = 0;
};

// The plan for `length` >= 0 tokens and `heads` >= 1 heads, knobs in the
// ranges above. Query blocks are the token blocks; a non-global block has at
// most 3 + r spans (fewer where blocks touch and merge). Drawn random blocks
// differ per head and query block and come from (seed, layer), so equal
// inputs give equal plans; they need no key_gather. With
// random_at_first_block, key_gather holds r copies of block 0's tokens and
// every non-global block's last span is all of them.
PatternPlan PlanBigBird(const BigBirdKnobs& knobs, int32_t length, int32_t heads, uint64_t seed,
                        int32_t layer);

// The random key blocks of (layer, head, query_block), query_block in
// [0, num_blocks), ascending: min(r, |C|) distinct blocks drawn uniformly
// without replacement from C, the blocks of [0, num_blocks) that are neither
// global nor in query_block's window (random_at_first_block and dense_up_to
// are the plan's business, not this function's). A pure function of its arguments: a
// SplitMix64 stream keyed by (seed, layer, head, query_block). Defined for
// global query blocks too, though their plan rows do not use it.
std::vector<int32_t> BigBirdRandomBlocks(const BigBirdKnobs& knobs, int32_t num_blocks,
                                         uint64_t seed, int32_t layer, int32_t head,
                                         int32_t query_block);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_BIGBIRD_PATTERN_H_
