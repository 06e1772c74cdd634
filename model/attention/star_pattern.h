// Star-Transformer's attention pattern (Guo et al. 2019,
// "Star-Transformer"), adapted to a bidirectional encoder over one sequence:
// each token sees a band of neighbours (the paper's ring, radius 1), and the
// first tokens act as the relay node, seeing and seen by every token.
// Query i attends to token j iff
//   i < n_r  ||  j < n_r  ||  |i − j| <= radius.
#ifndef DOCSPARSE_MODEL_ATTENTION_STAR_PATTERN_H_
#define DOCSPARSE_MODEL_ATTENTION_STAR_PATTERN_H_

#include <cstdint>

#include "model/attention/pattern_plan.h"

namespace docsparse {

struct StarKnobs {
  int32_t radius = 1;        // >= 1: the band |i − j| <= radius (1: the paper's ring)
  int32_t relay_tokens = 1;  // n_r >= 0: the first n_r tokens relay
};

// The plan for `length` >= 0 tokens and `heads` >= 1 heads (all alike), knobs
// in the ranges above. It is Longformer's plan with window 2·radius, no
// dilation and n_r global tokens (see longformer_pattern.h): one block for
// the relay rows, then one per row with at most two spans; no key_gather.
PatternPlan PlanStar(const StarKnobs& knobs, int32_t length, int32_t heads);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_STAR_PATTERN_H_
