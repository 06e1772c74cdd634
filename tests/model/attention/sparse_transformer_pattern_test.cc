// Brute force: for random Sparse Transformer knobs and lengths, the plan is
// well formed and its dense mask equals the definitions of the strided and
// fixed patterns, written out here as double loops; and it stays
// O(rows · heads) spans.
#include "model/attention/sparse_transformer_pattern.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <random>
#include <sstream>
#include <string>

#include "tests/model/attention/pattern_mask.h"

namespace docsparse {
namespace {

bool StridedAllows(int stride, int i, int j) {
  return std::abs(i - j) < stride || (i - j) % stride == 0;
}

bool FixedAllows(int stride, int summary, int i, int j) {
  return j / stride == i / stride || j % stride >= stride - summary;
}

bool SparseTransformerAllows(const SparseTransformerKnobs& knobs, int heads, int head, int i,
                             int j) {
  const int fixed_heads = knobs.fixed_heads == -1 ? heads / 2 : knobs.fixed_heads;
  return head >= heads - fixed_heads ? FixedAllows(knobs.stride, knobs.summary, i, j)
                                     : StridedAllows(knobs.stride, i, j);
}

std::string Describe(const SparseTransformerKnobs& knobs, int length, int heads) {
  std::ostringstream out;
  out << "stride " << knobs.stride << " summary " << knobs.summary << " fixed_heads "
      << knobs.fixed_heads << " length " << length << " heads " << heads;
  return out.str();
}

void ExpectMatchesDefinition(const SparseTransformerKnobs& knobs, int length, int heads) {
  const PatternPlan plan = PlanSparseTransformer(knobs, length, heads);
  EXPECT_EQ(testing::PlanMismatch(plan,
                                  [&](int head, int i, int j) {
                                    return SparseTransformerAllows(knobs, heads, head, i, j);
                                  }),
            "")
      << Describe(knobs, length, heads);
}

TEST(SparseTransformerPatternTest, MatchesDefinitionOnRandomConfigs) {
  std::mt19937 rng(20190423);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 300; ++trial) {
    const int length = trial % 3 == 0 ? uniform(0, 300) : uniform(0, 30);
    const int heads = uniform(1, 5);
    SparseTransformerKnobs knobs;
    knobs.stride = trial % 5 == 0 ? uniform(1, length + 5) : uniform(1, 12);
    knobs.summary = uniform(1, knobs.stride);
    knobs.fixed_heads = uniform(-1, heads);
    ExpectMatchesDefinition(knobs, length, heads);
  }
}

TEST(SparseTransformerPatternTest, MatchesDefinitionOnEdgeConfigs) {
  for (int length : {0, 1, 2, 5, 12, 13}) {
    for (int stride : {1, 2, 4, 12, 40}) {
      for (int summary : {1, 2, stride}) {
        if (summary > stride) continue;
        for (int heads : {1, 2, 3}) {
          for (int fixed_heads : {-1, 0, 1, heads}) {
            ExpectMatchesDefinition({stride, summary, fixed_heads}, length, heads);
          }
        }
      }
    }
  }
}

TEST(SparseTransformerPatternTest, AllFixedHeadsUseStrideBlocks) {
  // With no strided head, no row needs a block of its own.
  const PatternPlan plan = PlanSparseTransformer({16, 4, 3}, 100, 3);
  EXPECT_EQ(plan.num_query_blocks(), 7);
  // Only the summary section: 6 full blocks of 4, and 100 − 96 = 4 < 16 − 4
  // tokens in the last block, none of them a summary.
  EXPECT_EQ(plan.key_gather.size(), 24u);
}

TEST(SparseTransformerPatternTest, SpansGrowLinearlyWithLength) {
  const int length = 4096, heads = 4;
  const PatternPlan plan = PlanSparseTransformer({64, 8, -1}, length, heads);
  // One block per row (strided heads), at most three spans each.
  EXPECT_EQ(plan.num_query_blocks(), length);
  EXPECT_LE(plan.spans.size(), 3u * heads * length);
}

}  // namespace
}  // namespace docsparse
