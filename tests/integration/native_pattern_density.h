// Test helper: the density (computed pairs over n²) of the native plans of
// Longformer / LED and BigBird / BigBird-Pegasus for n tokens, from the
// patterns' definitions, double loops written out here.
#ifndef DOCSPARSE_TESTS_INTEGRATION_NATIVE_PATTERN_DENSITY_H_
#define DOCSPARSE_TESTS_INTEGRATION_NATIVE_PATTERN_DENSITY_H_

#include <cstdint>
#include <cstdlib>

namespace docsparse::testing {

// Longformer: i or j among the first g tokens, or |i - j| <= w/2.
inline double LongformerDensity(int64_t n, int64_t g, int64_t w) {
  int64_t pairs = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) pairs += (i < g || j < g || std::abs(i - j) <= w / 2);
  }
  return static_cast<double>(pairs) / static_cast<double>(n * n);
}

// BigBird as transformers runs it at inference (model/attention/bigbird_pattern.h),
// blocks of b, r random blocks: the first and last blocks global, a window of
// 3 blocks, block 0 once more per random block on the other rows; full
// attention up to (5 + 2r)·b tokens.
inline double BigBirdDensity(int64_t n, int64_t b, int64_t r) {
  if (n <= (5 + 2 * r) * b) return 1.0;
  const int64_t blocks = (n + b - 1) / b;
  const auto global = [&](int64_t block) { return block == 0 || block == blocks - 1; };
  int64_t pairs = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      const int64_t qb = i / b, kb = j / b;
      pairs += (global(qb) || global(kb) || std::abs(qb - kb) <= 1) ? 1 : 0;
      if (!global(qb) && kb == 0) pairs += r;
    }
  }
  return static_cast<double>(pairs) / static_cast<double>(n * n);
}

}  // namespace docsparse::testing

#endif  // DOCSPARSE_TESTS_INTEGRATION_NATIVE_PATTERN_DENSITY_H_
