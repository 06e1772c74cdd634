// The LSG plan cache hands out, for each set of inputs, the plan
// PlanLsgSequence makes of them with the validity from the layout: the same
// object again for the same inputs, a fresh one when any input differs
// (length, heads, padding rows, any config field), the oldest evicted past
// capacity, and the same plans from several threads at once.
#include "model/attention/lsg_plan_cache.h"

#include <gtest/gtest.h>

#include <functional>
#include <thread>
#include <vector>

namespace docsparse {
namespace {

struct Inputs {
  LsgConfig config;
  int32_t tokens = 1000;
  int heads = 3;
  bool padding_rows = false;
};

LsgLayout LayoutOf(const Inputs& in) {
  return LayoutLsgSequence(in.config, in.config.num_global_tokens, in.tokens);
}

std::vector<uint8_t> ValidOf(const Inputs& in) {
  return LsgValidFromLayout(in.config, LayoutOf(in), in.heads);
}

void ExpectSamePlan(const LsgPlan& got, const LsgPlan& want) {
  EXPECT_EQ(got.query_block_starts, want.query_block_starts);
  EXPECT_EQ(got.span_offsets, want.span_offsets);
  ASSERT_EQ(got.spans.size(), want.spans.size());
  for (size_t i = 0; i < want.spans.size(); ++i) {
    EXPECT_EQ(got.spans[i].begin, want.spans[i].begin) << i;
    EXPECT_EQ(got.spans[i].length, want.spans[i].length) << i;
  }
  EXPECT_EQ(got.head_edges, want.head_edges);
}

std::shared_ptr<const LsgPlan> Get(LsgPlanCache& cache, const Inputs& in) {
  const std::shared_ptr<const LsgPlan> plan =
      cache.Get(in.config, LayoutOf(in), in.heads, in.padding_rows);
  ExpectSamePlan(*plan,
                 PlanLsgSequence(in.config, LayoutOf(in), in.heads, ValidOf(in), in.padding_rows));
  return plan;
}

TEST(LsgPlanCacheTest, SameInputsSamePlanAnyDifferenceAnother) {
  LsgPlanCache cache;
  const Inputs base;
  const auto first = Get(cache, base);
  EXPECT_EQ(Get(cache, base), first);
  EXPECT_EQ(cache.builds(), 1);

  std::vector<std::function<void(Inputs&)>> changes = {
      [](Inputs& in) { in.tokens = 999; },
      [](Inputs& in) { in.heads = 4; },
      [](Inputs& in) { in.padding_rows = true; },
      [](Inputs& in) { in.config.block_size = 64; },
      [](Inputs& in) { in.config.sparse_block_size = 64; },
      [](Inputs& in) { in.config.sparsity_factor = 4; },
      [](Inputs& in) { in.config.sparsity_type = LsgSparsity::kStride; },
      [](Inputs& in) { in.config.num_global_tokens = 2; },
      [](Inputs& in) { in.config.mask_first_token = true; },
  };
  int64_t builds = 1;
  for (size_t i = 0; i < changes.size(); ++i) {
    SCOPED_TRACE(i);
    Inputs changed = base;
    changes[i](changed);
    const auto plan = Get(cache, changed);
    EXPECT_NE(plan, first);
    EXPECT_EQ(cache.builds(), ++builds);
    EXPECT_EQ(Get(cache, changed), plan);  // kept too
  }
  EXPECT_EQ(Get(cache, base), first);
  EXPECT_EQ(cache.builds(), builds);
}

TEST(LsgPlanCacheTest, EvictsTheLeastRecentlyUsed) {
  LsgPlanCache cache(3);
  Inputs a, b, c, d;
  b.tokens = 900;
  c.tokens = 800;
  d.tokens = 700;
  const auto plan_a = Get(cache, a);
  Get(cache, b);
  Get(cache, c);
  EXPECT_EQ(Get(cache, a), plan_a);  // a used last: b is the oldest now
  Get(cache, d);                     // evicts b
  EXPECT_EQ(cache.builds(), 4);
  EXPECT_EQ(Get(cache, a), plan_a);
  Get(cache, b);
  EXPECT_EQ(cache.builds(), 5);
  // An evicted plan stays valid for whoever holds it.
  EXPECT_EQ(plan_a->head_edges.size(), 3u);
}

TEST(LsgPlanCacheTest, ThreadsGetTheSamePlans) {
  LsgPlanCache cache(8);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&cache, t] {
      for (int i = 0; i < 40; ++i) {
        Inputs in;
        in.tokens = 500 + 100 * ((i + t) % 10);  // more lengths than the capacity
        Get(cache, in);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
}

}  // namespace
}  // namespace docsparse
