#include "model/attention/pattern_mask_map.h"

#include <algorithm>
#include <cstdint>

namespace docsparse {

std::vector<float> PatternMaskMap(const std::vector<PatternPlan>& plans, int resolution,
                                  int* cells) {
  int64_t total = 0;
  for (const PatternPlan& plan : plans) total += plan.length;
  const int n = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(resolution, total)));
  *cells = n;
  // Bucket b covers positions [b * total / n, (b + 1) * total / n).
  const auto begin_of = [&](int b) { return b * total / n; };
  // The bucket whose range holds `position` (an estimate, then moved: the
  // ranges come from integer division and the estimate may be one off).
  const auto bucket_of = [&](int64_t position) {
    int b = static_cast<int>(std::min<int64_t>(n - 1, position * n / std::max<int64_t>(1, total)));
    while (b + 1 < n && begin_of(b + 1) <= position) ++b;
    while (b > 0 && begin_of(b) > position) --b;
    return b;
  };
  std::vector<double> pairs(static_cast<size_t>(n) * n, 0.0);
  int heads = 1;
  int64_t offset = 0;
  for (const PatternPlan& plan : plans) {
    heads = std::max(heads, static_cast<int>(plan.heads));
    // Keys [lo, hi) of the token section, spread over their buckets.
    const auto add_tokens = [&](int row_bucket, int64_t rows, int64_t lo, int64_t hi) {
      for (int64_t at = lo; at < hi;) {
        const int bucket = bucket_of(offset + at);
        const int64_t end = std::min(hi, begin_of(bucket + 1) - offset);
        pairs[static_cast<size_t>(row_bucket) * n + bucket] +=
            static_cast<double>(rows * (end - at));
        at = end;
      }
    };
    const int32_t blocks = plan.num_query_blocks();
    for (int32_t head = 0; head < plan.heads; ++head) {
      for (int32_t block = 0; block < blocks; ++block) {
        const int32_t first = plan.query_block_starts[block];
        const int32_t last = plan.query_block_starts[block + 1];
        const int32_t cell = head * blocks + block;
        for (int32_t s = plan.span_offsets[cell]; s < plan.span_offsets[cell + 1]; ++s) {
          const KeySpan span = plan.spans[s];
          if (!plan.slides.empty() && plan.slides[s].width != 0) {
            // A sliding span's keys move with the row (its keys are tokens).
            for (int32_t q = first; q < last; ++q) {
              int32_t lo = 0, hi = 0;
              SlidingRowKeys(span, plan.slides[s], q, &lo, &hi);
              add_tokens(bucket_of(offset + q), 1, lo, hi);
            }
            continue;
          }
          const int64_t lo = span.begin;
          const int64_t hi = int64_t{span.begin} + span.length;
          // A block's rows may straddle buckets: add them bucket by bucket.
          for (int64_t row = first; row < last;) {
            const int row_bucket = bucket_of(offset + row);
            const int64_t row_end = std::min<int64_t>(last, begin_of(row_bucket + 1) - offset);
            const int64_t rows = row_end - row;
            add_tokens(row_bucket, rows, std::min<int64_t>(lo, plan.length),
                       std::min<int64_t>(hi, plan.length));
            for (int64_t g = std::max<int64_t>(lo, plan.length); g < hi; ++g) {
              const int32_t token = plan.key_gather[g - plan.length];
              add_tokens(row_bucket, rows, token, token + 1);
            }
            row = row_end;
          }
        }
      }
    }
    offset += plan.length;
  }
  std::vector<float> density(static_cast<size_t>(n) * n, 0.0f);
  for (int i = 0; i < n; ++i) {
    const int64_t rows = begin_of(i + 1) - begin_of(i);
    for (int j = 0; j < n; ++j) {
      const int64_t cols = begin_of(j + 1) - begin_of(j);
      const double all = static_cast<double>(rows) * cols * heads;
      density[static_cast<size_t>(i) * n + j] =
          all > 0 ? static_cast<float>(pairs[static_cast<size_t>(i) * n + j] / all) : 0.0f;
    }
  }
  return density;
}

}  // namespace docsparse
