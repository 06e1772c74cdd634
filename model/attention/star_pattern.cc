#include "model/attention/star_pattern.h"

#include <algorithm>
#include <cassert>

#include "model/attention/longformer_pattern.h"

namespace docsparse {

PatternPlan PlanStar(const StarKnobs& knobs, int32_t length, int32_t heads) {
  assert(knobs.radius >= 1 && knobs.relay_tokens >= 0);
  LongformerKnobs longformer;
  // A radius past the sequence changes nothing; capping it keeps 2·radius
  // within int32.
  longformer.window = 2 * std::min(knobs.radius, std::max(length, 1));
  longformer.dilation = 1;
  longformer.dilated_heads = 0;
  longformer.global_tokens = knobs.relay_tokens;
  return PlanLongformer(longformer, length, heads);
}

}  // namespace docsparse
