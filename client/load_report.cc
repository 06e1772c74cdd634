#include "client/load_report.h"

#include <algorithm>
#include <cmath>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace docsparse {

double Percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  if (!std::is_sorted(values.begin(), values.end())) std::sort(values.begin(), values.end());
  const double rank = std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, values.size() - 1);
  const double fraction = rank - static_cast<double>(below);
  return values[below] + fraction * (values[above] - values[below]);
}

void SampleAccumulator::Add(const RequestSample& s) {
  latencies_ms_.push_back(s.latency_ms);
  tokens_ += static_cast<double>(s.input_tokens);
  queue_ms_ += s.queue_ms;
  inference_ms_ += s.inference_ms;
  device_ms_ += s.device_ms;
  density_ += s.density;
  attention_flops_ += s.attention_flops;
  total_flops_ += s.total_flops;
  batch_size_ += s.batch_size;
  AddServedBy(s.served_by);
}

void SampleAccumulator::Merge(const SampleAccumulator& o) {
  latencies_ms_.insert(latencies_ms_.end(), o.latencies_ms_.begin(), o.latencies_ms_.end());
  tokens_ += o.tokens_;
  queue_ms_ += o.queue_ms_;
  inference_ms_ += o.inference_ms_;
  device_ms_ += o.device_ms_;
  density_ += o.density_;
  attention_flops_ += o.attention_flops_;
  total_flops_ += o.total_flops_;
  batch_size_ += o.batch_size_;
  for (const std::string& served_by : o.served_by_) AddServedBy(served_by);
}

void SampleAccumulator::AddServedBy(const std::string& served_by) {
  if (served_by.empty()) return;
  if (std::find(served_by_.begin(), served_by_.end(), served_by) == served_by_.end()) {
    served_by_.push_back(served_by);
  }
}

void SampleAccumulator::Summarize(double elapsed_s, LoadReport* report) const {
  report->elapsed_s = elapsed_s;
  report->served_by = served_by_;
  const double n = static_cast<double>(latencies_ms_.size());
  report->requests_per_s = elapsed_s > 0 ? n / elapsed_s : 0;
  report->tokens_per_s = elapsed_s > 0 ? tokens_ / elapsed_s : 0;
  if (latencies_ms_.empty()) return;
  std::vector<double> sorted = latencies_ms_;
  std::sort(sorted.begin(), sorted.end());
  report->latency.p50_ms = Percentile(sorted, 50);
  report->latency.p95_ms = Percentile(sorted, 95);
  report->latency.p99_ms = Percentile(sorted, 99);
  report->latency.max_ms = sorted.back();
  double sum = 0;
  for (double latency : sorted) sum += latency;
  report->latency.mean_ms = sum / n;
  report->mean_input_tokens = tokens_ / n;
  report->mean_queue_ms = queue_ms_ / n;
  report->mean_inference_ms = inference_ms_ / n;
  report->mean_device_ms = device_ms_ / n;
  report->mean_density = density_ / n;
  report->mean_attention_gflops = attention_flops_ / n / 1e9;
  report->mean_total_gflops = total_flops_ / n / 1e9;
  report->mean_batch_size = batch_size_ / n;
}

