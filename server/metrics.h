// Prometheus text exposition of the server's request counters. A first,
// small set (requests_total, model_load_seconds, build_info); the serving
// issue adds the histograms of DESIGN.md.
#ifndef DOCSPARSE_SERVER_METRICS_H_
#define DOCSPARSE_SERVER_METRICS_H_

#include <cstdint>
#include <map>
#include <string>
#include <tuple>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace docsparse {

class Metrics {
 public:
  void SetModelLoadSeconds(const std::string& model, double seconds) ABSL_LOCKS_EXCLUDED(mu_);
  // One finished request; `code` is the gRPC status name, e.g. "OK".
  void CountRequest(const std::string& model, const std::string& task, const std::string& code)
      ABSL_LOCKS_EXCLUDED(mu_);
  // The whole exposition, text format 0.0.4.
  std::string Render() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  mutable absl::Mutex mu_;
  std::map<std::tuple<std::string, std::string, std::string>, uint64_t> requests_
      ABSL_GUARDED_BY(mu_);
  std::map<std::string, double> load_seconds_ ABSL_GUARDED_BY(mu_);
};

// Escapes a label value for the text format (backslash, quote, newline).
std::string EscapeLabelValue(const std::string& value);

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_METRICS_H_
