#include "server/metrics.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <string>
#include <thread>
#include <vector>

#include "tests/common/exposition.h"

namespace docsparse {
namespace {

// Every family of DESIGN.md, with its type.
const std::vector<std::pair<std::string, std::string>> kFamilies = {
    {"docsparse_build_info", "gauge"},
    {"docsparse_requests_total", "counter"},
    {"docsparse_request_duration_seconds", "histogram"},
    {"docsparse_queue_duration_seconds", "histogram"},
    {"docsparse_inference_duration_seconds", "histogram"},
    {"docsparse_input_tokens", "histogram"},
    {"docsparse_batch_size", "histogram"},
    {"docsparse_queue_depth", "gauge"},
    {"docsparse_inflight_requests", "gauge"},
    {"docsparse_mask_density", "histogram"},
    {"docsparse_attention_flops_total", "counter"},
    {"docsparse_flops_total", "counter"},
    {"docsparse_dense_equivalent_flops_total", "counter"},
    {"docsparse_request_flops", "histogram"},
    {"docsparse_budget_unmet_total", "counter"},
    {"docsparse_dropped_requests_total", "counter"},
    {"docsparse_stopped_requests_total", "counter"},
    {"docsparse_generated_tokens_total", "counter"},
    {"docsparse_time_to_first_token_seconds", "histogram"},
    {"docsparse_decode_step_seconds", "histogram"},
    {"docsparse_generation_cancelled_total", "counter"},
    {"docsparse_model_load_seconds", "gauge"},
    {"process_resident_memory_bytes", "gauge"},
    {"docsparse_heap_in_use_bytes", "gauge"},
    {"docsparse_heap_free_bytes", "gauge"},
};

using ::docsparse::testing::Exposition;

Exposition Render(const Metrics& metrics) {
  const Exposition exposition(metrics.Render());
  EXPECT_TRUE(exposition.errors().empty()) << ::testing::PrintToString(exposition.errors());
  return exposition;
}

v1::CostReport Cost(v1::AttentionKind attention, double density, bool budget_met) {
  v1::CostReport cost;
  cost.set_input_tokens(512);
  cost.set_attention(attention);
  cost.set_mean_density(density);
  cost.set_attention_flops(1e9);
  cost.set_total_flops(5e9);
  cost.set_dense_equivalent_flops(8e9);
  cost.set_budget_met(budget_met);
  return cost;
}

TEST(MetricsTest, EveryFamilyIsPresentAfterRegisterModel) {
  Metrics metrics("1.2.3");
  metrics.RegisterModel("minilm", "dense", 1.5);
  const Exposition exposition = Render(metrics);
  for (const auto& [family, type] : kFamilies) {
    SCOPED_TRACE(family);
    ASSERT_EQ(exposition.types().count(family), 1u);
    EXPECT_EQ(exposition.types().at(family), type);
    EXPECT_TRUE(exposition.HasName(type == "histogram" ? family + "_count" : family));
  }
  EXPECT_EQ(exposition.types().size(), kFamilies.size());
  EXPECT_EQ(exposition.Value(R"(docsparse_build_info{version="1.2.3"})"), 1);
  EXPECT_EQ(exposition.Value(R"(docsparse_model_load_seconds{model="minilm"})"), 1.5);
  for (const char* task : {"embed", "classify", "summarize", "summarize_stream", "infer"}) {
    const std::string labels = std::string("model=\"minilm\",task=\"") + task + "\"";
    EXPECT_EQ(exposition.Value("docsparse_requests_total{" + labels + ",code=\"OK\"}"), 0);
    EXPECT_EQ(exposition.Value("docsparse_mask_density_count{" + labels + ",attention=\"dense\"}"),
              0);
    EXPECT_EQ(
        exposition.Value("docsparse_attention_flops_total{" + labels + ",attention=\"dense\"}"), 0);
    EXPECT_FALSE(exposition.Has("docsparse_mask_density_count{" + labels + ",attention=\"lsg\"}"));
  }
  for (const char* reason : {"deadline", "cancelled", "queue_full"}) {
    EXPECT_EQ(exposition.Value(std::string(R"(docsparse_dropped_requests_total{model="minilm",)") +
                               "reason=\"" + reason + "\"}"),
              0);
  }
  // The unknown model shows only once used.
  EXPECT_FALSE(exposition.Has(R"(docsparse_queue_depth{model="unknown"})"));
}

TEST(MetricsTest, BucketBoundsAreInclusiveAndCountsCumulative) {
  Metrics metrics("v");
  ModelMetrics& model = metrics.RegisterModel("m", "dense", 0);
  double sum = 0;
  for (double seconds : {0.001, 0.0015, 0.002, 131.072, 200.0}) {
    RequestObservation observation;
    observation.request_seconds = seconds;
    model.ObserveRequest(observation);
    sum += seconds;
  }
  const Exposition exposition = Render(metrics);
  const std::string name = "docsparse_request_duration_seconds";
  const std::string labels = R"(model="m",task="embed")";
  const auto bucket = [&](const std::string& le) {
    return exposition.Value(name + "_bucket{" + labels + ",le=\"" + le + "\"}");
  };
  EXPECT_EQ(bucket("0.001"), 1);  // 0.001 itself: le is inclusive
  EXPECT_EQ(bucket("0.002"), 3);
  EXPECT_EQ(bucket("0.004"), 3);
  EXPECT_EQ(bucket("65.536"), 3);
  EXPECT_EQ(bucket("131.072"), 4);
  EXPECT_EQ(bucket("+Inf"), 5);
  EXPECT_EQ(exposition.Value(name + "_count{" + labels + "}"), 5);
  EXPECT_DOUBLE_EQ(exposition.Value(name + "_sum{" + labels + "}"), sum);
  // Not measured: not observed.
  EXPECT_EQ(exposition.Value(R"(docsparse_queue_duration_seconds_count{model="m"})"), 0);
  EXPECT_EQ(exposition.Value(R"(docsparse_inference_duration_seconds_count{)" + labels + "}"), 0);
  EXPECT_EQ(exposition.Value(R"(docsparse_requests_total{)" + labels + R"(,code="OK"})"), 5);
}

// Abstractive summaries: tokens and time to first token come from the cost
// report; decoder steps and early stops are counted by the generating batch.
TEST(MetricsTest, GenerationFamilies) {
  Metrics metrics("v");
  ModelMetrics& model = metrics.RegisterModel("bart", "dense", 0);
  v1::CostReport cost = Cost(v1::ATTENTION_KIND_DENSE, 1.0, true);
  cost.set_generated_tokens(17);
  cost.mutable_timings()->set_time_to_first_token_ms(30);
  RequestObservation observation;
  observation.task = MetricTask::kSummarizeStream;
  observation.cost = &cost;
  model.ObserveRequest(observation);
  model.ObserveRequest(observation);
  // An extractive summary generates nothing and has no first token.
  const v1::CostReport extractive = Cost(v1::ATTENTION_KIND_DENSE, 1.0, true);
  observation.cost = &extractive;
  model.ObserveRequest(observation);
  model.ObserveDecodeStep(0.0003);
  model.ObserveDecodeStep(0.002);
  model.CountGenerationStopped(GenerationStop::kClientCancelled);
  model.CountGenerationStopped(GenerationStop::kClientCancelled);
  model.CountGenerationStopped(GenerationStop::kDeadline);
  const Exposition exposition = Render(metrics);
  const std::string labels = R"(model="bart",task="summarize_stream")";
  EXPECT_EQ(exposition.Value("docsparse_generated_tokens_total{" + labels + "}"), 34);
  EXPECT_EQ(exposition.Value(R"(docsparse_generated_tokens_total{model="bart",task="summarize"})"),
            0);
  EXPECT_EQ(exposition.Value("docsparse_time_to_first_token_seconds_count{" + labels + "}"), 2);
  EXPECT_EQ(
      exposition.Value("docsparse_time_to_first_token_seconds_bucket{" + labels + ",le=\"0.032\"}"),
      2);
  EXPECT_EQ(
      exposition.Value("docsparse_time_to_first_token_seconds_bucket{" + labels + ",le=\"0.016\"}"),
      0);
  EXPECT_EQ(exposition.Value(R"(docsparse_decode_step_seconds_count{model="bart"})"), 2);
  EXPECT_EQ(exposition.Value(R"(docsparse_decode_step_seconds_bucket{model="bart",le="0.0004"})"),
            1);
  EXPECT_EQ(
      exposition.Value(R"(docsparse_generation_cancelled_total{model="bart",reason="client"})"), 2);
  EXPECT_EQ(
      exposition.Value(R"(docsparse_generation_cancelled_total{model="bart",reason="deadline"})"),
      1);
}

TEST(MetricsTest, BatchAndTokenBucketsArePowersOfTwo) {
  Metrics metrics("v");
  ModelMetrics& model = metrics.RegisterModel("m", "dense", 0);
  model.ObserveBatch(1);
  model.ObserveBatch(3);
  model.ObserveBatch(256);
  model.ObserveBatch(257);
  const Exposition exposition = Render(metrics);
  const std::string bucket = R"(docsparse_batch_size_bucket{model="m",le=")";
  EXPECT_EQ(exposition.Value(bucket + "1\"}"), 1);
  EXPECT_EQ(exposition.Value(bucket + "2\"}"), 1);
  EXPECT_EQ(exposition.Value(bucket + "4\"}"), 2);
  EXPECT_EQ(exposition.Value(bucket + "256\"}"), 3);
  EXPECT_EQ(exposition.Value(bucket + "+Inf\"}"), 4);
  EXPECT_EQ(exposition.Value(R"(docsparse_batch_size_sum{model="m"})"), 517);
  const std::string tokens = R"(docsparse_input_tokens_bucket{model="m",task="embed",le=")";
  EXPECT_TRUE(exposition.Has(tokens + "16\"}"));
  EXPECT_TRUE(exposition.Has(tokens + "131072\"}"));
  EXPECT_FALSE(exposition.Has(tokens + "8\"}"));
}

