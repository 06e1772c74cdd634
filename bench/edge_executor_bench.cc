#include "bench/edge_executor_bench.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <random>
#include <string>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "bench/median_ms.h"
#include "kernels/cpu_features.h"
#include "kernels/edge_attention.h"

ABSL_DECLARE_FLAG(std::vector<std::string>, seq);
ABSL_DECLARE_FLAG(std::vector<std::string>, density);
ABSL_DECLARE_FLAG(int, heads);
ABSL_DECLARE_FLAG(int, dim);
ABSL_DECLARE_FLAG(int, repeats);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(bool, json);

namespace docsparse::bench {
namespace {

// One head's rows of `per_row` distinct keys each, ascending, uniform over
// [0, tokens): SBM's rows at one density, without its clustering.
struct RandomRows {
  std::vector<int64_t> offsets;
  std::vector<int32_t> keys;
};

RandomRows DrawRows(int32_t tokens, int32_t per_row, std::mt19937_64& rng) {
  RandomRows rows;
  rows.offsets.reserve(tokens + 1);
  rows.offsets.push_back(0);
  rows.keys.reserve(static_cast<size_t>(tokens) * per_row);
  std::vector<char> taken(tokens, 0);
  std::uniform_int_distribution<int32_t> key(0, tokens - 1);
  for (int32_t row = 0; row < tokens; ++row) {
    const size_t first = rows.keys.size();
    while (static_cast<int32_t>(rows.keys.size() - first) < per_row) {
      const int32_t j = key(rng);
      if (taken[j] == 0) {
        taken[j] = 1;
        rows.keys.push_back(j);
      }
    }
    for (size_t e = first; e < rows.keys.size(); ++e) taken[rows.keys[e]] = 0;
    std::sort(rows.keys.begin() + static_cast<std::ptrdiff_t>(first), rows.keys.end());
    rows.offsets.push_back(static_cast<int64_t>(rows.keys.size()));
  }
  return rows;
}

}  // namespace

int RunEdgeExecutorBench() {
  const int heads = absl::GetFlag(FLAGS_heads);
  const int dim = absl::GetFlag(FLAGS_dim);
  const int threads = absl::GetFlag(FLAGS_threads);
  const std::string isa(IsaName(HostCpuFeatures()));
  std::mt19937_64 rng(absl::GetFlag(FLAGS_seed));
  for (const std::string& seq_text : absl::GetFlag(FLAGS_seq)) {
    int32_t tokens = 0;
    if (!absl::SimpleAtoi(seq_text, &tokens) || tokens < 1) {
      std::fprintf(stderr, "bad --seq %s\n", seq_text.c_str());
      return 2;
    }
    const size_t values = static_cast<size_t>(heads) * tokens * dim;
    std::vector<float> q(values), k(values), v(values), out(values);
    std::normal_distribution<float> normal;
    for (std::vector<float>* x : {&q, &k, &v}) {
      for (float& value : *x) value = normal(rng);
    }
    for (const std::string& density_text : absl::GetFlag(FLAGS_density)) {
      double density = 0;
      if (!absl::SimpleAtod(density_text, &density) || !(density > 0) || density > 1) {
        std::fprintf(stderr, "bad --density %s (in (0, 1])\n", density_text.c_str());
        return 2;
      }
      const int32_t per_row =
          std::clamp(static_cast<int32_t>(std::lround(density * tokens)), 1, tokens);
      std::vector<RandomRows> rows;
      std::vector<EdgeListView> views;
      for (int h = 0; h < heads; ++h) rows.push_back(DrawRows(tokens, per_row, rng));
      for (const RandomRows& head : rows) {
        views.push_back(EdgeListView{head.offsets.data(), head.keys.data(), tokens});
      }
      const EdgeAttentionParams params{q.data(),
                                       k.data(),
                                       v.data(),
                                       out.data(),
                                       views.data(),
                                       1,
                                       heads,
                                       tokens,
                                       tokens,
                                       dim,
                                       1.0f / std::sqrt(static_cast<float>(dim))};
      EdgeAttentionCpu(params, threads);  // warm-up
      const double ms =
          MedianMs(absl::GetFlag(FLAGS_repeats), [&] { EdgeAttentionCpu(params, threads); });
      const double edges = static_cast<double>(heads) * tokens * per_row;
      const double ns_per_edge = ms * 1e6 / edges;
      const double gflops = edges * 4.0 * dim / (ms * 1e6);
      if (absl::GetFlag(FLAGS_json)) {
        std::printf(
            "{\"bench\": \"edges\", \"isa\": \"%s\", \"tokens\": %d, \"heads\": %d, \"dim\": %d, "
            "\"edges_per_row\": %d, \"threads\": %d, \"ms\": %.3f, \"ns_per_edge\": %.3f, "
            "\"gflops\": %.2f}\n",
            isa.c_str(), tokens, heads, dim, per_row, threads, ms, ns_per_edge, gflops);
      } else {
        std::printf(
            "edges  %6d tokens, %d heads of %d, %5d keys a row (%.3f): %9.2f ms  %6.2f ns an "
            "edge  %6.1f GFLOP/s  (%s, %d threads)\n",
            tokens, heads, dim, per_row, static_cast<double>(per_row) / tokens, ms, ns_per_edge,
            gflops, isa.c_str(), threads);
      }
    }
  }
  return 0;
}

}  // namespace docsparse::bench
