#include "model/attention/lsg_mask_map.h"

#include <algorithm>
#include <numeric>

#include "model/attention/lsg_planner.h"

namespace docsparse {

std::vector<float> LsgMaskMap(const LsgConfig& config, const std::vector<int64_t>& window_lengths,
                              int resolution, int* cells) {
  const int64_t total = std::accumulate(window_lengths.begin(), window_lengths.end(), int64_t{0});
  const int n = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(resolution, total)));
  *cells = n;
  auto bucket = [&](int64_t position) {
    return static_cast<int>(position * n / std::max<int64_t>(1, total));
  };
  auto bucket_begin = [&](int b) { return b * total / n; };
  std::vector<double> pairs(static_cast<size_t>(n) * n, 0.0);
  int64_t offset = 0;
  for (int64_t length : window_lengths) {
    const LsgLayout layout =
        LayoutLsgSequence(config, config.num_global_tokens, static_cast<int32_t>(length));
    const LsgPlan plan =
        PlanLsgSequence(config, layout, 1, std::vector<uint8_t>(layout.derived_keys, 1), false);
    const int32_t first_token_key = layout.TokenKey(0);
    const int32_t per_derived = config.sparsity_factor > 0 ? config.sparsity_factor : 1;
    const int32_t blocks = static_cast<int32_t>(plan.query_block_starts.size()) - 1;
    for (int32_t b = 0; b < blocks; ++b) {
      for (int32_t row = std::max(plan.query_block_starts[b], layout.global);
           row < std::min(plan.query_block_starts[b + 1], layout.global + layout.tokens); ++row) {
        const int qi = bucket(offset + row - layout.global);
        double* out = pairs.data() + static_cast<size_t>(qi) * n;
        for (int32_t s = plan.span_offsets[b]; s < plan.span_offsets[b + 1]; ++s) {
          for (int32_t key = plan.spans[s].begin; key < plan.spans[s].begin + plan.spans[s].length;
               ++key) {
            if (key >= first_token_key) {
              out[bucket(offset + key - first_token_key)] += 1.0;
            } else if (key >= layout.DerivedKey(0)) {
              const int64_t from = static_cast<int64_t>(key - layout.DerivedKey(0)) * per_derived;
              for (int64_t t = from; t < std::min<int64_t>(from + per_derived, length); ++t) {
                out[bucket(offset + t)] += 1.0 / per_derived;
              }
            }
          }
        }
      }
    }
    offset += length;
  }
  std::vector<float> density(static_cast<size_t>(n) * n, 0.0f);
  for (int i = 0; i < n; ++i) {
    const int64_t rows = bucket_begin(i + 1) - bucket_begin(i);
    for (int j = 0; j < n; ++j) {
      const int64_t cols = bucket_begin(j + 1) - bucket_begin(j);
      const double value =
          rows * cols > 0 ? pairs[static_cast<size_t>(i) * n + j] / static_cast<double>(rows * cols)
                          : 0.0;
      density[static_cast<size_t>(i) * n + j] = static_cast<float>(std::min(1.0, value));
    }
  }
  return density;
}

}  // namespace docsparse