TEST(MetricsTest, CostReportFeedsTheCostFamilies) {
  Metrics metrics("v");
  ModelMetrics& model = metrics.RegisterModel("m", "dense", 0);
  const v1::CostReport lsg = Cost(v1::ATTENTION_KIND_LSG, 0.1, /*budget_met=*/false);
  RequestObservation observation;
  observation.task = MetricTask::kClassify;
  observation.request_seconds = 0.5;
  observation.queue_seconds = 0.25;
  observation.inference_seconds = 0.25;
  observation.cost = &lsg;
  model.ObserveRequest(observation);
  // The model's configured attention stands in for UNSPECIFIED.
  const v1::CostReport unspecified = Cost(v1::ATTENTION_KIND_UNSPECIFIED, 1, true);
  observation.cost = &unspecified;
  model.ObserveRequest(observation);
  // A failed request's cost is not read.
  observation.code = grpc::StatusCode::INVALID_ARGUMENT;
  model.ObserveRequest(observation);

  const Exposition exposition = Render(metrics);
  const std::string labels = R"(model="m",task="classify")";
  const std::string lsg_labels = labels + R"(,attention="lsg")";
  const std::string dense_labels = labels + R"(,attention="dense")";
  EXPECT_EQ(exposition.Value("docsparse_mask_density_bucket{" + lsg_labels + ",le=\"0.05\"}"), 0);
  EXPECT_EQ(exposition.Value("docsparse_mask_density_bucket{" + lsg_labels + ",le=\"0.1\"}"), 1);
  EXPECT_EQ(exposition.Value("docsparse_mask_density_bucket{" + dense_labels + ",le=\"0.75\"}"), 0);
  EXPECT_EQ(exposition.Value("docsparse_mask_density_bucket{" + dense_labels + ",le=\"1\"}"), 1);
  EXPECT_EQ(exposition.Value("docsparse_attention_flops_total{" + lsg_labels + "}"), 1e9);
  EXPECT_EQ(exposition.Value("docsparse_attention_flops_total{" + dense_labels + "}"), 1e9);
  EXPECT_EQ(exposition.Value("docsparse_flops_total{" + labels + "}"), 1e10);
  EXPECT_EQ(exposition.Value("docsparse_dense_equivalent_flops_total{" + labels + "}"), 1.6e10);
  EXPECT_EQ(exposition.Value("docsparse_request_flops_bucket{" + labels + ",le=\"3e+09\"}"), 0);
  EXPECT_EQ(exposition.Value("docsparse_request_flops_bucket{" + labels + ",le=\"1e+10\"}"), 2);
  EXPECT_EQ(exposition.Value("docsparse_input_tokens_bucket{" + labels + ",le=\"512\"}"), 2);
  EXPECT_EQ(exposition.Value("docsparse_input_tokens_count{" + labels + "}"), 2);
  EXPECT_EQ(exposition.Value("docsparse_budget_unmet_total{" + labels + "}"), 1);
  EXPECT_EQ(exposition.Value("docsparse_requests_total{" + labels + ",code=\"OK\"}"), 2);
  EXPECT_EQ(exposition.Value("docsparse_requests_total{" + labels + ",code=\"INVALID_ARGUMENT\"}"),
            1);
  EXPECT_EQ(exposition.Value(R"(docsparse_queue_duration_seconds_count{model="m"})"), 3);
  EXPECT_EQ(exposition.Value("docsparse_inference_duration_seconds_sum{" + labels + "}"), 0.75);
}

