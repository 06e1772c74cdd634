// ETC's attention pattern (Ainslie et al. 2020, "ETC: Encoding Long and
// Structured Inputs in Transformers"), over one sequence whose first n_g
// tokens are the global input and the rest the long input. The paper's
// four pieces:
//   g2g  a global token attends every global token;
//   g2l  a global token attends the long input: all of it, or with hard g2l
//        masking only its own segment (the paper's sentence; here the long
//        input split into n_g contiguous segments of near-equal length);
//   l2g  a long token attends every global token;
//   l2l  a long token attends the long tokens within radius r.
// With g = n_g, L = n − g and segment s = [g + ⌊s·L/g⌋, g + ⌊(s+1)·L/g⌋),
// query i attends token j iff
//   j < g  ||  (i < g  &&  (!hard_g2l || j ∈ segment i))  ||
//   (i >= g  &&  |i − j| <= r).
// On an LSG checkpoint the prepended global tokens are the global input (a
// separate input, as in ETC); elsewhere the first tokens ([CLS] and what
// follows) take that role.
#ifndef DOCSPARSE_MODEL_ATTENTION_ETC_PATTERN_H_
#define DOCSPARSE_MODEL_ATTENTION_ETC_PATTERN_H_

#include <cstdint>

#include "model/attention/pattern_plan.h"

namespace docsparse {

struct EtcKnobs {
  int32_t global_tokens = 1;  // n_g >= 0; more than the tokens: every token global
  int32_t radius = 256;       // 0 <= r < 2^30
  bool hard_g2l = true;
};

// The plan for `length` >= 0 tokens and `heads` >= 1 heads (all alike): one
// query block per global token, then blocks of long rows sharing a sliding
// span; no key_gather.
PatternPlan PlanEtc(const EtcKnobs& knobs, int32_t length, int32_t heads);

// Segment s's long tokens [*begin, *end) for `global` global tokens over
// `length` tokens (s < global).
void EtcSegment(int32_t global, int32_t length, int32_t s, int32_t* begin, int32_t* end);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_ETC_PATTERN_H_
