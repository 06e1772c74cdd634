#include "server/metrics.h"

#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/metric_family.h>
#include <prometheus/registry.h>
#include <prometheus/text_serializer.h>

#include <array>
#include <cmath>
#include <cstddef>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "server/process_memory.h"

namespace docsparse {

namespace {

using prometheus::BuildCounter;
using prometheus::BuildGauge;
using prometheus::BuildHistogram;
using prometheus::Counter;
using prometheus::Family;
using prometheus::Gauge;
using prometheus::Histogram;
using prometheus::Labels;

// Bucket upper bounds. Latencies: 1 ms doubling to 131 s.
const Histogram::BucketBoundaries& SecondsBuckets() {
  static const auto* bounds = new Histogram::BucketBoundaries{
      0.001, 0.002, 0.004, 0.008, 0.016, 0.032,  0.064,  0.128,  0.256,
      0.512, 1.024, 2.048, 4.096, 8.192, 16.384, 32.768, 65.536, 131.072};
  return *bounds;
}
// Decoder steps: 50 µs doubling to 3.3 s (a step over one row of a small
// model on a CPU is well under a millisecond).
const Histogram::BucketBoundaries& StepSecondsBuckets() {
  static const auto* bounds = new Histogram::BucketBoundaries{
      0.00005, 0.0001, 0.0002, 0.0004, 0.0008, 0.0016, 0.0032, 0.0064, 0.0128,
      0.0256,  0.0512, 0.1024, 0.2048, 0.4096, 0.8192, 1.6384, 3.2768};
  return *bounds;
}
const Histogram::BucketBoundaries& TokenBuckets() {
  static const auto* bounds = new Histogram::BucketBoundaries{
      16, 32, 64, 128, 256, 512, 1024, 2048, 4096, 8192, 16384, 32768, 65536, 131072};
  return *bounds;
}
const Histogram::BucketBoundaries& BatchBuckets() {
  static const auto* bounds = new Histogram::BucketBoundaries{1, 2, 4, 8, 16, 32, 64, 128, 256};
  return *bounds;
}
const Histogram::BucketBoundaries& DensityBuckets() {
  static const auto* bounds = new Histogram::BucketBoundaries{
      0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 0.75, 1};
  return *bounds;
}
// Two steps a decade, 1 MFLOP to 100 TFLOP.
const Histogram::BucketBoundaries& FlopsBuckets() {
  static const auto* bounds = new Histogram::BucketBoundaries{
      1e6, 3e6, 1e7, 3e7, 1e8, 3e8, 1e9, 3e9, 1e10, 3e10, 1e11, 3e11, 1e12, 3e12, 1e13, 3e13, 1e14};
  return *bounds;
}

constexpr size_t kTaskCount = 5;
constexpr size_t kCodeCount = 17;  // grpc::StatusCode OK (0) .. UNAUTHENTICATED (16)
constexpr size_t kDropReasonCount = 3;
constexpr size_t kGenerationStopCount = 2;
// v1::AttentionKind without UNSPECIFIED: index = kind - 1.
constexpr std::array<std::string_view, 12> kAttentionNames = {
    "dense", "lsg", "sbm",     "longformer", "bigbird", "sparse_transformer",
    "star",  "lsh", "routing", "modernbert", "etc",     "union"};
static_assert(kAttentionNames.size() == v1::AttentionKind_MAX,
              "a new v1::AttentionKind needs its label value here");
constexpr size_t kAttentionCount = kAttentionNames.size();

constexpr std::array<MetricTask, kTaskCount> kTasks = {
    MetricTask::kEmbed, MetricTask::kClassify, MetricTask::kSummarize, MetricTask::kSummarizeStream,
    MetricTask::kInfer};
constexpr std::array<DropReason, kDropReasonCount> kDropReasons = {
    DropReason::kDeadline, DropReason::kCancelled, DropReason::kQueueFull};
constexpr std::array<GenerationStop, kGenerationStopCount> kGenerationStops = {
    GenerationStop::kClientCancelled, GenerationStop::kDeadline};

size_t CodeIndex(grpc::StatusCode code) {
  const int value = static_cast<int>(code);
  return value >= 0 && value < static_cast<int>(kCodeCount)
             ? static_cast<size_t>(value)
             : static_cast<size_t>(grpc::StatusCode::UNKNOWN);
}

// "OK", "CANCELLED", ...: the names gRPC and absl share.
const std::array<std::string, kCodeCount>& CodeNames() {
  static const auto* names = [] {
    auto* result = new std::array<std::string, kCodeCount>;
    for (size_t i = 0; i < kCodeCount; ++i) {
      (*result)[i] = absl::StatusCodeToString(static_cast<absl::StatusCode>(i));
    }
    return result;
  }();
  return *names;
}

int AttentionIndex(std::string_view name) {
  for (size_t i = 0; i < kAttentionCount; ++i) {
    if (kAttentionNames[i] == name) return static_cast<int>(i);
  }
  return 0;
}

}  // namespace

namespace metrics_internal {

// Every family of the exposition, registered once in the Metrics' registry.
struct Families {
  explicit Families(prometheus::Registry& registry)
      : build_info(BuildGauge()
                       .Name("docsparse_build_info")
                       .Help("Build of the running server; the value is always 1.")
                       .Register(registry)),
        compute_info(
            BuildGauge()
                .Name("docsparse_model_compute_info")
                .Help("Precision and instruction set of each model's linear layers; always 1.")
                .Register(registry)),
        requests(BuildCounter()
                     .Name("docsparse_requests_total")
                     .Help("Answered requests by model, task and gRPC status code.")
                     .Register(registry)),
        request_duration(BuildHistogram()
                             .Name("docsparse_request_duration_seconds")
                             .Help("Time from a request's arrival to its response.")
                             .Register(registry)),
        queue_duration(BuildHistogram()
                           .Name("docsparse_queue_duration_seconds")
                           .Help("Time requests waited for compute.")
                           .Register(registry)),
        inference_duration(BuildHistogram()
                               .Name("docsparse_inference_duration_seconds")
                               .Help("Time from the start of a request's work to its response.")
                               .Register(registry)),
        input_tokens(BuildHistogram()
                         .Name("docsparse_input_tokens")
                         .Help("Document tokens per answered request, special tokens and all "
                               "windows included.")
                         .Register(registry)),
        batch_size(BuildHistogram()
                       .Name("docsparse_batch_size")
                       .Help("Requests per batch run.")
                       .Register(registry)),
        queue_depth(BuildGauge()
                        .Name("docsparse_queue_depth")
                        .Help("Requests waiting for compute.")
                        .Register(registry)),
        inflight(BuildGauge()
                     .Name("docsparse_inflight_requests")
                     .Help("Requests received and not yet answered.")
                     .Register(registry)),
        mask_density(BuildHistogram()
                         .Name("docsparse_mask_density")
                         .Help("Realised attention density (mean over layers and heads) per "
                               "answered request.")
                         .Register(registry)),
        attention_flops(BuildCounter()
                            .Name("docsparse_attention_flops_total")
                            .Help("Attention FLOPs computed, planner overhead included.")
                            .Register(registry)),
        flops(BuildCounter()
                  .Name("docsparse_flops_total")
                  .Help("Forward-pass FLOPs computed.")
                  .Register(registry)),
        dense_equivalent_flops(
            BuildCounter()
                .Name("docsparse_dense_equivalent_flops_total")
                .Help("FLOPs the same requests would have cost under dense attention.")
                .Register(registry)),
        request_flops(BuildHistogram()
                          .Name("docsparse_request_flops")
                          .Help("Forward-pass FLOPs per answered request.")
                          .Register(registry)),
        budget_unmet(BuildCounter()
                         .Name("docsparse_budget_unmet_total")
                         .Help("Answered requests whose sparsity budget was not met.")
                         .Register(registry)),
        dropped(BuildCounter()
                    .Name("docsparse_dropped_requests_total")
                    .Help("Requests answered without running the model: deadline passed, "
                          "client cancelled, or queue full.")
                    .Register(registry)),
        stopped(BuildCounter()
                    .Name("docsparse_stopped_requests_total")
                    .Help("Requests whose encoder work stopped between layers because nobody "
                          "waited any more: deadline passed or client cancelled.")
                    .Register(registry)),
        generated_tokens(BuildCounter()
                             .Name("docsparse_generated_tokens_total")
                             .Help("Tokens generated for answered abstractive summaries.")
                             .Register(registry)),
        time_to_first_token(BuildHistogram()
                                .Name("docsparse_time_to_first_token_seconds")
                                .Help("Time from an abstractive summary request's arrival to its "
                                      "first generated token.")
                                .Register(registry)),
        decode_step(BuildHistogram()
                        .Name("docsparse_decode_step_seconds")
                        .Help("Time of one decoder step over all the sequences decoding together.")
                        .Register(registry)),
        generation_cancelled(BuildCounter()
                                 .Name("docsparse_generation_cancelled_total")
                                 .Help("Requests whose decoding stopped early: the client "
                                       "cancelled or the deadline passed.")
                                 .Register(registry)),
        gpu_seconds(BuildCounter()
                        .Name("docsparse_gpu_seconds_total")
                        .Help("Time the model's batches took on the GPU (CUDA events around each "
                              "batch on its stream; gaps waiting for the host included; the "
                              "batches of two model instances may overlap).")
                        .Register(registry)),
        model_load(BuildGauge()
                       .Name("docsparse_model_load_seconds")
                       .Help("Time it took to load the model.")
                       .Register(registry)) {}

