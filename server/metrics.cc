#include "server/metrics.h"

#include <array>
#include <cstddef>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "server/metric_series.h"

namespace docsparse {

// Bucket upper bounds. Latencies: 1 ms doubling to 131 s.
inline constexpr double kSecondsBuckets[] = {0.001, 0.002, 0.004,  0.008,  0.016,  0.032,
                                             0.064, 0.128, 0.256,  0.512,  1.024,  2.048,
                                             4.096, 8.192, 16.384, 32.768, 65.536, 131.072};
// Decoder steps: 50 µs doubling to 3.3 s (a step over one row of a small
// model on a CPU is well under a millisecond).
inline constexpr double kStepSecondsBuckets[] = {0.00005, 0.0001, 0.0002, 0.0004, 0.0008, 0.0016,
                                                 0.0032,  0.0064, 0.0128, 0.0256, 0.0512, 0.1024,
                                                 0.2048,  0.4096, 0.8192, 1.6384, 3.2768};
inline constexpr double kTokenBuckets[] = {16,   32,   64,   128,   256,   512,   1024,
                                           2048, 4096, 8192, 16384, 32768, 65536, 131072};
inline constexpr double kBatchBuckets[] = {1, 2, 4, 8, 16, 32, 64, 128, 256};
inline constexpr double kDensityBuckets[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05,
                                             0.1,   0.25,   0.5,   0.75, 1};
// Two steps a decade, 1 MFLOP to 100 TFLOP.
inline constexpr double kFlopsBuckets[] = {1e6,  3e6,  1e7,  3e7,  1e8,  3e8,  1e9,  3e9, 1e10,
                                           3e10, 1e11, 3e11, 1e12, 3e12, 1e13, 3e13, 1e14};

namespace {

constexpr size_t kTaskCount = 5;
constexpr size_t kCodeCount = 17;  // grpc::StatusCode OK (0) .. UNAUTHENTICATED (16)
constexpr size_t kDropReasonCount = 3;
constexpr size_t kGenerationStopCount = 2;
// v1::AttentionKind without UNSPECIFIED: index = kind - 1.
constexpr std::array<std::string_view, 9> kAttentionNames = {
    "dense", "lsg", "sbm", "longformer", "bigbird", "sparse_transformer", "star", "lsh", "routing"};
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

struct AttentionSeries {
  Histogram<kDensityBuckets> mask_density;
  FloatCounter attention_flops;
};

struct TaskSeries {
  std::array<Counter, kCodeCount> requests;
  Histogram<kSecondsBuckets> request_duration;
  Histogram<kSecondsBuckets> inference_duration;
  Histogram<kTokenBuckets> input_tokens;
  Histogram<kFlopsBuckets> request_flops;
  FloatCounter flops;
  FloatCounter dense_equivalent_flops;
  Counter budget_unmet;
  std::array<AttentionSeries, kAttentionCount> attention;
  Counter generated_tokens;
  Histogram<kSecondsBuckets> time_to_first_token;
};

struct ModelSeries {
  std::array<TaskSeries, kTaskCount> tasks;
  Histogram<kSecondsBuckets> queue_duration;
  Histogram<kBatchBuckets> batch_size;
  Gauge queue_depth;
  Gauge inflight;
  std::array<Counter, kDropReasonCount> dropped;
  std::array<Counter, kDropReasonCount> stopped;  // kQueueFull stays 0
  Histogram<kStepSecondsBuckets> decode_step;
  std::array<Counter, kGenerationStopCount> generation_stopped;
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

ModelMetrics::ModelMetrics(std::string model, int attention)
    : model_(std::move(model)),
      model_label_(Label("model", model_)),
      configured_attention_(attention),
      series_(std::make_unique<metrics_internal::ModelSeries>()) {}

ModelMetrics::~ModelMetrics() = default;

void ModelMetrics::ObserveRequest(const RequestObservation& observation) {
  if (!used_.load(std::memory_order_relaxed)) used_.store(true, std::memory_order_relaxed);
  metrics_internal::TaskSeries& task = series_->tasks[static_cast<size_t>(observation.task)];
  task.requests[CodeIndex(observation.code)].Increment();
  if (observation.request_seconds >= 0) task.request_duration.Observe(observation.request_seconds);
  if (observation.queue_seconds >= 0) series_->queue_duration.Observe(observation.queue_seconds);
  if (observation.inference_seconds >= 0) {
    task.inference_duration.Observe(observation.inference_seconds);
  }
  const v1::CostReport* cost = observation.cost;
  if (cost == nullptr || observation.code != grpc::StatusCode::OK) return;
  task.input_tokens.Observe(static_cast<double>(cost->input_tokens()));
  const int kind = static_cast<int>(cost->attention());
  const size_t attention = kind >= 1 && kind <= static_cast<int>(kAttentionCount)
                               ? static_cast<size_t>(kind - 1)
                               : static_cast<size_t>(configured_attention_);
  task.attention[attention].mask_density.Observe(cost->mean_density());
  task.attention[attention].attention_flops.Add(cost->attention_flops());
  task.flops.Add(cost->total_flops());
  task.dense_equivalent_flops.Add(cost->dense_equivalent_flops());
  task.request_flops.Observe(cost->total_flops());
  if (!cost->budget_met()) task.budget_unmet.Increment();
  if (cost->generated_tokens() > 0) {
    task.generated_tokens.Increment(static_cast<uint64_t>(cost->generated_tokens()));
    task.time_to_first_token.Observe(cost->timings().time_to_first_token_ms() / 1e3);
  }
}

void ModelMetrics::ObserveBatch(int size) {
  series_->batch_size.Observe(static_cast<double>(size));
}

void ModelMetrics::SetQueueDepth(int64_t depth) { series_->queue_depth.Set(depth); }

void ModelMetrics::AddInflight(int delta) {
  if (!used_.load(std::memory_order_relaxed)) used_.store(true, std::memory_order_relaxed);
  series_->inflight.Add(delta);
}

void ModelMetrics::CountDropped(DropReason reason) {
  series_->dropped[static_cast<size_t>(reason)].Increment();
}

void ModelMetrics::CountStopped(DropReason reason) {
  series_->stopped[static_cast<size_t>(reason)].Increment();
}

void ModelMetrics::ObserveDecodeStep(double seconds) { series_->decode_step.Observe(seconds); }

void ModelMetrics::CountGenerationStopped(GenerationStop stop) {
  series_->generation_stopped[static_cast<size_t>(stop)].Increment();
}

// ---- Rendering ----

namespace {

using metrics_internal::ModelSeries;
using metrics_internal::TaskSeries;

enum class Family {
  kRequests,
  kRequestDuration,
  kQueueDuration,
  kInferenceDuration,
  kInputTokens,
  kBatchSize,
  kQueueDepth,
  kInflight,
  kMaskDensity,
  kAttentionFlops,
  kFlops,
  kDenseEquivalentFlops,
  kRequestFlops,
  kBudgetUnmet,
  kDropped,
  kStopped,
  kGeneratedTokens,
  kTimeToFirstToken,
  kDecodeStep,
  kGenerationCancelled,
  kModelLoad,
};

struct FamilyInfo {
  Family family;
  std::string_view name;
  std::string_view type;
  std::string_view help;
};

constexpr FamilyInfo kFamilies[] = {
    {Family::kRequests, "docsparse_requests_total", "counter",
     "Answered requests by model, task and gRPC status code."},
    {Family::kRequestDuration, "docsparse_request_duration_seconds", "histogram",
     "Time from a request's arrival to its response."},
    {Family::kQueueDuration, "docsparse_queue_duration_seconds", "histogram",
     "Time requests waited for compute."},
    {Family::kInferenceDuration, "docsparse_inference_duration_seconds", "histogram",
     "Time from the start of a request's work to its response."},
    {Family::kInputTokens, "docsparse_input_tokens", "histogram",
     "Document tokens per answered request, special tokens and all windows included."},
    {Family::kBatchSize, "docsparse_batch_size", "histogram", "Requests per batch run."},
    {Family::kQueueDepth, "docsparse_queue_depth", "gauge", "Requests waiting for compute."},
    {Family::kInflight, "docsparse_inflight_requests", "gauge",
     "Requests received and not yet answered."},
    {Family::kMaskDensity, "docsparse_mask_density", "histogram",
     "Realised attention density (mean over layers and heads) per answered request."},
    {Family::kAttentionFlops, "docsparse_attention_flops_total", "counter",
     "Attention FLOPs computed, planner overhead included."},
    {Family::kFlops, "docsparse_flops_total", "counter", "Forward-pass FLOPs computed."},
    {Family::kDenseEquivalentFlops, "docsparse_dense_equivalent_flops_total", "counter",
     "FLOPs the same requests would have cost under dense attention."},
    {Family::kRequestFlops, "docsparse_request_flops", "histogram",
     "Forward-pass FLOPs per answered request."},
    {Family::kBudgetUnmet, "docsparse_budget_unmet_total", "counter",
     "Answered requests whose sparsity budget was not met."},
    {Family::kDropped, "docsparse_dropped_requests_total", "counter",
     "Requests answered without running the model: deadline passed, client cancelled, or "
     "queue full."},
    {Family::kStopped, "docsparse_stopped_requests_total", "counter",
     "Requests whose encoder work stopped between layers because nobody waited any more: "
     "deadline passed or client cancelled."},
    {Family::kGeneratedTokens, "docsparse_generated_tokens_total", "counter",
     "Tokens generated for answered abstractive summaries."},
    {Family::kTimeToFirstToken, "docsparse_time_to_first_token_seconds", "histogram",
     "Time from an abstractive summary request's arrival to its first generated token."},
    {Family::kDecodeStep, "docsparse_decode_step_seconds", "histogram",
     "Time of one decoder step over all the sequences decoding together."},
    {Family::kGenerationCancelled, "docsparse_generation_cancelled_total", "counter",
     "Requests whose decoding stopped early: the client cancelled or the deadline passed."},
    {Family::kModelLoad, "docsparse_model_load_seconds", "gauge",
     "Time it took to load the model."},
};

std::string TaskLabels(const std::string& model_label, MetricTask task) {
  return LabelList({model_label, Label("task", MetricTaskName(task))});
}

// The samples of `family` for one model. `configured` is the index of the
// model's configured attention kind.
void AppendModelFamily(Family family, std::string_view name, const std::string& model_label,
                       size_t configured, double load_seconds, const ModelSeries& series,
                       std::string* out) {
  const auto for_each_task = [&](auto append) {
    for (MetricTask task : kTasks) {
      append(TaskLabels(model_label, task), series.tasks[static_cast<size_t>(task)]);
    }
  };
  switch (family) {
    case Family::kRequests:
      return for_each_task([&](const std::string& labels, const TaskSeries& task) {
        for (size_t code = 0; code < kCodeCount; ++code) {
          const uint64_t count = task.requests[code].value();
          if (code != 0 && count == 0) continue;
          AppendSample(name, LabelList({labels, Label("code", CodeNames()[code])}), count, out);
        }
      });
    case Family::kRequestDuration:
      return for_each_task([&](const std::string& labels, const TaskSeries& task) {
        AppendHistogram(name, labels, task.request_duration.Read(), out);
      });
    case Family::kQueueDuration:
      return AppendHistogram(name, model_label, series.queue_duration.Read(), out);
    case Family::kInferenceDuration:
      return for_each_task([&](const std::string& labels, const TaskSeries& task) {
        AppendHistogram(name, labels, task.inference_duration.Read(), out);
      });
    case Family::kInputTokens:
      return for_each_task([&](const std::string& labels, const TaskSeries& task) {
        AppendHistogram(name, labels, task.input_tokens.Read(), out);
      });
    case Family::kBatchSize:
      return AppendHistogram(name, model_label, series.batch_size.Read(), out);
    case Family::kQueueDepth:
      return AppendSample(name, model_label, series.queue_depth.value(), out);
    case Family::kInflight:
      return AppendSample(name, model_label, series.inflight.value(), out);
    case Family::kMaskDensity:
      return for_each_task([&](const std::string& labels, const TaskSeries& task) {
        for (size_t kind = 0; kind < kAttentionCount; ++kind) {
          const auto& histogram = task.attention[kind].mask_density;
          if (kind != configured && histogram.count() == 0) continue;
          AppendHistogram(name, LabelList({labels, Label("attention", kAttentionNames[kind])}),
                          histogram.Read(), out);
        }
      });
    case Family::kAttentionFlops:
      return for_each_task([&](const std::string& labels, const TaskSeries& task) {
        for (size_t kind = 0; kind < kAttentionCount; ++kind) {
          const auto& attention = task.attention[kind];
          // Shown with the density histogram, so the two families agree.
          if (kind != configured && attention.mask_density.count() == 0) continue;
          AppendSample(name, LabelList({labels, Label("attention", kAttentionNames[kind])}),
                       attention.attention_flops.value(), out);
        }
      });
    case Family::kFlops:
      return for_each_task([&](const std::string& labels, const TaskSeries& task) {
        AppendSample(name, labels, task.flops.value(), out);
      });
    case Family::kDenseEquivalentFlops:
      return for_each_task([&](const std::string& labels, const TaskSeries& task) {
        AppendSample(name, labels, task.dense_equivalent_flops.value(), out);
      });
    case Family::kRequestFlops:
      return for_each_task([&](const std::string& labels, const TaskSeries& task) {
        AppendHistogram(name, labels, task.request_flops.Read(), out);
      });
    case Family::kBudgetUnmet:
      return for_each_task([&](const std::string& labels, const TaskSeries& task) {
        AppendSample(name, labels, task.budget_unmet.value(), out);
      });
    case Family::kDropped:
      for (DropReason reason : kDropReasons) {
        AppendSample(name, LabelList({model_label, Label("reason", DropReasonName(reason))}),
                     series.dropped[static_cast<size_t>(reason)].value(), out);
      }
      return;
    case Family::kStopped:
      for (DropReason reason : {DropReason::kDeadline, DropReason::kCancelled}) {
        AppendSample(name, LabelList({model_label, Label("reason", DropReasonName(reason))}),
                     series.stopped[static_cast<size_t>(reason)].value(), out);
      }
      return;
    case Family::kGeneratedTokens:
      return for_each_task([&](const std::string& labels, const TaskSeries& task) {
        AppendSample(name, labels, task.generated_tokens.value(), out);
      });
    case Family::kTimeToFirstToken:
      return for_each_task([&](const std::string& labels, const TaskSeries& task) {
        AppendHistogram(name, labels, task.time_to_first_token.Read(), out);
      });
    case Family::kDecodeStep:
      return AppendHistogram(name, model_label, series.decode_step.Read(), out);
    case Family::kGenerationCancelled:
      for (GenerationStop stop : kGenerationStops) {
        AppendSample(name, LabelList({model_label, Label("reason", GenerationStopName(stop))}),
                     series.generation_stopped[static_cast<size_t>(stop)].value(), out);
      }
      return;
    case Family::kModelLoad:
      return AppendSample(name, model_label, load_seconds, out);
  }
}

}  // namespace

// ---- Metrics ----

Metrics::Metrics(std::string version) : version_(std::move(version)) {
  absl::MutexLock lock(&mu_);
  auto unknown = std::unique_ptr<ModelMetrics>(new ModelMetrics("unknown", 0));
  unknown_ = unknown.get();
  models_.emplace("unknown", std::move(unknown));
}

Metrics::~Metrics() = default;

ModelMetrics& Metrics::RegisterModel(const std::string& model, std::string_view attention,
                                     double load_seconds) {
  absl::MutexLock lock(&mu_);
  std::unique_ptr<ModelMetrics>& slot = models_[model];
  if (slot == nullptr) slot.reset(new ModelMetrics(model, AttentionIndex(attention)));
  slot->load_seconds_.store(load_seconds, std::memory_order_relaxed);
  slot->registered_.store(true, std::memory_order_relaxed);
  return *slot;
}

void Metrics::SetModelCompute(const std::string& model, std::string_view precision,
                              std::string_view isa) {
  absl::MutexLock lock(&mu_);
  compute_labels_[model] =
      LabelList({Label("model", model), Label("precision", precision), Label("isa", isa)});
}

void Metrics::SetLabelCacheSource(const std::string& model,
                                  std::function<LabelCacheReading()> read) {
  absl::MutexLock lock(&mu_);
  label_caches_[model] = std::move(read);
}

ModelMetrics* Metrics::Find(std::string_view model) const {
  absl::MutexLock lock(&mu_);
  const auto it = models_.find(model);
  if (it == models_.end() || !it->second->registered_.load(std::memory_order_relaxed)) {
    return nullptr;
  }
  return it->second.get();
}

std::string Metrics::Render() const {
  std::string out;
  AppendFamilyHeader("docsparse_build_info", "gauge",
                     "Build of the running server; the value is always 1.", &out);
  AppendSample("docsparse_build_info", Label("version", version_), uint64_t{1}, &out);

  absl::MutexLock lock(&mu_);
  if (!compute_labels_.empty()) {
    AppendFamilyHeader("docsparse_model_compute_info", "gauge",
                       "Precision and instruction set of each model's linear layers; always 1.",
                       &out);
    for (const auto& [model, labels] : compute_labels_) {
      AppendSample("docsparse_model_compute_info", labels, uint64_t{1}, &out);
    }
  }
  if (!label_caches_.empty()) {
    std::vector<std::pair<std::string, LabelCacheReading>> readings;
    for (const auto& [model, read] : label_caches_) {
      readings.emplace_back(Label("model", model), read());
    }
    const auto family = [&](std::string_view name, std::string_view type, std::string_view help,
                            uint64_t LabelCacheReading::*field) {
      AppendFamilyHeader(name, type, help, &out);
      for (const auto& [labels, reading] : readings) {
        AppendSample(name, labels, reading.*field, &out);
      }
    };
    family("docsparse_label_cache_hits_total", "counter",
           "Zero-shot labels whose embedding was found in the model's cache.",
           &LabelCacheReading::hits);
    family("docsparse_label_cache_misses_total", "counter",
           "Zero-shot labels embedded because the model's cache did not hold them.",
           &LabelCacheReading::misses);
    family("docsparse_label_cache_evictions_total", "counter",
           "Label embeddings evicted, least recently used first, to keep the cache in its size.",
           &LabelCacheReading::evictions);
    family("docsparse_label_cache_bytes", "gauge",
           "Bytes the model's label embedding cache holds (--label_cache_bytes caps it).",
           &LabelCacheReading::bytes);
  }
  // Families are contiguous in the format: families outside, models inside.
  for (const FamilyInfo& family : kFamilies) {
    AppendFamilyHeader(family.name, family.type, family.help, &out);
    for (const auto& [name, model] : models_) {
      const bool registered = model->registered_.load(std::memory_order_relaxed);
      if (!registered && !model->used_.load(std::memory_order_relaxed)) continue;
      // A model that never loaded has no load time.
      if (family.family == Family::kModelLoad && !registered) continue;
      AppendModelFamily(family.family, family.name, model->model_label_,
                        static_cast<size_t>(model->configured_attention_),
                        model->load_seconds_.load(std::memory_order_relaxed), *model->series_,
                        &out);
    }
  }
  return out;
}

}  // namespace docsparse