TEST(MetricsTest, StatusCodesGaugesAndDrops) {
  Metrics metrics("v");
  ModelMetrics& model = metrics.RegisterModel("m", "sbm", 0);
  RequestObservation observation;
  observation.task = MetricTask::kInfer;
  observation.code = grpc::StatusCode::DEADLINE_EXCEEDED;
  model.ObserveRequest(observation);
  // Not a code: counted as UNKNOWN. 20, not 99: grpc::StatusCode has no
  // fixed underlying type, so its values end at 31 (UBSan: 99 is undefined).
  observation.code = static_cast<grpc::StatusCode>(20);
  model.ObserveRequest(observation);
  model.CountDropped(DropReason::kDeadline);
  model.CountDropped(DropReason::kQueueFull);
  model.CountDropped(DropReason::kQueueFull);
  model.SetQueueDepth(7);
  model.AddInflight(3);
  model.AddInflight(-1);
  const Exposition exposition = Render(metrics);
  const std::string labels = R"(model="m",task="infer")";
  EXPECT_EQ(exposition.Value("docsparse_requests_total{" + labels + ",code=\"DEADLINE_EXCEEDED\"}"),
            1);
  EXPECT_EQ(exposition.Value("docsparse_requests_total{" + labels + ",code=\"UNKNOWN\"}"), 1);
  EXPECT_FALSE(exposition.Has("docsparse_requests_total{" + labels + ",code=\"CANCELLED\"}"));
  EXPECT_EQ(exposition.Value(R"(docsparse_dropped_requests_total{model="m",reason="deadline"})"),
            1);
  EXPECT_EQ(exposition.Value(R"(docsparse_dropped_requests_total{model="m",reason="cancelled"})"),
            0);
  EXPECT_EQ(exposition.Value(R"(docsparse_dropped_requests_total{model="m",reason="queue_full"})"),
            2);
  EXPECT_EQ(exposition.Value(R"(docsparse_stopped_requests_total{model="m",reason="deadline"})"),
            0);
  EXPECT_FALSE(
      exposition.Has(R"(docsparse_stopped_requests_total{model="m",reason="queue_full"})"));
  EXPECT_EQ(exposition.Value(R"(docsparse_queue_depth{model="m"})"), 7);
  EXPECT_EQ(exposition.Value(R"(docsparse_inflight_requests{model="m"})"), 2);
  EXPECT_TRUE(exposition.Has("docsparse_mask_density_count{" + labels + ",attention=\"sbm\"}"));
  EXPECT_FALSE(exposition.Has("docsparse_mask_density_count{" + labels + ",attention=\"dense\"}"));
}

