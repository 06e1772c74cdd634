#include "model/attention/longformer_pattern.h"

#include <algorithm>
#include <cassert>
#include <utility>
#include <vector>

namespace docsparse {

PatternPlan PlanLongformer(const LongformerKnobs& knobs, int32_t length, int32_t heads) {
  assert(knobs.window >= 2 && knobs.window % 2 == 0);
  assert(knobs.dilation >= 1);
  assert(knobs.dilated_heads >= 0 && knobs.dilated_heads <= heads);
  assert(knobs.global_tokens >= 0);
  assert(length >= 0 && heads >= 1);

  const int32_t global = std::min(knobs.global_tokens, length);
  const int64_t half_window = knobs.window / 2;
  const bool dilates = knobs.dilated_heads > 0 && knobs.dilation > 1;
  // Only the non-global tokens need gathering: the global ones are every
  // row's span [0, g) in the token section already.
  const ResidueClasses dilated_keys(global, length, dilates ? knobs.dilation : 1);

  std::vector<int32_t> query_block_starts{0};
  if (global > 0) query_block_starts.push_back(global);
  for (int32_t row = global + 1; row <= length; ++row) query_block_starts.push_back(row);
  PatternPlanBuilder builder(length, heads, std::move(query_block_starts),
                             dilates ? dilated_keys.Tokens() : std::vector<int32_t>{});

  for (int32_t head = 0; head < heads; ++head) {
    const bool dilated = dilates && head >= heads - knobs.dilated_heads;
    if (global > 0) {
      builder.AddSpan(0, length);
      builder.EndBlock();
    }
    for (int32_t row = global; row < length; ++row) {
      builder.AddSpan(0, global);
      if (dilated) {
        // The window's keys are row's residue class within reach; keys
        // below g are in the global span, and the section holds none.
        const int64_t reach = half_window * knobs.dilation;
        const ResidueClasses::Range window =
            dilated_keys.MembersIn(row % knobs.dilation, row - reach, row + reach + 1);
        builder.AddSpan(int64_t{length} + window.begin, int64_t{length} + window.end);
      } else {
        builder.AddSpan(std::max<int64_t>(global, row - half_window),
                        std::min<int64_t>(length, row + half_window + 1));
      }
      builder.EndBlock();
    }
  }
  return builder.Finish();
}

}  // namespace docsparse
