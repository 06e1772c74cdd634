#include "model/attention/lsh_pattern.h"

#include <algorithm>
#include <cassert>
#include <cmath>
#include <numeric>

#include "kernels/sbm_sampling.h"

namespace docsparse {
namespace {

// A standard normal from two uniforms (Box-Muller); u1 in (0, 1].
float StandardNormal(CounterRng& rng) {
  const double u1 = 1.0 - rng.Uniform();
  const double u2 = rng.Uniform();
  return static_cast<float>(std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2));
}

}  // namespace

std::vector<float> LshRotation(int32_t head_dim, int32_t buckets, uint64_t head_key,
                               int32_t round) {
  CounterRng rng(DeriveKey(head_key, static_cast<uint32_t>(round)));
  std::vector<float> rotation(static_cast<size_t>(head_dim) * (buckets / 2));
  for (float& entry : rotation) entry = StandardNormal(rng);
  return rotation;
}

int32_t LshBucket(const float* x, const float* rotation, int32_t head_dim, int32_t buckets) {
  const int32_t half = buckets / 2;
  int32_t best = 0;
  float best_value = -INFINITY;
  // [xR ; −xR]: index c < half is (xR)_c, index half + c is −(xR)_c.
  float projected[kLshMaxBuckets / 2] = {};
  for (int32_t d = 0; d < head_dim; ++d) {
    const float* row = rotation + static_cast<size_t>(d) * half;
    for (int32_t c = 0; c < half; ++c) projected[c] += x[d] * row[c];
  }
  for (int32_t c = 0; c < half; ++c) {
    if (projected[c] > best_value) best_value = projected[c], best = c;
  }
  for (int32_t c = 0; c < half; ++c) {
    if (-projected[c] > best_value) best_value = -projected[c], best = half + c;
  }
  return best;
}

HeadEdgeList PlanLshHead(const LshKnobs& knobs, const float* queries, const float* keys, int32_t n,
                         int32_t head_dim, uint64_t head_key) {
  assert(knobs.buckets >= 2 && knobs.buckets % 2 == 0 && knobs.chunk >= 1 && knobs.rounds >= 1);
  HeadEdgeList list;
  list.row_offsets.assign(static_cast<size_t>(n) + 1, 0);
  if (n == 0) return list;
  const int64_t chunk = knobs.chunk;
  const int64_t chunks = (n + chunk - 1) / chunk;
  // Per round: the keys in sorted order, and each query's two chunks.
  std::vector<std::vector<int32_t>> sorted_keys(knobs.rounds, std::vector<int32_t>(n));
  std::vector<std::vector<int32_t>> query_chunk(knobs.rounds, std::vector<int32_t>(n));
  std::vector<int32_t> query_bucket(n), key_bucket(n);
  // (bucket, index) as one number, bucket · n + index, in sorted key order:
  // a query's place is a lower bound among them (key i, whose pair equals
  // query i's, is not before it).
  std::vector<int64_t> key_code(n);
  for (int32_t round = 0; round < knobs.rounds; ++round) {
    const std::vector<float> rotation = LshRotation(head_dim, knobs.buckets, head_key, round);
    for (int32_t i = 0; i < n; ++i) {
      query_bucket[i] = LshBucket(queries + static_cast<size_t>(i) * head_dim, rotation.data(),
                                  head_dim, knobs.buckets);
      key_bucket[i] = LshBucket(keys + static_cast<size_t>(i) * head_dim, rotation.data(), head_dim,
                                knobs.buckets);
    }
    std::vector<int32_t>& order = sorted_keys[round];
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](int32_t a, int32_t b) { return key_bucket[a] < key_bucket[b]; });
    for (int32_t p = 0; p < n; ++p) key_code[p] = int64_t{key_bucket[order[p]]} * n + order[p];
    for (int32_t i = 0; i < n; ++i) {
      const int64_t code = int64_t{query_bucket[i]} * n + i;
      const int64_t place =
          std::lower_bound(key_code.begin(), key_code.end(), code) - key_code.begin();
      query_chunk[round][i] = static_cast<int32_t>(std::min(place / chunk, chunks - 1));
    }
  }
  list.keys.reserve(static_cast<size_t>(LshMaxHeadEdges(knobs, n)));
  std::vector<int32_t> row;
  for (int32_t i = 0; i < n; ++i) {
    row.clear();
    for (int32_t round = 0; round < knobs.rounds; ++round) {
      const int64_t t = query_chunk[round][i];
      const int64_t other = t > 0 ? t - 1 : (chunks > 1 ? 1 : 0);
      for (int64_t c : {t, other}) {
        const auto first = sorted_keys[round].begin() + c * chunk;
        row.insert(row.end(), first, first + std::min<int64_t>(chunk, n - c * chunk));
        if (other == t) break;
      }
    }
    std::sort(row.begin(), row.end());
    row.erase(std::unique(row.begin(), row.end()), row.end());
    list.keys.insert(list.keys.end(), row.begin(), row.end());
    list.row_offsets[i + 1] = static_cast<int64_t>(list.keys.size());
  }
  return list;
}

uint64_t LshHeadKey(uint64_t seed, int32_t layer, int32_t head) {
  return DeriveKey(DeriveKey(DeriveKey(seed, 0x4c5348 /* "LSH" */), static_cast<uint32_t>(layer)),
                   static_cast<uint32_t>(head));
}

double LshPlannerFlops(const LshKnobs& knobs, int64_t n, int32_t head_dim) {
  return 2.0 * static_cast<double>(n) * head_dim * (knobs.buckets / 2) * 2.0 * knobs.rounds;
}

double LshMaxHeadEdges(const LshKnobs& knobs, int64_t n) {
  const double per_row = std::min<double>(static_cast<double>(n),
                                          2.0 * knobs.rounds * std::min<int64_t>(knobs.chunk, n));
  return per_row * static_cast<double>(n);
}

}  // namespace docsparse