TEST(MetricsTest, StoppedRequestsAndTheLabelCacheReadAtEachScrape) {
  Metrics metrics("v");
  ModelMetrics& model = metrics.RegisterModel("m", "dense", 0);
  model.CountStopped(DropReason::kCancelled);
  model.CountStopped(DropReason::kDeadline);
  model.CountStopped(DropReason::kDeadline);
  LabelCacheReading reading{5, 3, 1, 4096};
  metrics.SetLabelCacheSource("m", [&reading] { return reading; });
  Exposition exposition = Render(metrics);
  EXPECT_EQ(exposition.Value(R"(docsparse_stopped_requests_total{model="m",reason="deadline"})"),
            2);
  EXPECT_EQ(exposition.Value(R"(docsparse_stopped_requests_total{model="m",reason="cancelled"})"),
            1);
  EXPECT_EQ(exposition.types().at("docsparse_label_cache_hits_total"), "counter");
  EXPECT_EQ(exposition.types().at("docsparse_label_cache_bytes"), "gauge");
  EXPECT_EQ(exposition.Value(R"(docsparse_label_cache_hits_total{model="m"})"), 5);
  EXPECT_EQ(exposition.Value(R"(docsparse_label_cache_misses_total{model="m"})"), 3);
  EXPECT_EQ(exposition.Value(R"(docsparse_label_cache_evictions_total{model="m"})"), 1);
  EXPECT_EQ(exposition.Value(R"(docsparse_label_cache_bytes{model="m"})"), 4096);
  reading.hits = 9;
  exposition = Render(metrics);
  EXPECT_EQ(exposition.Value(R"(docsparse_label_cache_hits_total{model="m"})"), 9);
}

