// Longformer's attention pattern (Beltagy et al. 2020, "Longformer: The
// Long-Document Transformer") for a bidirectional encoder: a sliding window,
// dilated on some heads, and symmetric global attention on the first tokens.
// Head h lets query i attend to token j iff
//   i < g  ||  j < g  ||  ((j − i) mod d_h == 0  &&  |j − i| <= (w/2)·d_h),
// where d_h is `dilation` on the last `dilated_heads` heads and 1 elsewhere.
#ifndef DOCSPARSE_MODEL_ATTENTION_LONGFORMER_PATTERN_H_
#define DOCSPARSE_MODEL_ATTENTION_LONGFORMER_PATTERN_H_

#include <cstdint>

#include "model/attention/pattern_plan.h"

namespace docsparse {

struct LongformerKnobs {
  int32_t window = 512;       // w: even, >= 2; w/2 window steps on each side
  int32_t dilation = 1;       // d >= 1: the dilated heads' step between keys
  int32_t dilated_heads = 0;  // in [0, heads]: the last this many heads use d
  int32_t global_tokens = 1;  // g >= 0: the first g tokens see and are seen by all
};

// The plan for `length` >= 0 tokens and `heads` >= 1 heads, knobs in the
// ranges above (checked by assert; the caller validates them).
//
// Query blocks: [0, min(g, length)) for the global rows (left out when
// empty), whose one span is every token. Without dilation, then blocks of
// 64 rows, each with the global tokens [0, g) and the window as one sliding
// span over [g, length) (offset −w/2, width w + 1), which the executors mask
// per row. With a dilated head (blocks are shared by all heads), one block
// per remaining row instead: at most two spans, [0, g) and its window.
//
// global_rows: min(g, length).
//
// key_gather: when some head is dilated with d > 1, the tokens [g, length)
// grouped by residue mod d (residue 0 first, ascending within a class), so
// that a dilated row's window, which steps by d, is one span there; empty
// otherwise.
PatternPlan PlanLongformer(const LongformerKnobs& knobs, int32_t length, int32_t heads);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_LONGFORMER_PATTERN_H_
