// The bench modes' timing: the median of `repeats` calls, after one warm-up
// call, in milliseconds of wall time.
#ifndef DOCSPARSE_BENCH_MEDIAN_MS_H_
#define DOCSPARSE_BENCH_MEDIAN_MS_H_

#include <algorithm>
#include <chrono>
#include <functional>
#include <vector>

namespace docsparse::bench {

inline double MedianMs(int repeats, const std::function<void()>& call) {
  using Clock = std::chrono::steady_clock;
  call();
  std::vector<double> ms;
  for (int i = 0; i < std::max(1, repeats); ++i) {
    const auto start = Clock::now();
    call();
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - start).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

}  // namespace docsparse::bench

#endif  // DOCSPARSE_BENCH_MEDIAN_MS_H_