TEST(MetricsTest, UnknownModelShowsOnceUsed) {
  Metrics metrics("v");
  metrics.RegisterModel("m", "dense", 0);
  EXPECT_EQ(metrics.Find("nope"), nullptr);
  EXPECT_EQ(metrics.Find("unknown"), nullptr);
  RequestObservation observation;
  observation.code = grpc::StatusCode::NOT_FOUND;
  metrics.Unknown().ObserveRequest(observation);
  const Exposition exposition = Render(metrics);
  EXPECT_EQ(exposition.Value(
                R"(docsparse_requests_total{model="unknown",task="embed",code="NOT_FOUND"})"),
            1);
  EXPECT_TRUE(exposition.Has(R"(docsparse_inflight_requests{model="unknown"})"));
  EXPECT_FALSE(exposition.Has(R"(docsparse_model_load_seconds{model="unknown"})"));
}

TEST(MetricsTest, RegisteringAgainReturnsTheSameHandle) {
  Metrics metrics("v");
  ModelMetrics& first = metrics.RegisterModel("m", "dense", 1);
  ModelMetrics& second = metrics.RegisterModel("m", "dense", 2);
  EXPECT_EQ(&first, &second);
  EXPECT_EQ(metrics.Find("m"), &first);
  EXPECT_EQ(first.model(), "m");
  EXPECT_EQ(Render(metrics).Value(R"(docsparse_model_load_seconds{model="m"})"), 2);
}

TEST(MetricsTest, LabelValuesAreEscaped) {
  Metrics metrics("v\"1");
  metrics.RegisterModel("we\"ird\\name\nx", "dense", 0);
  const Exposition exposition = Render(metrics);
  EXPECT_EQ(exposition.Value(R"(docsparse_build_info{version="v\"1"})"), 1);
  EXPECT_EQ(exposition.Value(R"(docsparse_queue_depth{model="we\"ird\\name\nx"})"), 0);
}