std::string FormatLoadReport(const LoadReport& r) {
  std::string out = absl::StrFormat("Load: %s on %s at %s, %s loop, concurrency %d", r.task,
                                    r.model.empty() ? "the default model" : r.model, r.server,
                                    r.mode, r.concurrency);
  if (r.rate > 0) absl::StrAppendFormat(&out, ", %s arrivals at %g req/s", r.arrivals, r.rate);
  absl::StrAppendFormat(&out, ", %g s\nDocuments: %s\n", r.duration_s, r.documents);
  absl::StrAppendFormat(&out, "  requests      %d in %.1f s (drain included)\n", r.requests,
                        r.elapsed_s);
  absl::StrAppendFormat(&out, "  ok            %d\n", r.ok);
  std::vector<std::string> codes;
  for (const auto& [code, count] : r.errors_by_code)
    codes.push_back(absl::StrCat(code, " ", count));
  absl::StrAppendFormat(&out, "  errors        %d%s\n", r.errors,
                        codes.empty() ? "" : absl::StrCat(" (", absl::StrJoin(codes, ", "), ")"));
  if (r.rate > 0) absl::StrAppendFormat(&out, "  shed          %d (all workers busy)\n", r.shed);
  absl::StrAppendFormat(&out, "  throughput    %.2f req/s, %.0f tokens/s (ok requests)\n",
                        r.requests_per_s, r.tokens_per_s);
  absl::StrAppendFormat(&out, "  latency ms    p50 %.1f  p95 %.1f  p99 %.1f  max %.1f  mean %.1f\n",
                        r.latency.p50_ms, r.latency.p95_ms, r.latency.p99_ms, r.latency.max_ms,
                        r.latency.mean_ms);
  absl::StrAppendFormat(&out, "  server ms     queue %.1f  inference %.1f", r.mean_queue_ms,
                        r.mean_inference_ms);
  if (r.mean_device_ms > 0) absl::StrAppendFormat(&out, "  on the GPU %.1f", r.mean_device_ms);
  absl::StrAppend(&out, " (means)\n");
  absl::StrAppendFormat(&out, "  tokens        %.0f per request (mean)\n", r.mean_input_tokens);
  absl::StrAppendFormat(&out, "  density       %.4f (mean)\n", r.mean_density);
  absl::StrAppendFormat(&out, "  GFLOP/request attention %.4g, total %.4g (means)\n",
                        r.mean_attention_gflops, r.mean_total_gflops);
  absl::StrAppendFormat(&out, "  batch size    %.2f (mean)\n", r.mean_batch_size);
  if (!r.served_by.empty()) {
    absl::StrAppendFormat(&out, "  served by     %s\n", absl::StrJoin(r.served_by, ", "));
  }
  return out;
}

std::string LoadReportToJson(const LoadReport& r) {
  nlohmann::ordered_json json;
  json["server"] = r.server;
  json["model"] = r.model;
  json["task"] = r.task;
  json["mode"] = r.mode;
  json["arrivals"] = r.arrivals;
  json["concurrency"] = r.concurrency;
  json["rate"] = r.rate;
  json["duration_s"] = r.duration_s;
  json["documents"] = r.documents;
  json["requests"] = r.requests;
  json["ok"] = r.ok;
  json["errors"] = r.errors;
  json["errors_by_code"] = nlohmann::ordered_json::object();
  for (const auto& [code, count] : r.errors_by_code) json["errors_by_code"][code] = count;
  json["shed"] = r.shed;
  json["elapsed_s"] = r.elapsed_s;
  json["requests_per_s"] = r.requests_per_s;
  json["tokens_per_s"] = r.tokens_per_s;
  json["latency_ms"] = {{"p50", r.latency.p50_ms},
                        {"p95", r.latency.p95_ms},
                        {"p99", r.latency.p99_ms},
                        {"max", r.latency.max_ms},
                        {"mean", r.latency.mean_ms}};
  json["mean_queue_ms"] = r.mean_queue_ms;
  json["mean_inference_ms"] = r.mean_inference_ms;
  json["mean_device_ms"] = r.mean_device_ms;
  json["mean_input_tokens"] = r.mean_input_tokens;
  json["mean_density"] = r.mean_density;
  json["mean_attention_gflops"] = r.mean_attention_gflops;
  json["mean_total_gflops"] = r.mean_total_gflops;
  json["mean_batch_size"] = r.mean_batch_size;
  json["served_by"] = r.served_by;
  return json.dump();
}

std::string FormatLoadProgress(const LoadProgress& p) {
  std::string out =
      absl::StrFormat("[%6.1fs] sent %d  ok %d  errors %d", p.elapsed_s, p.sent, p.ok, p.errors);
  if (p.shed > 0) absl::StrAppendFormat(&out, "  shed %d", p.shed);
  absl::StrAppendFormat(&out, "  in flight %d  %.1f req/s", p.in_flight, p.current_rps);
  return out;
}

}  // namespace docsparse
