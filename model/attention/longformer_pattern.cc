#include "model/attention/longformer_pattern.h"

#include <algorithm>
#include <cassert>
#include <utility>
#include <vector>

namespace docsparse {
namespace {

// Rows per query block of the sliding (undilated) plan.
constexpr int32_t kLongformerBlock = 64;

}  // namespace

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
  if (!dilates) {
    // Without dilation every head's window is a sliding span: blocks of
    // rows share one, and the executors mask each row's band (tile work, not
    // one query per block).
    for (int64_t start = int64_t{global} + kLongformerBlock; start < length;
         start += kLongformerBlock) {
      query_block_starts.push_back(static_cast<int32_t>(start));
    }
    if (query_block_starts.back() != length) query_block_starts.push_back(length);
    PatternPlanBuilder builder(length, heads, std::move(query_block_starts), {});
    for (int32_t head = 0; head < heads; ++head) {
      if (global > 0) {
        builder.AddSpan(0, length);
        builder.EndBlock();
      }
      for (int32_t block = global > 0 ? 1 : 0; block < builder.num_query_blocks(); ++block) {
        builder.AddSpan(0, global);
        builder.AddSlidingSpan(global, length, static_cast<int32_t>(-half_window),
                               static_cast<int32_t>(2 * half_window + 1));
        builder.EndBlock();
      }
    }
    PatternPlan plan = builder.Finish();
    plan.global_rows = global;
    return plan;
  }
  for (int32_t row = global + 1; row <= length; ++row) query_block_starts.push_back(row);
  PatternPlanBuilder builder(length, heads, std::move(query_block_starts), dilated_keys.Tokens());

  for (int32_t head = 0; head < heads; ++head) {
    const bool dilated = head >= heads - knobs.dilated_heads;
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
  PatternPlan plan = builder.Finish();
  plan.global_rows = global;
  return plan;
}

}  // namespace docsparse
