// Brute force: Reformer's LSH pattern against its definition, written out
// here with the rotations the planner draws: buckets as argmax over
// [xR; −xR] computed in double, keys sorted by (bucket, index), each query's
// place counted pair by pair, its chunk and the one before, the union over
// rounds. Random knobs, odd lengths, head dims and seeds; plus what makes it
// LSH: a key equal to the query shares its bucket, and the plan depends on
// the seed.
#include "model/attention/lsh_pattern.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>
#include <string>
#include <vector>

namespace docsparse {
namespace {

int BucketByDefinition(const float* x, const std::vector<float>& rotation, int head_dim,
                       int buckets) {
  const int half = buckets / 2;
  std::vector<double> scores(buckets);
  for (int c = 0; c < half; ++c) {
    double dot = 0;
    for (int d = 0; d < head_dim; ++d) dot += double{x[d]} * rotation[d * half + c];
    scores[c] = dot;
    scores[half + c] = -dot;
  }
  return static_cast<int>(std::max_element(scores.begin(), scores.end()) - scores.begin());
}

// [n][n] mask of the definition.
std::vector<std::vector<bool>> MaskByDefinition(const LshKnobs& knobs, const std::vector<float>& q,
                                                const std::vector<float>& k, int n, int head_dim,
                                                uint64_t key) {
  std::vector<std::vector<bool>> mask(n, std::vector<bool>(n, false));
  for (int round = 0; round < knobs.rounds; ++round) {
    const std::vector<float> rotation = LshRotation(head_dim, knobs.buckets, key, round);
    std::vector<int> qb(n), kb(n);
    for (int i = 0; i < n; ++i) {
      qb[i] = BucketByDefinition(&q[i * head_dim], rotation, head_dim, knobs.buckets);
      kb[i] = BucketByDefinition(&k[i * head_dim], rotation, head_dim, knobs.buckets);
    }
    std::vector<std::pair<int, int>> sorted;  // (bucket, index)
    for (int j = 0; j < n; ++j) sorted.push_back({kb[j], j});
    std::sort(sorted.begin(), sorted.end());
    const int chunks = (n + knobs.chunk - 1) / knobs.chunk;
    for (int i = 0; i < n; ++i) {
      int place = 0;
      for (int j = 0; j < n; ++j) place += std::make_pair(kb[j], j) < std::make_pair(qb[i], i);
      const int t = std::min(place / knobs.chunk, chunks - 1);
      const int other = t > 0 ? t - 1 : std::min(1, chunks - 1);
      for (int s = 0; s < n; ++s) {
        const int c = s / knobs.chunk;
        if (c == t || c == other) mask[i][sorted[s].second] = true;
      }
    }
  }
  return mask;
}

std::string Mismatch(const HeadEdgeList& list, const std::vector<std::vector<bool>>& mask) {
  const int n = static_cast<int>(mask.size());
  if (list.rows() != n) return "rows " + std::to_string(list.rows());
  for (int i = 0; i < n; ++i) {
    std::vector<int32_t> row(list.keys.begin() + list.row_offsets[i],
                             list.keys.begin() + list.row_offsets[i + 1]);
    if (!std::is_sorted(row.begin(), row.end()) ||
        std::adjacent_find(row.begin(), row.end()) != row.end()) {
      return "row " + std::to_string(i) + " not distinct and ascending";
    }
    std::vector<int32_t> expected;
    for (int j = 0; j < n; ++j) {
      if (mask[i][j]) expected.push_back(j);
    }
    if (row != expected) {
      return "row " + std::to_string(i) + ": " + std::to_string(row.size()) + " keys, definition " +
             std::to_string(expected.size());
    }
  }
  return "";
}

TEST(LshPatternTest, MatchesDefinitionOnRandomConfigs) {
  std::mt19937 rng(20200113);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::normal_distribution<float> normal;
  for (int trial = 0; trial < 120; ++trial) {
    const int n = trial % 4 == 0 ? uniform(100, 260) : uniform(1, 40);
    const int head_dim = uniform(1, 3) * 8 + uniform(0, 1);
    const LshKnobs knobs{2 * uniform(1, 8), uniform(1, trial % 3 == 0 ? 64 : 9), uniform(1, 3)};
    std::vector<float> q(n * head_dim), k(n * head_dim);
    for (float& x : q) x = normal(rng);
    for (float& x : k) x = normal(rng);
    const uint64_t key = LshHeadKey(rng(), uniform(0, 11), uniform(0, 11));
    const HeadEdgeList list = PlanLshHead(knobs, q.data(), k.data(), n, head_dim, key);
    EXPECT_EQ(Mismatch(list, MaskByDefinition(knobs, q, k, n, head_dim, key)), "")
        << "n " << n << " d " << head_dim << " buckets " << knobs.buckets << " chunk "
        << knobs.chunk << " rounds " << knobs.rounds;
    EXPECT_LE(static_cast<double>(list.edges()), LshMaxHeadEdges(knobs, n));
  }
}

TEST(LshPatternTest, EmptyAndSingleToken) {
  const HeadEdgeList none = PlanLshHead({4, 2, 1}, nullptr, nullptr, 0, 8, 1);
  EXPECT_EQ(none.rows(), 0);
  const std::vector<float> x(8, 1.0f);
  const HeadEdgeList one = PlanLshHead({4, 2, 1}, x.data(), x.data(), 1, 8, 1);
  EXPECT_EQ(one.keys, std::vector<int32_t>{0});
}

TEST(LshPatternTest, AKeyEqualToItsQuerySharesItsBucket) {
  std::mt19937 rng(7);
  std::normal_distribution<float> normal;
  const int head_dim = 16;
  const std::vector<float> rotation = LshRotation(head_dim, 16, 99, 0);
  for (int trial = 0; trial < 50; ++trial) {
    std::vector<float> x(head_dim);
    for (float& v : x) v = normal(rng);
    std::vector<float> scaled = x;
    for (float& v : scaled) v *= 3.5f;
    EXPECT_EQ(LshBucket(x.data(), rotation.data(), head_dim, 16),
              LshBucket(scaled.data(), rotation.data(), head_dim, 16));
    EXPECT_EQ(LshBucket(x.data(), rotation.data(), head_dim, 16),
              BucketByDefinition(x.data(), rotation, head_dim, 16));
  }
}

TEST(LshPatternTest, PlanDependsOnTheSeed) {
  std::mt19937 rng(3);
  std::normal_distribution<float> normal;
  const int n = 300, head_dim = 16;
  std::vector<float> q(n * head_dim), k(n * head_dim);
  for (float& x : q) x = normal(rng);
  for (float& x : k) x = normal(rng);
  const LshKnobs knobs{8, 16, 1};
  const HeadEdgeList a = PlanLshHead(knobs, q.data(), k.data(), n, head_dim, LshHeadKey(1, 0, 0));
  const HeadEdgeList b = PlanLshHead(knobs, q.data(), k.data(), n, head_dim, LshHeadKey(1, 0, 0));
  const HeadEdgeList c = PlanLshHead(knobs, q.data(), k.data(), n, head_dim, LshHeadKey(2, 0, 0));
  EXPECT_EQ(a.keys, b.keys);
  EXPECT_NE(a.keys, c.keys);
}

}  // namespace
}  // namespace docsparse
