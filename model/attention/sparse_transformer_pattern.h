// The Sparse Transformer's factorized patterns (Child et al. 2019,
// "Generating Long Sequences with Sparse Transformers"), made bidirectional
// for an encoder. Each head uses one pattern with both of its parts:
//   strided: query i attends to token j iff |i − j| < l || (i − j) mod l == 0;
//   fixed:   query i attends to token j iff ⌊j/l⌋ == ⌊i/l⌋ || j mod l >= l − c
//            (its own stride block, and every block's last c "summary" tokens).
#ifndef DOCSPARSE_MODEL_ATTENTION_SPARSE_TRANSFORMER_PATTERN_H_
#define DOCSPARSE_MODEL_ATTENTION_SPARSE_TRANSFORMER_PATTERN_H_

#include <cstdint>

#include "model/attention/pattern_plan.h"

namespace docsparse {

struct SparseTransformerKnobs {
  int32_t stride = 128;      // l >= 1
  int32_t summary = 8;       // c in [1, l]
  int32_t fixed_heads = -1;  // in [-1, heads]: heads [heads − f, heads) are fixed,
                             // the others strided; -1 means f = heads / 2
};

// The plan for `length` >= 0 tokens and `heads` >= 1 heads, knobs in the
// ranges above.
//
// Query blocks: one per row when some head is strided (its band moves with
// the row); the stride blocks of l rows when every head is fixed.
//
// key_gather: for the strided heads, every token grouped by residue mod l
// (residue 0 first, ascending within a class); then, for the fixed heads,
// the summary tokens in ascending order. Either section is left out when no
// head needs it. A strided row has at most three spans: its band
// [i − l + 1, i + l) and its residue class split around i (the one member
// the band already holds). A fixed block has at most three: its stride block
// and the summaries before and after it (its own are in the first span).
PatternPlan PlanSparseTransformer(const SparseTransformerKnobs& knobs, int32_t length,
                                  int32_t heads);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_SPARSE_TRANSFORMER_PATTERN_H_
