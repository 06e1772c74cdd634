#include "model/attention/etc_pattern.h"

#include <algorithm>
#include <cassert>
#include <utility>
#include <vector>

namespace docsparse {
namespace {

// Long rows per query block, sharing one sliding span.
constexpr int32_t kEtcBlock = 64;

}  // namespace

void EtcSegment(int32_t global, int32_t length, int32_t s, int32_t* begin, int32_t* end) {
  const int64_t long_tokens = length - global;
  *begin = static_cast<int32_t>(global + s * long_tokens / global);
  *end = static_cast<int32_t>(global + (s + 1) * long_tokens / global);
}

PatternPlan PlanEtc(const EtcKnobs& knobs, int32_t length, int32_t heads) {
  assert(knobs.global_tokens >= 0 && knobs.radius >= 0);
  assert(length >= 0 && heads >= 1);
  const int32_t global = std::min(knobs.global_tokens, length);
  std::vector<int32_t> query_block_starts{0};
  for (int32_t row = 1; row <= global; ++row) query_block_starts.push_back(row);
  for (int64_t start = int64_t{global} + kEtcBlock; start < length; start += kEtcBlock) {
    query_block_starts.push_back(static_cast<int32_t>(start));
  }
  if (query_block_starts.back() != length) query_block_starts.push_back(length);

  PatternPlanBuilder builder(length, heads, std::move(query_block_starts), {});
  for (int32_t head = 0; head < heads; ++head) {
    for (int32_t row = 0; row < global; ++row) {
      builder.AddSpan(0, global);
      if (knobs.hard_g2l) {
        int32_t begin = 0, end = 0;
        EtcSegment(global, length, row, &begin, &end);
        builder.AddSpan(begin, end);
      } else {
        builder.AddSpan(global, length);
      }
      builder.EndBlock();
    }
    for (int32_t block = global; block < builder.num_query_blocks(); ++block) {
      builder.AddSpan(0, global);
      builder.AddSlidingSpan(global, length, -knobs.radius, 2 * knobs.radius + 1);
      builder.EndBlock();
    }
  }
  return builder.Finish();
}

}  // namespace docsparse
