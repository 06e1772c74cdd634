// Plans as lists of pairs (model/attention/edge_plan.h): a position
// pattern's list is exactly its plan's mask (ExpandPatternPlan, itself held
// to each paper's definition), each token once per row even where BigBird
// repeats block 0; a union holds every pair of any part once.
#include "model/attention/edge_plan.h"

#include <gtest/gtest.h>

#include <random>
#include <set>

#include "model/attention/bigbird_pattern.h"
#include "model/attention/longformer_pattern.h"
#include "model/attention/sparse_transformer_pattern.h"
#include "tests/model/attention/pattern_mask.h"

namespace docsparse {
namespace {

void ExpectListIsMask(const PatternPlan& plan, const std::string& what) {
  const testing::PatternMask mask = testing::ExpandPatternPlan(plan, /*repeats=*/true);
  ASSERT_TRUE(mask.faults.empty()) << what << testing::DescribeFaults(mask.faults);
  for (int32_t head = 0; head < plan.heads; ++head) {
    const HeadEdgeList list = PatternHeadEdges(plan, head);
    ASSERT_EQ(list.rows(), plan.length) << what;
    for (int32_t i = 0; i < plan.length; ++i) {
      std::vector<int32_t> expected;
      for (int32_t j = 0; j < plan.length; ++j) {
        if (mask.At(head, i, j)) expected.push_back(j);
      }
      const std::vector<int32_t> row(list.keys.begin() + list.row_offsets[i],
                                     list.keys.begin() + list.row_offsets[i + 1]);
      ASSERT_EQ(row, expected) << what << " head " << head << " row " << i;
    }
  }
}

TEST(EdgePlanTest, PatternListsAreTheirMasks) {
  std::mt19937 rng(5);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 60; ++trial) {
    const int n = trial % 5 == 0 ? uniform(100, 200) : uniform(0, 40);
    const int heads = uniform(1, 3);
    ExpectListIsMask(
        PlanLongformer({2 * uniform(1, 6), uniform(1, 3), uniform(0, heads), uniform(0, 3)}, n,
                       heads),
        "longformer");
    ExpectListIsMask(PlanBigBird({uniform(1, 9), 2 * uniform(0, 2) + 1, uniform(0, 2),
                                  uniform(0, 3), uniform(0, 1) == 1, uniform(0, 1) == 1, 0},
                                 n, heads, rng(), uniform(0, 3)),
                     "bigbird");
    const int stride = uniform(1, 9);
    ExpectListIsMask(
        PlanSparseTransformer({stride, uniform(1, stride), uniform(0, heads)}, n, heads),
        "sparse_transformer");
  }
}

TEST(EdgePlanTest, UnionHoldsEveryPairOnce) {
  std::mt19937 rng(9);
  for (int trial = 0; trial < 40; ++trial) {
    const int n = std::uniform_int_distribution<int>(0, 30)(rng);
    std::vector<HeadEdgeList> parts(std::uniform_int_distribution<int>(1, 3)(rng));
    std::vector<std::set<int32_t>> expected(n);
    for (HeadEdgeList& part : parts) {
      part.row_offsets = {0};
      for (int i = 0; i < n; ++i) {
        std::set<int32_t> row;
        for (int j = 0; j < n; ++j) {
          if (rng() % 3 == 0) row.insert(j);
        }
        part.keys.insert(part.keys.end(), row.begin(), row.end());
        part.row_offsets.push_back(static_cast<int64_t>(part.keys.size()));
        expected[i].insert(row.begin(), row.end());
      }
    }
    const HeadEdgeList merged = UnionOfEdges(parts);
    ASSERT_EQ(merged.rows(), n);
    int64_t total = 0;
    for (int i = 0; i < n; ++i) {
      const std::vector<int32_t> row(merged.keys.begin() + merged.row_offsets[i],
                                     merged.keys.begin() + merged.row_offsets[i + 1]);
      EXPECT_EQ(row, std::vector<int32_t>(expected[i].begin(), expected[i].end())) << i;
      total += static_cast<int64_t>(expected[i].size());
    }
    EXPECT_EQ(merged.edges(), total);
  }
}

TEST(EdgePlanTest, UnionKeepsTheSmallestBiasOfAPair) {
  // Row 0: a sampled part (biased) and a certain one (no biases: 0).
  const HeadEdgeList sampled{{0, 3}, {1, 4, 7}, {2.0f, 0.5f, 3.0f}};
  const HeadEdgeList certain{{0, 2}, {0, 4}, {}};
  const HeadEdgeList also_sampled{{0, 1}, {7}, {1.0f}};
  const HeadEdgeList merged = UnionOfEdges({sampled, certain, also_sampled});
  EXPECT_EQ(merged.keys, (std::vector<int32_t>{0, 1, 4, 7}));
  EXPECT_EQ(merged.logit_bias, (std::vector<float>{0.0f, 2.0f, 0.0f, 1.0f}));
  EXPECT_TRUE(UnionOfEdges({certain, certain}).logit_bias.empty());
}

}  // namespace
}  // namespace docsparse
