// Brute force: for random Star-Transformer knobs and lengths, the plan is
// well formed and its dense mask equals the definition (band plus relay
// tokens), written out here as a double loop; and it stays O(rows · heads)
// spans.
#include "model/attention/star_pattern.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "tests/model/attention/pattern_mask.h"

namespace docsparse {
namespace {

bool StarAllows(const StarKnobs& knobs, int i, int j) {
  return i < knobs.relay_tokens || j < knobs.relay_tokens || std::abs(i - j) <= knobs.radius;
}

void ExpectMatchesDefinition(const StarKnobs& knobs, int length, int heads) {
  const PatternPlan plan = PlanStar(knobs, length, heads);
  EXPECT_TRUE(plan.key_gather.empty());
  EXPECT_EQ(testing::PlanMismatch(plan, [&](int, int i, int j) { return StarAllows(knobs, i, j); }),
            "")
      << "radius " << knobs.radius << " relay " << knobs.relay_tokens << " length " << length
      << " heads " << heads;
}

TEST(StarPatternTest, MatchesDefinitionOnRandomConfigs) {
  std::mt19937 rng(20190227);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 200; ++trial) {
    const int length = trial % 3 == 0 ? uniform(0, 300) : uniform(0, 20);
    const int heads = uniform(1, 5);
    const StarKnobs knobs{uniform(1, trial % 4 == 0 ? 40 : 4),
                          uniform(0, 4) == 0 ? uniform(0, length + 2) : uniform(0, 2)};
    ExpectMatchesDefinition(knobs, length, heads);
  }
}

TEST(StarPatternTest, MatchesDefinitionOnEdgeConfigs) {
  for (int length : {0, 1, 2, 3, 9}) {
    for (int radius : {1, 2, 8, 2147483647}) {
      for (int relay : {0, 1, 9, 50}) ExpectMatchesDefinition({radius, relay}, length, 2);
    }
  }
}

TEST(StarPatternTest, SpansGrowLinearlyWithLength) {
  const int length = 4096, heads = 4;
  const PatternPlan plan = PlanStar({1, 1}, length, heads);
  EXPECT_LE(plan.spans.size(), 2u * heads * length);
}

}  // namespace
}  // namespace docsparse
