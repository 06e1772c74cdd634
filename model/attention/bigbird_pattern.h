// BigBird's attention pattern (Zaheer et al. 2020, "Big Bird: Transformers
// for Longer Sequences"), the ITC variant (global tokens taken from the
// sequence), at block granularity as the paper implements it. Tokens are cut
// into blocks of b (the last one possibly partial). Query block qb:
//   qb < g: attends to every token;
//   else:   attends to the global blocks [0, g), the window blocks
//           |kb − qb| <= (w − 1)/2, and BigBirdRandomBlocks' blocks.
// So global blocks are symmetric: they see all and all see them.
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
};

// The plan for `length` >= 0 tokens and `heads` >= 1 heads, knobs in the
// ranges above. Query blocks are the token blocks; a non-global block has at
// most 2 + r spans (fewer where blocks touch and merge); no key_gather.
// Random blocks differ per head and query block and come from (seed, layer),
// so equal inputs give equal plans.
PatternPlan PlanBigBird(const BigBirdKnobs& knobs, int32_t length, int32_t heads, uint64_t seed,
                        int32_t layer);

// The random key blocks of (layer, head, query_block), query_block in
// [0, num_blocks), ascending: min(r, |C|) distinct blocks drawn uniformly
// without replacement from C, the blocks of [0, num_blocks) that are neither
// global nor in query_block's window. A pure function of its arguments: a
// SplitMix64 stream keyed by (seed, layer, head, query_block). Defined for
// global query blocks too, though their plan rows do not use it.
std::vector<int32_t> BigBirdRandomBlocks(const BigBirdKnobs& knobs, int32_t num_blocks,
                                         uint64_t seed, int32_t layer, int32_t head,
                                         int32_t query_block);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_BIGBIRD_PATTERN_H_