  Family<Gauge>& build_info;
  Family<Gauge>& compute_info;
  Family<Counter>& requests;
  Family<Histogram>& request_duration;
  Family<Histogram>& queue_duration;
  Family<Histogram>& inference_duration;
  Family<Histogram>& input_tokens;
  Family<Histogram>& batch_size;
  Family<Gauge>& queue_depth;
  Family<Gauge>& inflight;
  Family<Histogram>& mask_density;
  Family<Counter>& attention_flops;
  Family<Counter>& flops;
  Family<Counter>& dense_equivalent_flops;
  Family<Histogram>& request_flops;
  Family<Counter>& budget_unmet;
  Family<Counter>& dropped;
  Family<Counter>& stopped;
  Family<Counter>& generated_tokens;
  Family<Histogram>& time_to_first_token;
  Family<Histogram>& decode_step;
  Family<Counter>& generation_cancelled;
  Family<Counter>& gpu_seconds;
  Family<Gauge>& model_load;
};

// One series of a family: added on first use, then the reference
// Family::Add returned. Two threads may both add it first; Family::Add
// returns the same series for the same labels, so both keep the same one.
template <typename T>
class SeriesSlot {
 public:
  // `labels` makes the label set; `args` are the series' constructor
  // arguments (a histogram's bounds).
  template <typename MakeLabels, typename... Args>
  T& Get(Family<T>& family, const MakeLabels& labels, const Args&... args) {
    T* series = series_.load(std::memory_order_acquire);
    if (series == nullptr) {
      series = &family.Add(labels(), args...);
      series_.store(series, std::memory_order_release);
    }
    return *series;
  }

