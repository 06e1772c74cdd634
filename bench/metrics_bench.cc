#include "bench/metrics_bench.h"

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "server/metrics.h"

ABSL_FLAG(int, metrics_requests, 200000, "requests recorded per thread and repeat");
ABSL_FLAG(int, metrics_threads, 2, "threads recording at once in the contended case");
ABSL_FLAG(int, metrics_repeats, 5, "repeats per case (median reported)");

namespace docsparse::bench {
namespace {

v1::CostReport FullCostReport() {
  v1::CostReport cost;
  cost.set_input_tokens(4096);
  cost.set_attention(v1::ATTENTION_KIND_LSG);
  cost.set_mean_density(0.07);
  cost.set_attention_flops(3.1e9);
  cost.set_total_flops(2.9e10);
  cost.set_dense_equivalent_flops(4.4e10);
  cost.set_budget_met(true);
  return cost;
}

// One answered request as the server records it.
void RecordRequest(ModelMetrics& model, const v1::CostReport& cost, int i) {
  model.AddInflight(1);
  RequestObservation observation;
  observation.task = MetricTask::kEmbed;
  observation.request_seconds = 0.05 + (i & 7) * 0.01;
  observation.queue_seconds = 0.001 * (i & 3);
  observation.inference_seconds = 0.04;
  observation.cost = &cost;
  model.ObserveRequest(observation);
  model.ObserveBatch(1 + (i & 3));
  model.AddInflight(-1);
}

// Nanoseconds per recorded request, `threads` threads at once.
double NsPerRequest(ModelMetrics& model, int threads, int requests) {
  const v1::CostReport cost = FullCostReport();
  const auto start = std::chrono::steady_clock::now();
  std::vector<std::thread> workers;
  for (int t = 0; t < threads; ++t) {
    workers.emplace_back([&] {
      for (int i = 0; i < requests; ++i) RecordRequest(model, cost, i);
    });
  }
  for (std::thread& worker : workers) worker.join();
  const double ns =
      std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start).count();
  // Per request of one thread: the latency each request's thread pays.
  return ns / requests;
}

}  // namespace

int RunMetricsBench() {
  Metrics metrics("bench");
  ModelMetrics& model = metrics.RegisterModel("minilm-lsg", "lsg", 1.0);
  const int requests = std::max(1, absl::GetFlag(FLAGS_metrics_requests));
  const int repeats = std::max(1, absl::GetFlag(FLAGS_metrics_repeats));
  std::printf("%-8s %8s %14s\n", "threads", "requests", "ns_per_request");
  for (int threads : {1, std::max(1, absl::GetFlag(FLAGS_metrics_threads))}) {
    NsPerRequest(model, threads, requests / 10);  // warm-up
    std::vector<double> ns;
    for (int r = 0; r < repeats; ++r) ns.push_back(NsPerRequest(model, threads, requests));
    std::sort(ns.begin(), ns.end());
    std::printf("%-8d %8d %14.0f\n", threads, requests, ns[ns.size() / 2]);
  }
  // The scrape that reads it all, for scale.
  const auto start = std::chrono::steady_clock::now();
  const size_t bytes = metrics.Render().size();
  std::printf(
      "render: %zu bytes in %.0f us\n", bytes,
      std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count());
  return 0;
}

}  // namespace docsparse::bench
