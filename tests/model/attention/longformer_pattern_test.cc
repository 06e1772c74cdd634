// Brute force: for random Longformer knobs and lengths, the plan is well
// formed and its dense mask equals the paper's definition, written out here
// as a double loop; and the plan stays O(rows · heads) spans.
#include "model/attention/longformer_pattern.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <sstream>
#include <string>

#include "tests/model/attention/pattern_mask.h"

namespace docsparse {
namespace {

bool LongformerAllows(const LongformerKnobs& knobs, int heads, int head, int i, int j) {
  const int g = knobs.global_tokens;
  const int d = head >= heads - knobs.dilated_heads ? knobs.dilation : 1;
  if (i < g || j < g) return true;
  return (j - i) % d == 0 && std::abs(j - i) <= static_cast<int64_t>(knobs.window / 2) * d;
}

std::string Describe(const LongformerKnobs& knobs, int length, int heads) {
  std::ostringstream out;
  out << "window " << knobs.window << " dilation " << knobs.dilation << " dilated_heads "
      << knobs.dilated_heads << " global " << knobs.global_tokens << " length " << length
      << " heads " << heads;
  return out.str();
}

void ExpectMatchesDefinition(const LongformerKnobs& knobs, int length, int heads) {
  const PatternPlan plan = PlanLongformer(knobs, length, heads);
  EXPECT_EQ(
      testing::PlanMismatch(
          plan, [&](int head, int i, int j) { return LongformerAllows(knobs, heads, head, i, j); }),
      "")
      << Describe(knobs, length, heads);
}

TEST(LongformerPatternTest, MatchesDefinitionOnRandomConfigs) {
  std::mt19937 rng(20200410);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 300; ++trial) {
    // Mostly short sequences, where the edges (window past both ends, global
    // past the end) are common; some up to 300.
    const int length = trial % 3 == 0 ? uniform(0, 300) : uniform(0, 24);
    const int heads = uniform(1, 5);
    LongformerKnobs knobs;
    knobs.window = 2 * uniform(1, trial % 4 == 0 ? 40 : 6);
    knobs.dilation = uniform(1, 7);
    knobs.dilated_heads = uniform(0, heads);
    knobs.global_tokens = uniform(0, 4) == 0 ? uniform(0, length + 3) : uniform(0, 3);
    ExpectMatchesDefinition(knobs, length, heads);
  }
}

TEST(LongformerPatternTest, MatchesDefinitionOnEdgeConfigs) {
  for (int length : {0, 1, 2, 3, 7, 16}) {
    for (int window : {2, 4, 64}) {
      for (int dilation : {1, 2, 5, 40}) {
        for (int global : {0, 1, 3, 16, 100}) {
          for (int heads : {1, 3}) {
            for (int dilated_heads : {0, 1, heads}) {
              ExpectMatchesDefinition({window, dilation, dilated_heads, global}, length, heads);
            }
          }
        }
      }
    }
  }
}

TEST(LongformerPatternTest, GathersOnlyForDilatedHeads) {
  EXPECT_TRUE(PlanLongformer({8, 3, 0, 2}, 100, 4).key_gather.empty());
  EXPECT_TRUE(PlanLongformer({8, 1, 4, 2}, 100, 4).key_gather.empty());
  // Every non-global token once.
  EXPECT_EQ(PlanLongformer({8, 3, 1, 2}, 100, 4).key_gather.size(), 98u);
}

TEST(LongformerPatternTest, SpansGrowLinearlyWithLength) {
  const int length = 4096, heads = 4;
  const PatternPlan plan = PlanLongformer({512, 3, 2, 2}, length, heads);
  // The global block plus one block per remaining row, at most two spans each.
  EXPECT_EQ(plan.num_query_blocks(), 1 + (length - 2));
  EXPECT_LE(plan.spans.size(), 2u * heads * plan.num_query_blocks());
}

// Executors without sliding spans (CUDA) get ExpandSlides' plan: one query
// per block, the same mask, the same edges.
TEST(LongformerPatternTest, ExpandedSlidesKeepTheMask) {
  for (int32_t length : {0, 1, 65, 300}) {
    const PatternPlan sliding = PlanLongformer({16, 1, 0, 2}, length, 3);
    const PatternPlan fixed = ExpandSlides(sliding);
    EXPECT_TRUE(fixed.slides.empty());
    EXPECT_EQ(fixed.num_query_blocks(), length);
    EXPECT_EQ(fixed.head_edges, sliding.head_edges);
    const testing::PatternMask a = testing::ExpandPatternPlan(sliding);
    const testing::PatternMask b = testing::ExpandPatternPlan(fixed);
    ASSERT_TRUE(a.faults.empty() && b.faults.empty()) << length;
    EXPECT_EQ(a.allowed, b.allowed) << length;
  }
}

}  // namespace
}  // namespace docsparse
