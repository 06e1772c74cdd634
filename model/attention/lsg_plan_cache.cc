#include "model/attention/lsg_plan_cache.h"

#include <algorithm>
#include <tuple>
#include <utility>

namespace docsparse {
namespace {

// Every field of LsgConfig: a field added there and not here would let two
// configs share a plan.
auto Fields(const LsgConfig& c) {
  return std::make_tuple(c.block_size, c.sparse_block_size, c.sparsity_factor, c.sparsity_type,
                         c.num_global_tokens, c.adaptive, c.mask_first_token, c.pool_with_global,
                         c.lsh_num_pre_rounds);
}
static_assert(sizeof(LsgConfig) == 28, "LsgConfig changed: compare its new fields in Fields()");

}  // namespace

std::shared_ptr<const LsgPlan> LsgPlanCache::Get(const LsgConfig& config, const LsgLayout& layout,
                                                 int heads, bool padding_rows) {
  {
    MutexLock lock(&mu_);
    for (Entry& entry : entries_) {
      if (entry.tokens == layout.tokens && entry.global == layout.global && entry.heads == heads &&
          entry.padding_rows == padding_rows && Fields(entry.config) == Fields(config)) {
        entry.last_used = ++clock_;
        return entry.plan;
      }
    }
  }
  // Built outside the lock: two threads may both build the same plan; both
  // are right, and the second is simply kept too.
  const bool derives_keys = !layout.full && layout.derived_keys > 0;
  auto plan = std::make_shared<const LsgPlan>(PlanLsgSequence(
      config, layout, heads,
      derives_keys ? LsgValidFromLayout(config, layout, heads) : std::vector<uint8_t>(),
      padding_rows));
  MutexLock lock(&mu_);
  ++builds_;
  if (entries_.size() >= capacity_ && !entries_.empty()) {
    const auto oldest =
        std::min_element(entries_.begin(), entries_.end(),
                         [](const Entry& a, const Entry& b) { return a.last_used < b.last_used; });
    entries_.erase(oldest);
  }
  if (capacity_ > 0) {
    entries_.push_back(
        Entry{config, layout.global, layout.tokens, heads, padding_rows, plan, ++clock_});
  }
  return plan;
}

int64_t LsgPlanCache::builds() const {
  MutexLock lock(&mu_);
  return builds_;
}

}  // namespace docsparse