// Observations that would break a series are not observed: NaN, and
// counter amounts below zero.
TEST(MetricsTest, NanAndNegativeAmountsAreIgnored) {
  Metrics metrics("v");
  ModelMetrics& model = metrics.RegisterModel("m", "dense", 0);
  v1::CostReport cost = Cost(v1::ATTENTION_KIND_DENSE, std::nan(""), true);
  cost.set_total_flops(-5);
  cost.set_attention_flops(std::nan(""));
  RequestObservation observation;
  observation.cost = &cost;
  model.ObserveRequest(observation);
  model.ObserveDecodeStep(std::nan(""));
  const Exposition exposition = Render(metrics);
  const std::string labels = R"(model="m",task="embed")";
  EXPECT_EQ(exposition.Value("docsparse_mask_density_count{" + labels + R"(,attention="dense"})"),
            0);
  EXPECT_EQ(
      exposition.Value("docsparse_attention_flops_total{" + labels + R"(,attention="dense"})"), 0);
  EXPECT_EQ(exposition.Value("docsparse_flops_total{" + labels + "}"), 0);
  EXPECT_EQ(exposition.Value(R"(docsparse_decode_step_seconds_count{model="m"})"), 0);
  EXPECT_EQ(exposition.Value("docsparse_requests_total{" + labels + R"(,code="OK"})"), 1);
}

// The model_compute_info series is replaced, not added to.
TEST(MetricsTest, ComputeInfoIsReplaced) {
  Metrics metrics("v");
  metrics.RegisterModel("m", "dense", 0);
  EXPECT_EQ(Render(metrics).types().count("docsparse_model_compute_info"), 0u);
  metrics.SetModelCompute("m", "fp32", "avx2");
  metrics.SetModelCompute("m", "bf16", "amx");
  const Exposition exposition = Render(metrics);
  EXPECT_EQ(
      exposition.Value(R"(docsparse_model_compute_info{model="m",precision="bf16",isa="amx"})"), 1);
  EXPECT_FALSE(
      exposition.Has(R"(docsparse_model_compute_info{model="m",precision="fp32",isa="avx2"})"));
}

TEST(MetricsTest, GpuMemoryShowsOnlyWithADeviceSource) {
  Metrics metrics("1.2.3");
  metrics.RegisterModel("minilm", "lsg", 1.0);
  EXPECT_FALSE(Render(metrics).types().count("docsparse_gpu_memory_allocated_bytes"));
  int64_t allocated = 100;
  double utilization = -1;  // NVML did not answer
  metrics.SetDeviceSource("cuda:0", [&allocated, &utilization] {
    DeviceReading reading{allocated, 4096, 80LL << 30};
    reading.utilization = utilization;
    return reading;
  });
  allocated = 2048;  // read at the scrape, not when set
  EXPECT_FALSE(Render(metrics).types().count("docsparse_gpu_utilization_ratio"));
  utilization = 0.37;
  const Exposition exposition = Render(metrics);
  ASSERT_EQ(exposition.types().count("docsparse_gpu_utilization_ratio"), 1u);
  EXPECT_EQ(exposition.types().at("docsparse_gpu_utilization_ratio"), "gauge");
  EXPECT_DOUBLE_EQ(exposition.Value(R"(docsparse_gpu_utilization_ratio{device="cuda:0"})"), 0.37);
  for (const char* family :
       {"docsparse_gpu_memory_allocated_bytes", "docsparse_gpu_memory_reserved_bytes",
        "docsparse_gpu_memory_total_bytes"}) {
    ASSERT_EQ(exposition.types().count(family), 1u) << family;
    EXPECT_EQ(exposition.types().at(family), "gauge");
  }
  EXPECT_EQ(exposition.Value(R"(docsparse_gpu_memory_allocated_bytes{device="cuda:0"})"), 2048);
  EXPECT_EQ(exposition.Value(R"(docsparse_gpu_memory_reserved_bytes{device="cuda:0"})"), 4096);
  EXPECT_EQ(exposition.Value(R"(docsparse_gpu_memory_total_bytes{device="cuda:0"})"),
            static_cast<double>(80LL << 30));
}

