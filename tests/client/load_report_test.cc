#include "client/load_report.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

namespace docsparse {
namespace {

TEST(LoadReportTest, PercentileInterpolatesBetweenRanks) {
  EXPECT_DOUBLE_EQ(Percentile({}, 50), 0);
  EXPECT_DOUBLE_EQ(Percentile({7}, 99), 7);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 50), 2.5);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 0), 1);
  EXPECT_DOUBLE_EQ(Percentile({4, 1, 3, 2}, 100), 4);
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  // NumPy: np.percentile(range(1, 101), [50, 95, 99]) = 50.5, 95.05, 99.01.
  EXPECT_NEAR(Percentile(hundred, 50), 50.5, 1e-9);
  EXPECT_NEAR(Percentile(hundred, 95), 95.05, 1e-9);
  EXPECT_NEAR(Percentile(hundred, 99), 99.01, 1e-9);
  EXPECT_DOUBLE_EQ(Percentile(hundred, 150), 100);
}

TEST(LoadReportTest, SummarizesSamplesOfSeveralWorkers) {
  SampleAccumulator workers[2];
  for (int i = 0; i < 4; ++i) {
    RequestSample sample;
    sample.latency_ms = 10 * (4 - i);
    sample.input_tokens = 100;
    sample.queue_ms = i;
    sample.inference_ms = 2 * i;
    sample.device_ms = i;
    sample.density = 0.25 * (i + 1);
    sample.attention_flops = 1e9;
    sample.total_flops = 4e9;
    sample.batch_size = i + 1;
    // Worker 1 first sees what worker 0 saw second: the report keeps one of
    // each, in the order the merge meets them; an empty one is not listed.
    sample.served_by = i == 3 ? "" : i == 1 ? "int8 on avx2" : "bf16 on avx512_bf16";
    workers[i % 2].Add(sample);
  }
  SampleAccumulator all;
  all.Merge(workers[0]);
  all.Merge(workers[1]);
  EXPECT_EQ(all.count(), 4);
  LoadReport report;
  all.Summarize(2.0, &report);
  EXPECT_DOUBLE_EQ(report.requests_per_s, 2);
  EXPECT_DOUBLE_EQ(report.tokens_per_s, 200);
  EXPECT_DOUBLE_EQ(report.latency.p50_ms, 25);
  EXPECT_DOUBLE_EQ(report.latency.max_ms, 40);
  EXPECT_DOUBLE_EQ(report.latency.mean_ms, 25);
  EXPECT_DOUBLE_EQ(report.mean_queue_ms, 1.5);
  EXPECT_DOUBLE_EQ(report.mean_inference_ms, 3);
  EXPECT_DOUBLE_EQ(report.mean_device_ms, 1.5);
  EXPECT_DOUBLE_EQ(report.mean_density, 0.625);
  EXPECT_DOUBLE_EQ(report.mean_attention_gflops, 1);
  EXPECT_DOUBLE_EQ(report.mean_total_gflops, 4);
  EXPECT_DOUBLE_EQ(report.mean_batch_size, 2.5);
  EXPECT_DOUBLE_EQ(report.mean_input_tokens, 100);
  EXPECT_EQ(report.served_by, (std::vector<std::string>{"bf16 on avx512_bf16", "int8 on avx2"}));
}

TEST(LoadReportTest, NoSamplesLeaveZeros) {
  LoadReport report;
  SampleAccumulator().Summarize(1.0, &report);
  EXPECT_EQ(report.requests_per_s, 0);
  EXPECT_EQ(report.latency.p99_ms, 0);
}

LoadReport Example() {
  LoadReport report;
  report.server = "127.0.0.1:1";
  report.task = "embed";
  report.mode = "open";
  report.arrivals = "poisson";
  report.concurrency = 4;
  report.rate = 20;
  report.duration_s = 3;
  report.documents = "2 document(s)";
  report.requests = 10;
  report.ok = 7;
  report.errors = 3;
  report.shed = 5;
  report.errors_by_code = {{"DEADLINE_EXCEEDED", 2}, {"UNAVAILABLE", 1}};
  report.latency.p99_ms = 12.5;
  report.served_by = {"bf16 on amx"};
  return report;
}

TEST(LoadReportTest, TableNamesErrorsByCode) {
  const std::string table = FormatLoadReport(Example());
  EXPECT_NE(table.find("errors        3 (DEADLINE_EXCEEDED 2, UNAVAILABLE 1)"), std::string::npos)
      << table;
  EXPECT_NE(table.find("shed          5"), std::string::npos) << table;
  EXPECT_NE(table.find("served by     bf16 on amx"), std::string::npos) << table;
  EXPECT_NE(table.find("p99 12.5"), std::string::npos) << table;
  EXPECT_NE(table.find("open loop, concurrency 4, poisson arrivals at 20 req/s"), std::string::npos)
      << table;
}

TEST(LoadReportTest, JsonHasTheSameFigures) {
  const std::string text = LoadReportToJson(Example());
  EXPECT_EQ(text.find('\n'), std::string::npos);
  const nlohmann::json json = nlohmann::json::parse(text);
  EXPECT_EQ(json["requests"], 10);
  EXPECT_EQ(json["ok"], 7);
  EXPECT_EQ(json["errors"], 3);
  EXPECT_EQ(json["shed"], 5);
  EXPECT_EQ(json["mode"], "open");
  EXPECT_EQ(json["arrivals"], "poisson");
  EXPECT_EQ(json["errors_by_code"]["DEADLINE_EXCEEDED"], 2);
  EXPECT_DOUBLE_EQ(json["latency_ms"]["p99"].get<double>(), 12.5);
  EXPECT_EQ(json["served_by"], nlohmann::json::array({"bf16 on amx"}));
  for (const char* key : {"requests_per_s", "tokens_per_s", "mean_queue_ms", "mean_inference_ms",
                          "mean_device_ms", "mean_density", "mean_attention_gflops",
                          "mean_total_gflops", "mean_batch_size", "elapsed_s"}) {
    EXPECT_TRUE(json.contains(key)) << key;
  }
}

TEST(LoadReportTest, ProgressLineIsOneLine) {
  LoadProgress progress;
  progress.elapsed_s = 12;
  progress.sent = 340;
  progress.ok = 338;
  progress.in_flight = 2;
  progress.current_rps = 27.94;
  EXPECT_EQ(FormatLoadProgress(progress),
            "[  12.0s] sent 340  ok 338  errors 0  in flight 2  27.9 req/s");
  progress.shed = 3;
  EXPECT_NE(FormatLoadProgress(progress).find("shed 3"), std::string::npos);
}

}  // namespace
}  // namespace docsparse