 private:
  std::atomic<T*> series_{nullptr};
};

struct AttentionSeries {
  SeriesSlot<Histogram> mask_density;
  SeriesSlot<Counter> attention_flops;
};

struct TaskSeries {
  std::array<SeriesSlot<Counter>, kCodeCount> requests;
  SeriesSlot<Histogram> request_duration;
  SeriesSlot<Histogram> inference_duration;
  SeriesSlot<Histogram> input_tokens;
  SeriesSlot<Histogram> request_flops;
  SeriesSlot<Counter> flops;
  SeriesSlot<Counter> dense_equivalent_flops;
  SeriesSlot<Counter> budget_unmet;
  std::array<AttentionSeries, kAttentionCount> attention;
  SeriesSlot<Counter> generated_tokens;
  SeriesSlot<Histogram> time_to_first_token;
};

struct ModelSeries {
  std::array<TaskSeries, kTaskCount> tasks;
  SeriesSlot<Histogram> queue_duration;
  SeriesSlot<Histogram> batch_size;
  SeriesSlot<Gauge> queue_depth;
  SeriesSlot<Gauge> inflight;
  std::array<SeriesSlot<Counter>, kDropReasonCount> dropped;
  std::array<SeriesSlot<Counter>, kDropReasonCount> stopped;  // kQueueFull stays unused
  SeriesSlot<Histogram> decode_step;
  std::array<SeriesSlot<Counter>, kGenerationStopCount> generation_stopped;
  SeriesSlot<Counter> gpu_seconds;
};

}  // namespace metrics_internal

std::string_view MetricTaskName(MetricTask task) {
  switch (task) {
    case MetricTask::kEmbed:
      return "embed";
    case MetricTask::kClassify:
      return "classify";
    case MetricTask::kSummarize:
      return "summarize";
    case MetricTask::kSummarizeStream:
      return "summarize_stream";
    case MetricTask::kInfer:
      return "infer";
  }
  return "unknown";
}

std::string_view DropReasonName(DropReason reason) {
  switch (reason) {
    case DropReason::kDeadline:
      return "deadline";
    case DropReason::kCancelled:
      return "cancelled";
    case DropReason::kQueueFull:
      return "queue_full";
  }
  return "unknown";
}

std::string_view GenerationStopName(GenerationStop stop) {
  switch (stop) {
    case GenerationStop::kClientCancelled:
      return "client";
    case GenerationStop::kDeadline:
      return "deadline";
  }
  return "unknown";
}

// ---- ModelMetrics: the hot path ----

namespace {

using metrics_internal::Families;
using metrics_internal::ModelSeries;
using metrics_internal::TaskSeries;

// A counter only goes up: amounts that are not positive (NaN included) are
// not added.
void AddPositive(Counter& counter, double amount) {
  if (amount > 0) counter.Increment(amount);
}

// NaN would land in +Inf and poison the sum: not observed.
void ObserveNumber(Histogram& histogram, double value) {
  if (!std::isnan(value)) histogram.Observe(value);
}

// One model's series by what they count, each added to its family with its
// label set on first use.
class SeriesOf {
  // Declared before the accessors, which use their deduced types.
  static Labels WithLabel(Labels labels, const std::string& name, std::string_view value) {
    labels.emplace(name, std::string(value));
    return labels;
  }
  TaskSeries& Task(MetricTask task) { return series_.tasks[static_cast<size_t>(task)]; }
  Labels ModelLabels() const { return {{"model", model_}}; }
  Labels TaskLabels(MetricTask task) const {
    return WithLabel(ModelLabels(), "task", MetricTaskName(task));
  }
  auto ModelOnly() const {
    return [this] { return ModelLabels(); };
  }
  auto LabelsOf(MetricTask task) const {
    return [this, task] { return TaskLabels(task); };
  }
  auto AttentionLabels(MetricTask task, size_t attention) const {
    return [this, task, attention] {
      return WithLabel(TaskLabels(task), "attention", kAttentionNames[attention]);
    };
  }

