#include "model/attention/routing_pattern.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>

#include "kernels/sbm_sampling.h"

namespace docsparse {
namespace {

// The 2n vectors, queries then keys, each scaled to unit length (a zero
// vector stays zero).
std::vector<float> UnitVectors(const float* queries, const float* keys, int32_t n,
                               int32_t head_dim) {
  std::vector<float> unit(static_cast<size_t>(2) * n * head_dim);
  for (int64_t v = 0; v < 2 * int64_t{n}; ++v) {
    const float* x = (v < n ? queries + v * head_dim : keys + (v - n) * head_dim);
    double norm = 0;
    for (int32_t d = 0; d < head_dim; ++d) norm += double{x[d]} * x[d];
    const float scale = norm > 0 ? static_cast<float>(1 / std::sqrt(norm)) : 0.0f;
    for (int32_t d = 0; d < head_dim; ++d) unit[v * head_dim + d] = x[d] * scale;
  }
  return unit;
}

float Dot(const float* a, const float* b, int32_t head_dim) {
  float sum = 0;
  for (int32_t d = 0; d < head_dim; ++d) sum += a[d] * b[d];
  return sum;
}

int32_t Nearest(const std::vector<float>& centroids, const float* x, int32_t head_dim) {
  const int32_t k = static_cast<int32_t>(centroids.size() / head_dim);
  int32_t best = 0;
  float best_dot = -INFINITY;
  for (int32_t c = 0; c < k; ++c) {
    const float dot = Dot(centroids.data() + static_cast<size_t>(c) * head_dim, x, head_dim);
    if (dot > best_dot) best_dot = dot, best = c;
  }
  return best;
}

void Normalize(float* x, int32_t head_dim) {
  double norm = 0;
  for (int32_t d = 0; d < head_dim; ++d) norm += double{x[d]} * x[d];
  if (norm <= 0) return;
  const float scale = static_cast<float>(1 / std::sqrt(norm));
  for (int32_t d = 0; d < head_dim; ++d) x[d] *= scale;
}

}  // namespace

std::vector<float> FitRoutingCentroids(const RoutingKnobs& knobs, const float* queries,
                                       const float* keys, int32_t n, int32_t head_dim,
                                       uint64_t head_key) {
  assert(n >= 1 && knobs.clusters >= 1 && knobs.iterations >= 0);
  const int32_t k = std::min(knobs.clusters, n);
  const std::vector<float> unit = UnitVectors(queries, keys, n, head_dim);
  const int64_t vectors = 2 * int64_t{n};
  // k distinct starting vectors: a partial Fisher-Yates shuffle.
  std::vector<int64_t> order(static_cast<size_t>(vectors));
  std::iota(order.begin(), order.end(), 0);
  CounterRng rng(head_key);
  std::vector<float> centroids(static_cast<size_t>(k) * head_dim);
  for (int32_t c = 0; c < k; ++c) {
    const int64_t pick = c + static_cast<int64_t>(rng.Uniform() * static_cast<double>(vectors - c));
    std::swap(order[c], order[std::min(pick, vectors - 1)]);
    std::copy_n(unit.data() + order[c] * head_dim, head_dim,
                centroids.data() + static_cast<size_t>(c) * head_dim);
  }
  std::vector<float> sums(centroids.size());
  std::vector<int64_t> members(static_cast<size_t>(k));
  for (int32_t step = 0; step < knobs.iterations; ++step) {
    std::fill(sums.begin(), sums.end(), 0.0f);
    std::fill(members.begin(), members.end(), 0);
    for (int64_t v = 0; v < vectors; ++v) {
      const float* x = unit.data() + v * head_dim;
      const int32_t c = Nearest(centroids, x, head_dim);
      ++members[c];
      for (int32_t d = 0; d < head_dim; ++d) sums[static_cast<size_t>(c) * head_dim + d] += x[d];
    }
    for (int32_t c = 0; c < k; ++c) {
      if (members[c] == 0) continue;
      float* centroid = centroids.data() + static_cast<size_t>(c) * head_dim;
      std::copy_n(sums.data() + static_cast<size_t>(c) * head_dim, head_dim, centroid);
      Normalize(centroid, head_dim);
    }
  }
  return centroids;
}

double RoutingObjective(const std::vector<float>& centroids, const float* queries,
                        const float* keys, int32_t n, int32_t head_dim) {
  const std::vector<float> unit = UnitVectors(queries, keys, n, head_dim);
  double total = 0;
  for (int64_t v = 0; v < 2 * int64_t{n}; ++v) {
    const float* x = unit.data() + v * head_dim;
    const int32_t c = Nearest(centroids, x, head_dim);
    total += Dot(centroids.data() + static_cast<size_t>(c) * head_dim, x, head_dim);
  }
  return total;
}

HeadEdgeList RouteHead(const std::vector<float>& centroids, const float* queries, const float* keys,
                       int32_t n, int32_t head_dim) {
  HeadEdgeList list;
  list.row_offsets.assign(static_cast<size_t>(n) + 1, 0);
  if (n == 0) return list;
  const int32_t k = static_cast<int32_t>(centroids.size() / head_dim);
  const int64_t w = (n + k - 1) / k;
  const std::vector<float> unit = UnitVectors(queries, keys, n, head_dim);
  // K(c): the w keys closest to centroid c, ascending by index.
  std::vector<std::vector<int32_t>> routed(static_cast<size_t>(k));
  std::vector<float> score(static_cast<size_t>(n));
  std::vector<int32_t> order(static_cast<size_t>(n));
  for (int32_t c = 0; c < k; ++c) {
    const float* centroid = centroids.data() + static_cast<size_t>(c) * head_dim;
    for (int32_t j = 0; j < n; ++j) {
      score[j] = Dot(centroid, unit.data() + (int64_t{n} + j) * head_dim, head_dim);
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + w, order.end(), [&](int32_t a, int32_t b) {
      return score[a] > score[b] || (score[a] == score[b] && a < b);
    });
    routed[c].assign(order.begin(), order.begin() + w);
    std::sort(routed[c].begin(), routed[c].end());
  }
  list.keys.reserve(static_cast<size_t>(n) * w);
  for (int32_t i = 0; i < n; ++i) {
    const std::vector<int32_t>& row =
        routed[Nearest(centroids, unit.data() + static_cast<size_t>(i) * head_dim, head_dim)];
    list.keys.insert(list.keys.end(), row.begin(), row.end());
    list.row_offsets[i + 1] = static_cast<int64_t>(list.keys.size());
  }
  return list;
}

uint64_t RoutingHeadKey(uint64_t seed, int32_t layer, int32_t head) {
  return DeriveKey(
      DeriveKey(DeriveKey(seed, 0x524f5554 /* "ROUT" */), static_cast<uint32_t>(layer)),
      static_cast<uint32_t>(head));
}

int64_t RoutingKeysPerQuery(const RoutingKnobs& knobs, int64_t n) {
  if (n <= 0) return 0;
  const int64_t k = std::min<int64_t>(knobs.clusters, n);
  return (n + k - 1) / k;
}

double RoutingPlannerFlops(const RoutingKnobs& knobs, int64_t n, int32_t head_dim) {
  const double k = static_cast<double>(std::min<int64_t>(knobs.clusters, n));
  return (2.0 * knobs.iterations + 2.0) * static_cast<double>(n) * k * head_dim * 2.0;
}

}  // namespace docsparse
