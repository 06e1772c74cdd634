// BigBird, two ways. The plan: for random knobs and lengths it is well formed
// and its dense mask equals the definition (global, window and the random
// blocks BigBirdRandomBlocks names), written out here as a double loop, also
// in transformers' layout (last block global, random blocks as copies of
// block 0 counted 1 + r times, full attention up to a length); it
// stays O(blocks · heads) spans. The random blocks: distinct, ascending,
// drawn only from the candidates, as many as asked (or as there are), a pure
// function of the inputs, sensitive to each input, and uniform (chi-square at
// significance 0.001 with fixed seeds, so deterministic, not flaky).
#include "model/attention/bigbird_pattern.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "tests/model/attention/pattern_mask.h"
#include "tests/model/attention/sbm_statistics.h"

namespace docsparse {
namespace {

int NumBlocks(const BigBirdKnobs& knobs, int length) {
  return (length + knobs.block_size - 1) / knobs.block_size;
}

// The random blocks' candidates, from the definition: neither global nor in
// the window.
std::vector<int> Candidates(const BigBirdKnobs& knobs, int num_blocks, int query_block) {
  std::vector<int> candidates;
  const bool last_global = knobs.last_block_global && num_blocks > knobs.global_blocks;
  for (int block = 0; block < num_blocks; ++block) {
    if (block >= knobs.global_blocks && !(last_global && block == num_blocks - 1) &&
        std::abs(block - query_block) > (knobs.window_blocks - 1) / 2) {
      candidates.push_back(block);
    }
  }
  return candidates;
}

std::string Describe(const BigBirdKnobs& knobs, int length, int heads) {
  std::ostringstream out;
  out << "block " << knobs.block_size << " window " << knobs.window_blocks << " global "
      << knobs.global_blocks << " random " << knobs.random_blocks << " last global "
      << knobs.last_block_global << " at first block " << knobs.random_at_first_block
      << " dense up to " << knobs.dense_up_to << " length " << length << " heads " << heads;
  return out.str();
}

void ExpectMatchesDefinition(const BigBirdKnobs& knobs, int length, int heads, uint64_t seed,
                             int layer) {
  const int b = knobs.block_size, num_blocks = NumBlocks(knobs, length);
  // random[head][query block][key block]
  std::vector<std::vector<std::vector<bool>>> random(
      heads, std::vector<std::vector<bool>>(num_blocks, std::vector<bool>(num_blocks, false)));
  if (!knobs.random_at_first_block) {
    for (int head = 0; head < heads; ++head) {
      for (int qb = 0; qb < num_blocks; ++qb) {
        for (int kb : BigBirdRandomBlocks(knobs, num_blocks, seed, layer, head, qb)) {
          random[head][qb][kb] = true;
        }
      }
    }
  }
  const bool dense = length <= knobs.dense_up_to;
  auto global = [&](int block) {
    return dense || block < knobs.global_blocks ||
           (knobs.last_block_global && block == num_blocks - 1);
  };
  // How many times query i computes token j: once where the pattern allows
  // it, and r more times for block 0's copies on a non-global row.
  auto times = [&](int head, int i, int j) {
    const int qb = i / b, kb = j / b;
    const bool allowed = global(qb) || global(kb) ||
                         std::abs(kb - qb) <= (knobs.window_blocks - 1) / 2 || random[head][qb][kb];
    const int copies =
        knobs.random_at_first_block && !global(qb) && kb == 0 ? knobs.random_blocks : 0;
    return (allowed ? 1 : 0) + copies;
  };
  const PatternPlan plan = PlanBigBird(knobs, length, heads, seed, layer);
  if (!knobs.random_at_first_block) {
    EXPECT_TRUE(plan.key_gather.empty());
    EXPECT_EQ(testing::PlanMismatch(plan, [&](int h, int i, int j) { return times(h, i, j) > 0; }),
              "")
        << Describe(knobs, length, heads);
  } else {
    EXPECT_EQ(testing::PlanCountMismatch(plan, times), "") << Describe(knobs, length, heads);
  }
}

TEST(BigBirdPatternTest, MatchesDefinitionOnRandomConfigs) {
  std::mt19937 rng(20200728);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 300; ++trial) {
    const int length = trial % 3 == 0 ? uniform(0, 300) : uniform(0, 40);
    const int heads = uniform(1, 5);
    BigBirdKnobs knobs;
    knobs.block_size = trial % 5 == 0 ? uniform(1, 64) : uniform(1, 6);
    knobs.window_blocks = 2 * uniform(0, trial % 4 == 0 ? 12 : 3) + 1;
    knobs.global_blocks = uniform(0, 5) == 0 ? uniform(0, 12) : uniform(0, 2);
    knobs.random_blocks = uniform(0, 5) == 0 ? uniform(0, 60) : uniform(0, 4);
    knobs.last_block_global = trial % 2 == 1;
    knobs.random_at_first_block = trial % 4 == 3 && knobs.random_blocks < 20;
    knobs.dense_up_to = trial % 7 == 0 ? uniform(0, 100) : 0;
    ExpectMatchesDefinition(knobs, length, heads, rng(), uniform(0, 23));
  }
}

TEST(BigBirdPatternTest, MatchesDefinitionOnEdgeConfigs) {
  for (int length : {0, 1, 2, 7, 16, 17}) {
    for (int block_size : {1, 4, 16, 40}) {
      for (int window : {1, 3, 9}) {
        for (int global : {0, 1, 5}) {
          for (int random : {0, 1, 30}) {
            ExpectMatchesDefinition({block_size, window, global, random}, length, 2, 7, 0);
          }
        }
      }
    }
  }
}

// transformers' layout, as a BigBird checkpoint's native plan sets it: 64-
// token blocks, 3 random blocks, full attention up to (5 + 2·3)·64 tokens.
TEST(BigBirdPatternTest, MatchesTransformersLayout) {
  BigBirdKnobs knobs{64, 3, 1, 3, true, true, 704};
  for (int length : {0, 1, 64, 704, 705, 768, 1000, 4096}) {
    ExpectMatchesDefinition(knobs, length, 2, 0, 0);
  }
  // Small blocks and odd lengths, where the first and last blocks, the
  // window and the partial last block meet.
  for (int block_size : {1, 2, 3, 8}) {
    for (int length = 0; length <= 70; length += 3) {
      for (int random : {0, 1, 2}) {
        knobs = {block_size, 3, 1, random, true, true, (5 + 2 * random) * block_size};
        ExpectMatchesDefinition(knobs, length, 2, 0, 0);
        knobs.dense_up_to = 0;
        ExpectMatchesDefinition(knobs, length, 2, 0, 0);
      }
    }
  }
}

TEST(BigBirdPatternTest, FirstBlockCopiesAreOneSpan) {
  // 16 blocks of 64: every non-global block reads the 3 copies of block 0
  // (192 gathered keys) as one span after the tokens.
  const PatternPlan plan = PlanBigBird({64, 3, 1, 3, true, true, 0}, 1024, 1, 0, 0);
  ASSERT_EQ(plan.key_gather.size(), 192u);
  for (int32_t block = 1; block < 15; ++block) {
    const KeySpan last = plan.spans[plan.span_offsets[block + 1] - 1];
    EXPECT_EQ(last.begin + last.length, 1024 + 192) << block;
  }
}

TEST(BigBirdPatternTest, PlanIsAFunctionOfSeedAndLayer) {
  const BigBirdKnobs knobs{16, 3, 1, 3};
  const PatternPlan plan = PlanBigBird(knobs, 1024, 2, 42, 3);
  auto same = [&](const PatternPlan& other) {
    return other.span_offsets == plan.span_offsets &&
           std::equal(
               other.spans.begin(), other.spans.end(), plan.spans.begin(), plan.spans.end(),
               [](KeySpan a, KeySpan b) { return a.begin == b.begin && a.length == b.length; });
  };
  EXPECT_TRUE(same(PlanBigBird(knobs, 1024, 2, 42, 3)));
  EXPECT_FALSE(same(PlanBigBird(knobs, 1024, 2, 43, 3)));
  EXPECT_FALSE(same(PlanBigBird(knobs, 1024, 2, 42, 4)));
}

TEST(BigBirdPatternTest, SpansGrowLinearlyWithLength) {
  const int length = 4096, heads = 4;
  const BigBirdKnobs knobs{1, 3, 2, 3};
  const PatternPlan plan = PlanBigBird(knobs, length, heads, 1, 0);
  // Token-sized blocks: at most global + window + r spans per block.
  EXPECT_EQ(plan.num_query_blocks(), length);
  EXPECT_LE(plan.spans.size(), (2u + knobs.random_blocks) * heads * length);
}

TEST(BigBirdPatternTest, RandomBlocksAreDistinctAscendingCandidates) {
  std::mt19937 rng(5);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  for (int trial = 0; trial < 3000; ++trial) {
    const BigBirdKnobs knobs{1, 2 * uniform(0, 6) + 1, uniform(0, 6), uniform(0, 40)};
    const int num_blocks = uniform(1, 60);
    const int query_block = uniform(0, num_blocks - 1);
    const std::vector<int> candidates = Candidates(knobs, num_blocks, query_block);
    const std::vector<int32_t> blocks =
        BigBirdRandomBlocks(knobs, num_blocks, rng(), uniform(0, 11), uniform(0, 15), query_block);
    SCOPED_TRACE(Describe(knobs, num_blocks, 1) + " query block " + std::to_string(query_block));
    EXPECT_EQ(blocks.size(),
              std::min<size_t>(static_cast<size_t>(knobs.random_blocks), candidates.size()));
    EXPECT_TRUE(std::adjacent_find(blocks.begin(), blocks.end(), std::greater_equal<int32_t>()) ==
                blocks.end());
    for (int32_t block : blocks) {
      EXPECT_TRUE(std::binary_search(candidates.begin(), candidates.end(), block)) << block;
    }
  }
}

TEST(BigBirdPatternTest, RandomBlocksAreAFunctionOfTheInputs) {
  const BigBirdKnobs knobs{64, 3, 2, 3};
  // 64 blocks: a middle query block has 64 − 2 − 3 = 59 candidates, so two
  // unrelated draws of 3 agree with probability 1 / C(59, 3) ≈ 3e-5.
  const int num_blocks = 64;
  int same_seed = 0, same_layer = 0, same_head = 0, same_block = 0, same_neighbours = 0;
  for (int t = 0; t < 1000; ++t) {
    const uint64_t seed = 1000003ULL * t;
    const int layer = t % 12, head = t % 8, qb = 10 + t % 40;
    const std::vector<int32_t> blocks =
        BigBirdRandomBlocks(knobs, num_blocks, seed, layer, head, qb);
    ASSERT_EQ(blocks, BigBirdRandomBlocks(knobs, num_blocks, seed, layer, head, qb));
    same_seed += blocks == BigBirdRandomBlocks(knobs, num_blocks, seed + 1, layer, head, qb);
    same_layer += blocks == BigBirdRandomBlocks(knobs, num_blocks, seed, layer + 1, head, qb);
    same_head += blocks == BigBirdRandomBlocks(knobs, num_blocks, seed, layer, head + 1, qb);
    same_block += blocks == BigBirdRandomBlocks(knobs, num_blocks, seed, layer, head, qb + 1);
    // Inputs must not just add up: (seed + 1, layer) is not (seed, layer + 1).
    same_neighbours += BigBirdRandomBlocks(knobs, num_blocks, seed + 1, layer, head, qb) ==
                       BigBirdRandomBlocks(knobs, num_blocks, seed, layer + 1, head, qb);
    same_neighbours += BigBirdRandomBlocks(knobs, num_blocks, seed, layer + 1, head, qb) ==
                       BigBirdRandomBlocks(knobs, num_blocks, seed, layer, head + 1, qb);
  }
  EXPECT_LE(same_seed, 5);
  EXPECT_LE(same_layer, 5);
  EXPECT_LE(same_head, 5);
  EXPECT_LE(same_block, 5);
  EXPECT_LE(same_neighbours, 5);
}

// Which input changes from draw to draw in the uniformity tests.
enum class Varied { kSeed, kLayer, kHead };

std::vector<int32_t> Draw(const BigBirdKnobs& knobs, int num_blocks, int query_block, Varied varied,
                          int t) {
  const uint64_t seed = varied == Varied::kSeed ? 77 + t : 77;
  const int layer = varied == Varied::kLayer ? t : 5;
  const int head = varied == Varied::kHead ? t : 3;
  return BigBirdRandomBlocks(knobs, num_blocks, seed, layer, head, query_block);
}

TEST(BigBirdPatternTest, RandomBlocksAreUniformOverCandidates) {
  // 40 blocks, query block 20: 40 − 2 − 5 = 33 candidates, 4 drawn each time.
  const BigBirdKnobs knobs{64, 5, 2, 4};
  const int num_blocks = 40, query_block = 20, draws = 20000;
  const std::vector<int> candidates = Candidates(knobs, num_blocks, query_block);
  for (Varied varied : {Varied::kSeed, Varied::kLayer, Varied::kHead}) {
    std::vector<double> observed(num_blocks, 0);
    for (int t = 0; t < draws; ++t) {
      for (int32_t block : Draw(knobs, num_blocks, query_block, varied, t)) {
        ++observed[block];
      }
    }
    std::vector<double> seen, expected;
    for (int block : candidates) {
      seen.push_back(observed[block]);
      expected.push_back(static_cast<double>(draws) * knobs.random_blocks / candidates.size());
    }
    // Pearson against the multinomial is conservative here: inclusions of
    // one draw are negatively correlated, which only lowers the statistic's
    // variance. A generator favouring some blocks still fails by far.
    const testing::ChiSquare test = testing::PearsonChiSquare(seen, expected, 5);
    EXPECT_GT(test.p_value, testing::kSignificance)
        << "varied input " << static_cast<int>(varied) << " chi2 " << test.statistic;
  }
}

TEST(BigBirdPatternTest, RandomBlockSetsAreUniform) {
  // 12 blocks, query block 6: candidates {1..4, 8..11}; all C(8, 2) = 28
  // pairs equally likely (sampling without replacement, not just uniform
  // marginals).
  const BigBirdKnobs knobs{64, 3, 1, 2};
  const int num_blocks = 12, query_block = 6, draws = 28000;
  for (Varied varied : {Varied::kSeed, Varied::kLayer, Varied::kHead}) {
    std::map<std::vector<int32_t>, double> counts;
    for (int t = 0; t < draws; ++t) {
      ++counts[Draw(knobs, num_blocks, query_block, varied, t)];
    }
    EXPECT_EQ(counts.size(), 28u);
    std::vector<double> observed, expected;
    for (const auto& [set, count] : counts) {
      observed.push_back(count);
      expected.push_back(draws / 28.0);
    }
    const testing::ChiSquare test = testing::PearsonChiSquare(observed, expected, 5);
    EXPECT_GT(test.p_value, testing::kSignificance)
        << "varied input " << static_cast<int>(varied) << " chi2 " << test.statistic;
  }
}

}  // namespace
}  // namespace docsparse
