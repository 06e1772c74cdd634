// LSG plans kept across layers and requests. A sequence's plan depends on the
// config, its length and the derived keys' validity, which for every sparsity
// type but lsh follows from the layout (LsgValidFromLayout): the same plan in
// every layer of every request of that length, so the validity is made only
// with the plan, on a miss. Building both on the host takes 0.08-0.16 ms at
// 4,096 tokens and 0.33-0.68 ms at 16,384 (12 heads, the AVX2 kind;
// `docsparse-bench lsg_plan`) per item and layer, against a GPU forward
// whose host time is the bottleneck (docs/BENCHMARKS.md "GPU end to end":
// minilm-lsg spends ~6.5 ms a 4k document and ~16 ms a 16k one), so
// rebuilding it six times a document cost up to ~6-14% and ~12-24% of the
// GPU's throughput there.
#ifndef DOCSPARSE_MODEL_ATTENTION_LSG_PLAN_CACHE_H_
#define DOCSPARSE_MODEL_ATTENTION_LSG_PLAN_CACHE_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "model/attention/lsg_planner.h"
#include "model/attention/lsg_sparse_keys.h"

namespace docsparse {

// The last `capacity` distinct plans, least recently used evicted.
// Thread-safe; a plan handed out stays valid for as long as its holder keeps
// it, evicted or not.
class LsgPlanCache {
 public:
  explicit LsgPlanCache(size_t capacity = 64) : capacity_(capacity) {}

  // PlanLsgSequence(config, layout, heads, valid, padding_rows) with the
  // validity from the layout (none without derived keys), built once per
  // distinct set of inputs (the layout by its global and real tokens, from
  // which LayoutLsgSequence makes the rest). Only for sequences whose
  // validity does follow from the layout: DeriveLsgKeys left it empty.
  std::shared_ptr<const LsgPlan> Get(const LsgConfig& config, const LsgLayout& layout, int heads,
                                     bool padding_rows) ABSL_LOCKS_EXCLUDED(mu_);

  // Plans built, for tests.
  int64_t builds() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Entry {
    LsgConfig config;
    int32_t global = 0;
    int32_t tokens = 0;
    int heads = 0;
    bool padding_rows = false;
    std::shared_ptr<const LsgPlan> plan;
    uint64_t last_used = 0;
  };

  const size_t capacity_;
  mutable Mutex mu_;
  std::vector<Entry> entries_ ABSL_GUARDED_BY(mu_);
  uint64_t clock_ ABSL_GUARDED_BY(mu_) = 0;
  int64_t builds_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_LSG_PLAN_CACHE_H_
