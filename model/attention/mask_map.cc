#include "model/attention/mask_map.h"

#include <algorithm>
#include <numeric>

namespace docsparse {

std::vector<float> DenseWindowsMaskMap(const std::vector<int64_t>& window_lengths, int resolution,
                                       int* cells) {
  const int64_t total = std::accumulate(window_lengths.begin(), window_lengths.end(), int64_t{0});
  const int n = static_cast<int>(std::max<int64_t>(1, std::min<int64_t>(resolution, total)));
  *cells = n;
  // Bucket b covers positions [b * total / n, (b + 1) * total / n).
  auto bucket_begin = [&](int b) { return b * total / n; };
  // overlap[w][b]: tokens of window w in bucket b.
  std::vector<std::vector<int64_t>> overlap(window_lengths.size(), std::vector<int64_t>(n, 0));
  int64_t window_begin = 0;
  for (size_t w = 0; w < window_lengths.size(); ++w) {
    const int64_t window_end = window_begin + window_lengths[w];
    for (int b = 0; b < n; ++b) {
      const int64_t lo = std::max(window_begin, bucket_begin(b));
      const int64_t hi = std::min(window_end, bucket_begin(b + 1));
      overlap[w][b] = std::max<int64_t>(0, hi - lo);
    }
    window_begin = window_end;
  }
  std::vector<float> density(static_cast<size_t>(n) * n, 0.0f);
  for (int i = 0; i < n; ++i) {
    const int64_t rows = bucket_begin(i + 1) - bucket_begin(i);
    for (int j = 0; j < n; ++j) {
      const int64_t cols = bucket_begin(j + 1) - bucket_begin(j);
      int64_t pairs = 0;
      for (size_t w = 0; w < window_lengths.size(); ++w) pairs += overlap[w][i] * overlap[w][j];
      density[static_cast<size_t>(i) * n + j] =
          rows * cols > 0 ? static_cast<float>(pairs) / static_cast<float>(rows * cols) : 0.0f;
    }
  }
  return density;
}

}  // namespace docsparse
