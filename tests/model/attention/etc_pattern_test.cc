// Brute force: for random ETC knobs and lengths, the plan is well formed and
// its dense mask equals ETC's four pieces (g2g, g2l with or without hard
// masking by segment, l2g, l2l within the radius), written out here from the
// paper's definition; hard g2l gives every long token to exactly one global
// token.
#include "model/attention/etc_pattern.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>

#include "tests/model/attention/pattern_mask.h"

namespace docsparse {
namespace {

// ETC's mask, from the definition: the segments are computed here, not
// with EtcSegment.
bool EtcAllows(const EtcKnobs& knobs, int length, int i, int j) {
  const int g = std::min(knobs.global_tokens, length);
  if (j < g) return true;                              // g2g, l2g
  if (i >= g) return std::abs(i - j) <= knobs.radius;  // l2l
  if (!knobs.hard_g2l) return true;                    // g2l
  // Global token i's segment: long token j belongs to segment s when
  // ⌊s·L/g⌋ <= j − g < ⌊(s+1)·L/g⌋.
  const long long long_tokens = length - g, at = j - g;
  return static_cast<long long>(i) * long_tokens / g <= at &&
         at < static_cast<long long>(i + 1) * long_tokens / g;
}

void ExpectMatchesDefinition(const EtcKnobs& knobs, int length, int heads) {
  const PatternPlan plan = PlanEtc(knobs, length, heads);
  EXPECT_TRUE(plan.key_gather.empty());
  EXPECT_EQ(testing::PlanMismatch(
                plan, [&](int, int i, int j) { return EtcAllows(knobs, length, i, j); }),
            "")
      << "global " << knobs.global_tokens << " radius " << knobs.radius << " hard "
      << knobs.hard_g2l << " length " << length << " heads " << heads;
}

TEST(EtcPatternTest, MatchesDefinitionOnRandomConfigs) {
  std::mt19937 rng(20200417);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 200; ++trial) {
    const int length = trial % 3 == 0 ? uniform(0, 300) : uniform(0, 23);
    const EtcKnobs knobs{uniform(0, 3) == 0 ? uniform(0, length + 2) : uniform(0, 4),
                         uniform(0, trial % 4 == 0 ? 70 : 5), uniform(0, 1) == 1};
    ExpectMatchesDefinition(knobs, length, uniform(1, 4));
  }
}

TEST(EtcPatternTest, MatchesDefinitionOnEdgeConfigs) {
  for (int length : {0, 1, 2, 3, 10, 65, 130}) {
    for (int global : {0, 1, 3, 200}) {
      for (int radius : {0, 1, 64, 1 << 20}) {
        for (bool hard : {false, true}) ExpectMatchesDefinition({global, radius, hard}, length, 2);
      }
    }
  }
}

TEST(EtcPatternTest, HardG2lGivesEachLongTokenOneGlobalToken) {
  for (int length : {7, 64, 1000}) {
    for (int global : {1, 3, 7}) {
      std::vector<int> owners(length, 0);
      for (int s = 0; s < global; ++s) {
        int32_t begin = 0, end = 0;
        EtcSegment(global, length, s, &begin, &end);
        for (int j = begin; j < end; ++j) ++owners[j];
      }
      for (int j = global; j < length; ++j) EXPECT_EQ(owners[j], 1) << j;
    }
  }
}

}  // namespace
}  // namespace docsparse
