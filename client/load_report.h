// What `docsparse bench load` measures, and its renderings: the final table,
// the --json object and the one-line progress.
#ifndef DOCSPARSE_CLIENT_LOAD_REPORT_H_
#define DOCSPARSE_CLIENT_LOAD_REPORT_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace docsparse {

// One successful request: client-side wall time and the server's cost report
// figures.
struct RequestSample {
  double latency_ms = 0;
  int64_t input_tokens = 0;
  double queue_ms = 0;
  double inference_ms = 0;
  double device_ms = 0;  // a GPU server's; 0 on the CPU
  double density = 0;
  double attention_flops = 0;
  double total_flops = 0;
  int batch_size = 0;
  // What served it, from its cost report: "bf16 on avx512_bf16" (precision
  // and ISA of its linear layers); empty where the report names neither.
  std::string served_by;
};

// The `p`-th percentile (p in [0, 100]) of `values` by linear interpolation
// between closest ranks (NumPy's default): p=50 of {1, 2, 3, 4} is 2.5. 0 for
// no values. `values` need not be sorted.
double Percentile(std::vector<double> values, double p);

struct LatencySummary {
  double p50_ms = 0;
  double p95_ms = 0;
  double p99_ms = 0;
  double max_ms = 0;
  double mean_ms = 0;
};

struct LoadReport {
  // The run, as configured.
  std::string server;
  std::string model;
  std::string task;
  std::string mode;      // "closed" | "open"
  std::string arrivals;  // open loop: "poisson" | "fixed"
  int concurrency = 0;
  double rate = 0;  // requests/s; 0 in closed loop
  double duration_s = 0;
  std::string documents;  // e.g. "16 synthetic (~512 tokens)"

  // Requests sent and answered (ok + errors); `shed` arrivals were never sent
  // (open loop, all workers busy).
  int64_t requests = 0;
  int64_t ok = 0;
  int64_t errors = 0;
  int64_t shed = 0;
  std::map<std::string, int64_t> errors_by_code;  // "DEADLINE_EXCEEDED" -> 3

  // From the first send to the last answer, so the drain is included.
  double elapsed_s = 0;
  // Successful requests and their cost.input_tokens per elapsed second.
  double requests_per_s = 0;
  double tokens_per_s = 0;

  // Over successful requests only (an error's latency says little).
  LatencySummary latency;
  double mean_queue_ms = 0;
  double mean_inference_ms = 0;
  double mean_device_ms = 0;  // 0 unless the server runs on a GPU
  double mean_density = 0;
  double mean_attention_gflops = 0;
  double mean_total_gflops = 0;
  double mean_batch_size = 0;
  double mean_input_tokens = 0;
  // Every distinct RequestSample::served_by, in order: one entry unless the
  // server changed under the run.
  std::vector<std::string> served_by;
};

// Successful requests of a run: every latency (for the percentiles, 8 bytes a
// request) and running sums of the rest. Not thread-safe: one per worker,
// merged at the end.
class SampleAccumulator {
 public:
  void Add(const RequestSample& sample);
  void Merge(const SampleAccumulator& other);
  int64_t count() const { return static_cast<int64_t>(latencies_ms_.size()); }

  // Fills the measured part of `report` (throughput over `elapsed_s`,
  // latencies, means); counts and configuration are left as they are.
  void Summarize(double elapsed_s, LoadReport* report) const;

 private:
  void AddServedBy(const std::string& served_by);

  std::vector<double> latencies_ms_;
  double tokens_ = 0;
  double queue_ms_ = 0;
  double inference_ms_ = 0;
  double device_ms_ = 0;
  double density_ = 0;
  double attention_flops_ = 0;
  double total_flops_ = 0;
  double batch_size_ = 0;
  std::vector<std::string> served_by_;  // distinct, in order
};

// Multi-line human-readable table.
std::string FormatLoadReport(const LoadReport& report);
// One JSON object, one line; error codes as an object of counts.
std::string LoadReportToJson(const LoadReport& report);

// Live figures of a run, for the progress line.
struct LoadProgress {
  double elapsed_s = 0;
  int64_t sent = 0;
  int64_t ok = 0;
  int64_t errors = 0;
  int64_t shed = 0;
  int64_t in_flight = 0;
  // Successful answers per second since the previous progress report.
  double current_rps = 0;
};

// "[  12.0s] sent 340  ok 338  errors 0  in flight 2  27.9 req/s" (no newline).
std::string FormatLoadProgress(const LoadProgress& progress);

}  // namespace docsparse

#endif  // DOCSPARSE_CLIENT_LOAD_REPORT_H_
