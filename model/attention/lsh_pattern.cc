#include "model/attention/lsh_pattern.h"

#include <ATen/ATen.h>
#include <ATen/Parallel.h>

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

// The index of the first largest of [p ; −p] for p = xR ([half] floats):
// index c < half is p_c, index half + c is −p_c.
int32_t SignedArgmax(const float* p, int32_t half) {
  int32_t best = 0;
  float best_value = -INFINITY;
  for (int32_t c = 0; c < half; ++c) {
    if (p[c] > best_value) best_value = p[c], best = c;
  }
  for (int32_t c = 0; c < half; ++c) {
    if (-p[c] > best_value) best_value = -p[c], best = half + c;
  }
  return best;
}

// h(x) of n vectors ([n, head_dim] row-major) into `buckets_out`: the
// projections by one matrix product, then SignedArgmax per row.
void BucketsOf(const float* x, int32_t n, int32_t head_dim, const std::vector<float>& rotation,
               int32_t buckets, int32_t* buckets_out) {
  const at::Tensor vectors =
      at::from_blob(const_cast<float*>(x), {n, head_dim}, at::TensorOptions().dtype(at::kFloat));
  const at::Tensor r = at::from_blob(const_cast<float*>(rotation.data()), {head_dim, buckets / 2},
                                     at::TensorOptions().dtype(at::kFloat));
  const at::Tensor projected = at::matmul(vectors, r).contiguous();
  const float* p = projected.data_ptr<float>();
  const int32_t half = buckets / 2;
  at::parallel_for(0, n, 512, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) buckets_out[i] = SignedArgmax(p + i * half, half);
  });
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
  float projected[kLshMaxBuckets / 2] = {};
  for (int32_t d = 0; d < head_dim; ++d) {
    const float* row = rotation + static_cast<size_t>(d) * half;
    for (int32_t c = 0; c < half; ++c) projected[c] += x[d] * row[c];
  }
  return SignedArgmax(projected, half);
}

HeadEdgeList PlanLshHead(const LshKnobs& knobs, const float* queries, const float* keys, int32_t n,
                         int32_t head_dim, uint64_t head_key) {
  assert(knobs.buckets >= 2 && knobs.buckets % 2 == 0 && knobs.chunk >= 1 && knobs.rounds >= 1);
  if (n == 0) return HeadEdgeList{{0}, {}, {}};
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
    BucketsOf(queries, n, head_dim, rotation, knobs.buckets, query_bucket.data());
    BucketsOf(keys, n, head_dim, rotation, knobs.buckets, key_bucket.data());
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
  return BuildHeadEdgeList(
      n, false, [&](int32_t i, std::vector<int32_t>& row_keys, std::vector<float>&) {
        const size_t row_begin = row_keys.size();
        for (int32_t round = 0; round < knobs.rounds; ++round) {
          const int64_t t = query_chunk[round][i];
          const int64_t other = t > 0 ? t - 1 : (chunks > 1 ? 1 : 0);
          for (int64_t c : {t, other}) {
            const auto first = sorted_keys[round].begin() + c * chunk;
            row_keys.insert(row_keys.end(), first, first + std::min<int64_t>(chunk, n - c * chunk));
            if (other == t) break;
          }
        }
        const auto first = row_keys.begin() + static_cast<int64_t>(row_begin);
        std::sort(first, row_keys.end());
        row_keys.erase(std::unique(first, row_keys.end()), row_keys.end());
      });
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