TEST(MetricsTest, GpuSecondsAddUpPerModelAndShowOnlyOnceObserved) {
  Metrics metrics("1.2.3");
  ModelMetrics& lsg = metrics.RegisterModel("minilm-lsg", "lsg", 1.0);
  metrics.RegisterModel("minilm", "dense", 1.0);
  EXPECT_FALSE(Render(metrics).types().count("docsparse_gpu_seconds_total"));
  lsg.ObserveDeviceSeconds(0.25);
  lsg.ObserveDeviceSeconds(0.5);
  lsg.ObserveDeviceSeconds(std::nan(""));  // a counter never takes NaN
  const Exposition exposition = Render(metrics);
  EXPECT_EQ(exposition.types().at("docsparse_gpu_seconds_total"), "counter");
  EXPECT_DOUBLE_EQ(exposition.Value(R"(docsparse_gpu_seconds_total{model="minilm-lsg"})"), 0.75);
  EXPECT_FALSE(exposition.Has(R"(docsparse_gpu_seconds_total{model="minilm"})"));
}

TEST(MetricsTest, ConcurrentObservationsAddUp) {
  Metrics metrics("v");
  ModelMetrics& model = metrics.RegisterModel("m", "dense", 0);
  constexpr int kThreads = 8;
  constexpr int kPerThread = 20000;
  const v1::CostReport cost = Cost(v1::ATTENTION_KIND_DENSE, 0.5, true);
  std::atomic<bool> done{false};
  // Renders while the others write: every snapshot must stay well-formed and
  // each histogram's +Inf bucket must equal its count.
  std::thread reader([&] {
    while (!done.load()) {
      const Exposition exposition(metrics.Render());
      ASSERT_TRUE(exposition.errors().empty());
      const std::string labels = R"(model="m",task="summarize")";
      ASSERT_EQ(
          exposition.Value("docsparse_request_duration_seconds_bucket{" + labels + ",le=\"+Inf\"}"),
          exposition.Value("docsparse_request_duration_seconds_count{" + labels + "}"));
    }
  });
  std::vector<std::thread> writers;
  for (int t = 0; t < kThreads; ++t) {
    writers.emplace_back([&] {
      for (int i = 0; i < kPerThread; ++i) {
        model.AddInflight(1);
        RequestObservation observation;
        observation.task = MetricTask::kSummarize;
        observation.request_seconds = 0.5;
        observation.queue_seconds = 0.25;
        observation.inference_seconds = 0.25;
        observation.cost = &cost;
        model.ObserveRequest(observation);
        model.ObserveBatch(2);
        model.CountDropped(DropReason::kCancelled);
        model.AddInflight(-1);
      }
    });
  }
  for (std::thread& writer : writers) writer.join();
  done.store(true);
  reader.join();

  constexpr double kTotal = kThreads * kPerThread;
  const Exposition exposition = Render(metrics);
  const std::string labels = R"(model="m",task="summarize")";
  EXPECT_EQ(exposition.Value("docsparse_requests_total{" + labels + ",code=\"OK\"}"), kTotal);
  EXPECT_EQ(exposition.Value("docsparse_request_duration_seconds_count{" + labels + "}"), kTotal);
  EXPECT_EQ(exposition.Value("docsparse_request_duration_seconds_sum{" + labels + "}"),
            kTotal * 0.5);
  EXPECT_EQ(exposition.Value(R"(docsparse_queue_duration_seconds_sum{model="m"})"), kTotal * 0.25);
  EXPECT_EQ(exposition.Value(R"(docsparse_batch_size_count{model="m"})"), kTotal);
  EXPECT_EQ(exposition.Value(R"(docsparse_inflight_requests{model="m"})"), 0);
  EXPECT_EQ(exposition.Value(R"(docsparse_dropped_requests_total{model="m",reason="cancelled"})"),
            kTotal);
  EXPECT_EQ(exposition.Value("docsparse_flops_total{" + labels + "}"), kTotal * 5e9);
  EXPECT_EQ(exposition.Value("docsparse_mask_density_bucket{" + labels +
                             ",attention=\"dense\",le=\"0.5\"}"),
            kTotal);
}

}  // namespace
}  // namespace docsparse
