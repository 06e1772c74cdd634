#include "server/metrics.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace docsparse {

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

void Metrics::SetModelLoadSeconds(const std::string& model, double seconds) {
  absl::MutexLock lock(&mu_);
  load_seconds_[model] = seconds;
}

void Metrics::CountRequest(const std::string& model, const std::string& task,
                           const std::string& code) {
  absl::MutexLock lock(&mu_);
  ++requests_[{model, task, code}];
}

std::string Metrics::Render() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  absl::StrAppend(&out,
                  "# HELP docsparse_build_info Build of the running server.\n"
                  "# TYPE docsparse_build_info gauge\n"
                  "docsparse_build_info{version=\"0.1.0\"} 1\n");
  absl::StrAppend(&out,
                  "# HELP docsparse_requests_total Finished requests by model, task and "
                  "gRPC status code.\n# TYPE docsparse_requests_total counter\n");
  for (const auto& [key, count] : requests_) {
    const auto& [model, task, code] = key;
    absl::StrAppend(&out, "docsparse_requests_total{model=\"", EscapeLabelValue(model),
                    "\",task=\"", EscapeLabelValue(task), "\",code=\"", EscapeLabelValue(code),
                    "\"} ", count, "\n");
  }
  absl::StrAppend(&out,
                  "# HELP docsparse_model_load_seconds Time to load each model.\n"
                  "# TYPE docsparse_model_load_seconds gauge\n");
  for (const auto& [model, seconds] : load_seconds_) {
    absl::StrAppend(&out, "docsparse_model_load_seconds{model=\"", EscapeLabelValue(model), "\"} ",
                    absl::StrFormat("%.6f", seconds), "\n");
  }
  return out;
}

}  // namespace docsparse
