// Mask map of position-pattern plans (model/attention/pattern_plan.h) over a
// document's token positions, on the grid of model/attention/mask_map.h: the
// fraction of (query, key) pairs of each cell the plans compute, over all
// heads. Gathered keys count at the token they copy.
#ifndef DOCSPARSE_MODEL_ATTENTION_PATTERN_MASK_MAP_H_
#define DOCSPARSE_MODEL_ATTENTION_PATTERN_MASK_MAP_H_

#include <vector>

#include "model/attention/pattern_plan.h"

namespace docsparse {

// `plans[w]`: the plan of the document's window w; windows lie back to back.
std::vector<float> PatternMaskMap(const std::vector<PatternPlan>& plans, int resolution,
                                  int* cells);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_PATTERN_MASK_MAP_H_
