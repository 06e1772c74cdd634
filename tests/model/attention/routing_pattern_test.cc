// Brute force: the Routing Transformer's pattern against its definition,
// written out here: each query to its nearest centroid, each cluster's w
// keys by a full sort of the dot products, the mask from both; random
// cluster counts, odd lengths and head dims. Spherical k-means never lowers
// its objective from step to step, and every row has ⌈n / k'⌉ keys.
#include "model/attention/routing_pattern.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <random>
#include <vector>

namespace docsparse {
namespace {

std::vector<double> Unit(const float* x, int head_dim) {
  double norm = 0;
  for (int d = 0; d < head_dim; ++d) norm += double{x[d]} * x[d];
  std::vector<double> u(head_dim);
  for (int d = 0; d < head_dim; ++d) u[d] = norm > 0 ? x[d] / std::sqrt(norm) : 0;
  return u;
}

double Dot(const std::vector<float>& centroids, int c, const std::vector<double>& u) {
  double sum = 0;
  for (size_t d = 0; d < u.size(); ++d) sum += centroids[c * u.size() + d] * u[d];
  return sum;
}

TEST(RoutingPatternTest, MatchesDefinitionOnRandomConfigs) {
  std::mt19937 rng(20210301);
  auto uniform = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  std::normal_distribution<float> normal;
  for (int trial = 0; trial < 100; ++trial) {
    const int n = trial % 4 == 0 ? uniform(100, 300) : uniform(1, 40);
    const int head_dim = uniform(1, 3) * 8 + uniform(0, 1);
    const RoutingKnobs knobs{uniform(1, trial % 3 == 0 ? 50 : 6), uniform(0, 3)};
    std::vector<float> q(n * head_dim), k(n * head_dim);
    for (float& x : q) x = normal(rng);
    for (float& x : k) x = normal(rng);
    const std::vector<float> centroids = FitRoutingCentroids(
        knobs, q.data(), k.data(), n, head_dim, RoutingHeadKey(rng(), 0, uniform(0, 5)));
    const int clusters = static_cast<int>(centroids.size()) / head_dim;
    ASSERT_EQ(clusters, std::min(knobs.clusters, n));
    const HeadEdgeList list = RouteHead(centroids, q.data(), k.data(), n, head_dim);
    ASSERT_EQ(list.rows(), n);

    const int w = (n + clusters - 1) / clusters;
    EXPECT_EQ(w, RoutingKeysPerQuery(knobs, n));
    std::vector<std::vector<int32_t>> routed(clusters);
    for (int c = 0; c < clusters; ++c) {
      std::vector<std::pair<double, int>> scored;  // (−dot, index): ascending is best first
      for (int j = 0; j < n; ++j) {
        scored.push_back({-Dot(centroids, c, Unit(&k[j * head_dim], head_dim)), j});
      }
      std::sort(scored.begin(), scored.end());
      for (int r = 0; r < w; ++r) routed[c].push_back(scored[r].second);
      std::sort(routed[c].begin(), routed[c].end());
    }
    for (int i = 0; i < n; ++i) {
      const std::vector<double> u = Unit(&q[i * head_dim], head_dim);
      int best = 0;
      for (int c = 1; c < clusters; ++c) {
        if (Dot(centroids, c, u) > Dot(centroids, best, u)) best = c;
      }
      const std::vector<int32_t> row(list.keys.begin() + list.row_offsets[i],
                                     list.keys.begin() + list.row_offsets[i + 1]);
      if (row != routed[best]) {
        ADD_FAILURE() << "trial " << trial << " n " << n << " clusters " << clusters << " row " << i
                      << ": " << row.size() << " keys, definition " << routed[best].size();
        break;
      }
    }
  }
}

TEST(RoutingPatternTest, KMeansNeverLowersItsObjective) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  const int n = 500, head_dim = 12;
  std::vector<float> q(n * head_dim), k(n * head_dim);
  for (int i = 0; i < n; ++i) {
    // Three directions plus noise: structure k-means can find.
    for (int d = 0; d < head_dim; ++d) {
      q[i * head_dim + d] = (d == i % 3 ? 4.0f : 0.0f) + normal(rng);
      k[i * head_dim + d] = (d == (i + 1) % 3 ? 4.0f : 0.0f) + normal(rng);
    }
  }
  double previous = -1e30;
  for (int iterations : {0, 1, 2, 3, 6}) {
    const std::vector<float> centroids =
        FitRoutingCentroids({6, iterations}, q.data(), k.data(), n, head_dim, 5);
    const double objective = RoutingObjective(centroids, q.data(), k.data(), n, head_dim);
    EXPECT_GE(objective, previous - 1e-3) << iterations << " iterations";
    previous = objective;
  }
}

TEST(RoutingPatternTest, EveryRowHasTheSameNumberOfKeys) {
  std::mt19937 rng(13);
  std::normal_distribution<float> normal;
  for (int n : {1, 2, 17, 100}) {
    const int head_dim = 8;
    std::vector<float> q(n * head_dim), k(n * head_dim);
    for (float& x : q) x = normal(rng);
    for (float& x : k) x = normal(rng);
    for (int clusters : {1, 3, 16, 200}) {
      const RoutingKnobs knobs{clusters, 2};
      const HeadEdgeList list =
          RouteHead(FitRoutingCentroids(knobs, q.data(), k.data(), n, head_dim, 1), q.data(),
                    k.data(), n, head_dim);
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(list.row_offsets[i + 1] - list.row_offsets[i], RoutingKeysPerQuery(knobs, n));
      }
    }
  }
}

}  // namespace
}  // namespace docsparse
