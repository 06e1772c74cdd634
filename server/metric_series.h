// The building blocks of our Prometheus text exposition (format 0.0.4):
// lock-free series that hot paths update with relaxed atomics, and the
// functions that write families and samples as text. Which families exist and
// how their label sets are resolved is server/metrics.h's business.
//
// Every series is thread-safe. A reader (the /metrics handler) may see a
// histogram's sum and its buckets from slightly different moments; its count
// is always the sum of its buckets, so _count equals the +Inf bucket.
#ifndef DOCSPARSE_SERVER_METRIC_SERIES_H_
#define DOCSPARSE_SERVER_METRIC_SERIES_H_

#include <algorithm>
#include <array>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

namespace docsparse {

// Adds `amount` to `target` (std::atomic<double>::fetch_add is C++20).
inline void AtomicAdd(std::atomic<double>& target, double amount) {
  double current = target.load(std::memory_order_relaxed);
  while (!target.compare_exchange_weak(current, current + amount, std::memory_order_relaxed)) {
  }
}

// A count that only goes up.
class Counter {
 public:
  void Increment(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// A float sum that only goes up (FLOPs exceed 2^64 over a server's life;
// doubles lose nothing that matters). Negative and NaN amounts are ignored,
// so the counter stays monotonic.
class FloatCounter {
 public:
  void Add(double amount) {
    if (amount > 0) AtomicAdd(value_, amount);
  }
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// An integer that goes up and down (queue depth, requests in flight).
class Gauge {
 public:
  void Set(int64_t value) { value_.store(value, std::memory_order_relaxed); }
  void Add(int64_t delta) { value_.fetch_add(delta, std::memory_order_relaxed); }
  int64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<int64_t> value_{0};
};

// A histogram read out for rendering.
struct HistogramSnapshot {
  const double* bounds = nullptr;  // [bounds_size] upper bounds, increasing
  size_t bounds_size = 0;
  std::vector<uint64_t> cumulative;  // [bounds_size + 1]; the last is +Inf, the count
  double sum = 0;
  uint64_t count() const { return cumulative.empty() ? 0 : cumulative.back(); }
};

// A cumulative histogram over the fixed upper bounds `kBounds` (a
// `constexpr double[]` with static storage, strictly increasing, finite).
// A bucket's bound is inclusive: an observation equal to a bound counts in
// that bucket (Prometheus "le"); larger than every bound, only in +Inf.
// NaN observations are ignored. The bounds are a template argument so the
// series needs no constructor argument and packs into std::array.
template <const auto& kBounds>
class Histogram {
 public:
  static constexpr size_t kBoundCount = std::size(kBounds);

  void Observe(double value) {
    if (std::isnan(value)) return;
    const size_t bucket = static_cast<size_t>(
        std::lower_bound(std::begin(kBounds), std::end(kBounds), value) - std::begin(kBounds));
    buckets_[bucket].fetch_add(1, std::memory_order_relaxed);
    AtomicAdd(sum_, value);
  }

  uint64_t count() const {
    uint64_t total = 0;
    for (const auto& bucket : buckets_) total += bucket.load(std::memory_order_relaxed);
    return total;
  }

  HistogramSnapshot Read() const {
    HistogramSnapshot snapshot;
    snapshot.bounds = std::begin(kBounds);
    snapshot.bounds_size = kBoundCount;
    snapshot.cumulative.resize(kBoundCount + 1);
    uint64_t running = 0;
    for (size_t i = 0; i <= kBoundCount; ++i) {
      running += buckets_[i].load(std::memory_order_relaxed);
      snapshot.cumulative[i] = running;
    }
    snapshot.sum = sum_.load(std::memory_order_relaxed);
    return snapshot;
  }

 private:
  std::array<std::atomic<uint64_t>, kBoundCount + 1> buckets_{};  // per bucket, not cumulative
  std::atomic<double> sum_{0};
};

// ---- Text format 0.0.4 ----

// A label value escaped for the text format: backslash, double quote and
// line feed become \\, \" and \n.
std::string EscapeLabelValue(std::string_view value);

// `name="escaped value"`.
std::string Label(std::string_view name, std::string_view value);

// Rendered labels joined with commas, empty ones skipped:
// LabelList({model_label, Label("task", "embed")}).
std::string LabelList(std::initializer_list<std::string_view> labels);

// A sample value or "le" bound that Prometheus parses back to the same
// double: shortest round-trip digits, or +Inf, -Inf, NaN.
std::string FormatNumber(double value);

// "# HELP name help\n# TYPE name type\n"; `type` is counter, gauge or
// histogram. The help text is escaped (backslash, line feed).
void AppendFamilyHeader(std::string_view name, std::string_view type, std::string_view help,
                        std::string* out);

// "name{labels} value\n"; `labels` is a rendered, comma-separated label list
// (see Label()) without braces, possibly empty.
void AppendSample(std::string_view name, std::string_view labels, double value, std::string* out);
void AppendSample(std::string_view name, std::string_view labels, uint64_t value, std::string* out);
void AppendSample(std::string_view name, std::string_view labels, int64_t value, std::string* out);

// The _bucket (one per bound, then le="+Inf"), _sum and _count samples of
// one histogram series; `labels` as for AppendSample.
void AppendHistogram(std::string_view name, std::string_view labels,
                     const HistogramSnapshot& snapshot, std::string* out);

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_METRIC_SERIES_H_