  Families& families_;
  const std::string& model_;
  ModelSeries& series_;

 public:
  SeriesOf(Families& families, const std::string& model, ModelSeries& series)
      : families_(families), model_(model), series_(series) {}

  Counter& Requests(MetricTask task, size_t code) {
    return Task(task).requests[code].Get(
        families_.requests, [&] { return WithLabel(TaskLabels(task), "code", CodeNames()[code]); });
  }
  Histogram& RequestDuration(MetricTask task) {
    return Task(task).request_duration.Get(families_.request_duration, LabelsOf(task),
                                           SecondsBuckets());
  }
  Histogram& InferenceDuration(MetricTask task) {
    return Task(task).inference_duration.Get(families_.inference_duration, LabelsOf(task),
                                             SecondsBuckets());
  }
  Histogram& InputTokens(MetricTask task) {
    return Task(task).input_tokens.Get(families_.input_tokens, LabelsOf(task), TokenBuckets());
  }
  Histogram& RequestFlops(MetricTask task) {
    return Task(task).request_flops.Get(families_.request_flops, LabelsOf(task), FlopsBuckets());
  }
  Counter& Flops(MetricTask task) { return Task(task).flops.Get(families_.flops, LabelsOf(task)); }
  Counter& DenseEquivalentFlops(MetricTask task) {
    return Task(task).dense_equivalent_flops.Get(families_.dense_equivalent_flops, LabelsOf(task));
  }
  Counter& BudgetUnmet(MetricTask task) {
    return Task(task).budget_unmet.Get(families_.budget_unmet, LabelsOf(task));
  }
  Histogram& MaskDensity(MetricTask task, size_t attention) {
    return Task(task).attention[attention].mask_density.Get(
        families_.mask_density, AttentionLabels(task, attention), DensityBuckets());
  }
  Counter& AttentionFlops(MetricTask task, size_t attention) {
    return Task(task).attention[attention].attention_flops.Get(families_.attention_flops,
                                                               AttentionLabels(task, attention));
  }
  Counter& GeneratedTokens(MetricTask task) {
    return Task(task).generated_tokens.Get(families_.generated_tokens, LabelsOf(task));
  }
  Histogram& TimeToFirstToken(MetricTask task) {
    return Task(task).time_to_first_token.Get(families_.time_to_first_token, LabelsOf(task),
                                              SecondsBuckets());
  }

  Histogram& QueueDuration() {
    return series_.queue_duration.Get(families_.queue_duration, ModelOnly(), SecondsBuckets());
  }
  Histogram& BatchSize() {
    return series_.batch_size.Get(families_.batch_size, ModelOnly(), BatchBuckets());
  }
  Gauge& QueueDepth() { return series_.queue_depth.Get(families_.queue_depth, ModelOnly()); }
  Gauge& Inflight() { return series_.inflight.Get(families_.inflight, ModelOnly()); }
  Counter& Dropped(DropReason reason) {
    return series_.dropped[static_cast<size_t>(reason)].Get(families_.dropped, [&] {
      return WithLabel(ModelLabels(), "reason", DropReasonName(reason));
    });
  }
  Counter& Stopped(DropReason reason) {
    return series_.stopped[static_cast<size_t>(reason)].Get(families_.stopped, [&] {
      return WithLabel(ModelLabels(), "reason", DropReasonName(reason));
    });
  }
  Histogram& DecodeStep() {
    return series_.decode_step.Get(families_.decode_step, ModelOnly(), StepSecondsBuckets());
  }
  Counter& GpuSeconds() { return series_.gpu_seconds.Get(families_.gpu_seconds, ModelOnly()); }
  Counter& GenerationStopped(GenerationStop stop) {
    return series_.generation_stopped[static_cast<size_t>(stop)].Get(
        families_.generation_cancelled,
        [&] { return WithLabel(ModelLabels(), "reason", GenerationStopName(stop)); });
  }
};

}  // namespace

ModelMetrics::ModelMetrics(metrics_internal::Families& families, std::string model, int attention)
    : families_(families),
      model_(std::move(model)),
      configured_attention_(attention),
      series_(std::make_unique<metrics_internal::ModelSeries>()) {}

ModelMetrics::~ModelMetrics() = default;

void ModelMetrics::AddDefaultSeries() {
  SeriesOf series(families_, model_, *series_);
  const auto configured = static_cast<size_t>(configured_attention_);
  for (MetricTask task : kTasks) {
    series.Requests(task, static_cast<size_t>(grpc::StatusCode::OK));
    series.RequestDuration(task);
    series.InferenceDuration(task);
    series.InputTokens(task);
    series.RequestFlops(task);
    series.Flops(task);
    series.DenseEquivalentFlops(task);
    series.BudgetUnmet(task);
    series.MaskDensity(task, configured);
    series.AttentionFlops(task, configured);
    series.GeneratedTokens(task);
    series.TimeToFirstToken(task);
  }
  series.QueueDuration();
  series.BatchSize();
  series.QueueDepth();
  series.Inflight();
  for (DropReason reason : kDropReasons) series.Dropped(reason);
  for (DropReason reason : {DropReason::kDeadline, DropReason::kCancelled}) series.Stopped(reason);
  series.DecodeStep();
  for (GenerationStop stop : kGenerationStops) series.GenerationStopped(stop);
}

void ModelMetrics::ObserveRequest(const RequestObservation& observation) {
  MarkUsed();
  SeriesOf series(families_, model_, *series_);
  const MetricTask task = observation.task;
  series.Requests(task, CodeIndex(observation.code)).Increment();
  if (observation.request_seconds >= 0) {
    series.RequestDuration(task).Observe(observation.request_seconds);
  }
  if (observation.queue_seconds >= 0) series.QueueDuration().Observe(observation.queue_seconds);
  if (observation.inference_seconds >= 0) {
    series.InferenceDuration(task).Observe(observation.inference_seconds);
  }
  const v1::CostReport* cost = observation.cost;
  if (cost == nullptr || observation.code != grpc::StatusCode::OK) return;
  series.InputTokens(task).Observe(static_cast<double>(cost->input_tokens()));
  const int kind = static_cast<int>(cost->attention());
  const size_t attention = kind >= 1 && kind <= static_cast<int>(kAttentionCount)
                               ? static_cast<size_t>(kind - 1)
                               : static_cast<size_t>(configured_attention_);
  ObserveNumber(series.MaskDensity(task, attention), cost->mean_density());
  AddPositive(series.AttentionFlops(task, attention), cost->attention_flops());
  AddPositive(series.Flops(task), cost->total_flops());
  AddPositive(series.DenseEquivalentFlops(task), cost->dense_equivalent_flops());
  ObserveNumber(series.RequestFlops(task), cost->total_flops());
  if (!cost->budget_met()) series.BudgetUnmet(task).Increment();
  if (cost->generated_tokens() > 0) {
    series.GeneratedTokens(task).Increment(static_cast<double>(cost->generated_tokens()));
    ObserveNumber(series.TimeToFirstToken(task), cost->timings().time_to_first_token_ms() / 1e3);
  }
}

void ModelMetrics::ObserveBatch(int size) {
  SeriesOf(families_, model_, *series_).BatchSize().Observe(static_cast<double>(size));
}

void ModelMetrics::SetQueueDepth(int64_t depth) {
  SeriesOf(families_, model_, *series_).QueueDepth().Set(static_cast<double>(depth));
}

void ModelMetrics::AddInflight(int delta) {
  MarkUsed();
  SeriesOf(families_, model_, *series_).Inflight().Increment(delta);
}

void ModelMetrics::CountDropped(DropReason reason) {
  SeriesOf(families_, model_, *series_).Dropped(reason).Increment();
}

void ModelMetrics::CountStopped(DropReason reason) {
  SeriesOf(families_, model_, *series_).Stopped(reason).Increment();
}

void ModelMetrics::ObserveDecodeStep(double seconds) {
  ObserveNumber(SeriesOf(families_, model_, *series_).DecodeStep(), seconds);
}

void ModelMetrics::ObserveDeviceSeconds(double seconds) {
  AddPositive(SeriesOf(families_, model_, *series_).GpuSeconds(), seconds);
}

void ModelMetrics::CountGenerationStopped(GenerationStop stop) {
  SeriesOf(families_, model_, *series_).GenerationStopped(stop).Increment();
}

// ---- Metrics ----

namespace {

// The label cache families, read from their sources at this scrape.
std::vector<prometheus::MetricFamily> LabelCacheFamilies(
    const std::map<std::string, std::function<LabelCacheReading()>>& sources) {
  std::vector<std::pair<std::string, LabelCacheReading>> readings;
  for (const auto& [model, read] : sources) readings.emplace_back(model, read());
  const auto family = [&](std::string name, std::string help, prometheus::MetricType type,
                          uint64_t LabelCacheReading::*field) {
    prometheus::MetricFamily result{std::move(name), std::move(help), type, {}};
    for (const auto& [model, reading] : readings) {
      prometheus::ClientMetric metric;
      metric.label.push_back({"model", model});
      const double value = static_cast<double>(reading.*field);
      if (type == prometheus::MetricType::Counter) {
        metric.counter.value = value;
      } else {
        metric.gauge.value = value;
      }
      result.metric.push_back(std::move(metric));
    }
    return result;
  };
  return {
      family("docsparse_label_cache_hits_total",
             "Zero-shot labels whose embedding was found in the model's cache.",
             prometheus::MetricType::Counter, &LabelCacheReading::hits),
      family("docsparse_label_cache_misses_total",
             "Zero-shot labels embedded because the model's cache did not hold them.",
             prometheus::MetricType::Counter, &LabelCacheReading::misses),
      family("docsparse_label_cache_evictions_total",
             "Label embeddings evicted, least recently used first, to keep the cache in its size.",
             prometheus::MetricType::Counter, &LabelCacheReading::evictions),
      family("docsparse_label_cache_bytes",
             "Bytes the model's label embedding cache holds (--label_cache_bytes caps it).",
             prometheus::MetricType::Gauge, &LabelCacheReading::bytes),
  };
}

// A family of one gauge read at this scrape, with `labels`.
prometheus::MetricFamily OneGauge(std::string name, std::string help, double value,
                                  std::vector<prometheus::ClientMetric::Label> labels = {}) {
  prometheus::ClientMetric metric;
  metric.label = std::move(labels);
  metric.gauge.value = value;
  return prometheus::MetricFamily{
      std::move(name), std::move(help), prometheus::MetricType::Gauge, {std::move(metric)}};
}

// The process's memory at this scrape (server/process_memory.h says why
// RSS alone is not enough).
std::vector<prometheus::MetricFamily> MemoryFamilies(const ProcessMemory& memory) {
  const auto gauge = [](std::string name, std::string help, int64_t value) {
    return OneGauge(std::move(name), std::move(help), static_cast<double>(value));
  };
  return {
      gauge("process_resident_memory_bytes", "Resident memory size in bytes.",
            memory.resident_bytes),
      gauge("docsparse_heap_in_use_bytes",
            "Bytes allocated on the heap and not freed (glibc mallinfo2); falls back when "
            "requests end, unlike the resident size.",
            memory.heap_in_use_bytes),
      gauge("docsparse_heap_free_bytes",
            "Bytes freed and kept on the heap for reuse (the server does not trim its heap).",
            memory.heap_free_bytes),
  };
}

// The GPU's memory and utilisation at this scrape.
std::vector<prometheus::MetricFamily> DeviceFamilies(const std::string& device,
                                                     const DeviceReading& memory) {
  const auto gauge = [&device](std::string name, std::string help, double value) {
    return OneGauge(std::move(name), std::move(help), value, {{"device", device}});
  };
  std::vector<prometheus::MetricFamily> families = {
      gauge("docsparse_gpu_memory_allocated_bytes", "GPU memory held by live tensors.",
            static_cast<double>(memory.allocated_bytes)),
      gauge("docsparse_gpu_memory_reserved_bytes",
            "GPU memory held by LibTorch's caching allocator (allocated plus cached blocks).",
            static_cast<double>(memory.reserved_bytes)),
      gauge("docsparse_gpu_memory_total_bytes", "The GPU's memory.",
            static_cast<double>(memory.total_bytes)),
  };
  if (memory.utilization >= 0) {
    families.push_back(gauge("docsparse_gpu_utilization_ratio",
                             "Fraction of the driver's last sample period (1/6 s to 1 s) in which "
                             "a kernel ran on the GPU, from any process (NVML).",
                             memory.utilization));
  }
  return families;
}

}  // namespace

Metrics::Metrics(std::string version)
    : registry_(std::make_unique<prometheus::Registry>()),
      families_(std::make_unique<metrics_internal::Families>(*registry_)) {
  families_->build_info.Add({{"version", std::move(version)}}).Set(1);
  MutexLock lock(&mu_);
  auto unknown = std::unique_ptr<ModelMetrics>(new ModelMetrics(*families_, "unknown", 0));
  unknown_ = unknown.get();
  models_.emplace("unknown", std::move(unknown));
}

Metrics::~Metrics() = default;

ModelMetrics& Metrics::RegisterModel(const std::string& model, std::string_view attention,
                                     double load_seconds) {
  MutexLock lock(&mu_);
  std::unique_ptr<ModelMetrics>& slot = models_[model];
  if (slot == nullptr) {
    slot.reset(new ModelMetrics(*families_, model, AttentionIndex(attention)));
  }
  families_->model_load.Add({{"model", model}}).Set(load_seconds);
  slot->registered_.store(true, std::memory_order_relaxed);
  slot->MarkUsed();
  return *slot;
}

void Metrics::SetModelCompute(const std::string& model, std::string_view precision,
                              std::string_view isa) {
  MutexLock lock(&mu_);
  prometheus::Gauge*& series = compute_info_[model];
  if (series != nullptr) families_->compute_info.Remove(series);
  series = &families_->compute_info.Add(
      {{"model", model}, {"precision", std::string(precision)}, {"isa", std::string(isa)}});
  series->Set(1);
}

void Metrics::SetLabelCacheSource(const std::string& model,
                                  std::function<LabelCacheReading()> read) {
  MutexLock lock(&mu_);
  label_caches_[model] = std::move(read);
}

void Metrics::SetDeviceSource(const std::string& device, std::function<DeviceReading()> read) {
  MutexLock lock(&mu_);
  device_ = device;
  device_reading_ = std::move(read);
}

ModelMetrics* Metrics::Find(std::string_view model) const {
  MutexLock lock(&mu_);
  const auto it = models_.find(model);
  if (it == models_.end() || !it->second->registered_.load(std::memory_order_relaxed)) {
    return nullptr;
  }
  return it->second.get();
}

std::string Metrics::Render() const {
  std::vector<prometheus::MetricFamily> families = registry_->Collect();
  for (prometheus::MetricFamily& family : MemoryFamilies(ReadProcessMemory())) {
    families.push_back(std::move(family));
  }
  MutexLock lock(&mu_);
  if (device_reading_) {
    for (prometheus::MetricFamily& family : DeviceFamilies(device_, device_reading_())) {
      families.push_back(std::move(family));
    }
  }
  if (!label_caches_.empty()) {
    for (prometheus::MetricFamily& family : LabelCacheFamilies(label_caches_)) {
      families.push_back(std::move(family));
    }
  }
  return prometheus::TextSerializer().Serialize(families);
}

}  // namespace docsparse
