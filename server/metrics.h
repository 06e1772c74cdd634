// The server's Prometheus metrics (histograms, not summaries), the families
// of DESIGN.md "Serving" with the prefix docsparse_, on prometheus-cpp: one
// prometheus::Registry, its families, and its text serializer for /metrics.
//
// Label sets are resolved once per model, as in Triton: RegisterModel() makes
// a ModelMetrics handle that keeps the references Family::Add returned in
// fixed arrays, and the request path indexes them by task, status code and
// attention kind: after a series' first use, no lookup by label strings and
// no registry lock. Nothing here is global: the server owns one Metrics and
// hands the handles to whoever serves a model.
//
// A registered model's series exist from registration on (zeros), so every
// family has samples from the first scrape: per task, requests_total with
// code="OK", the histograms and counters, and mask_density /
// attention_flops_total for the model's configured attention. Series for
// other codes and attention kinds appear with their first observation.
#ifndef DOCSPARSE_SERVER_METRICS_H_
#define DOCSPARSE_SERVER_METRICS_H_

#include <grpcpp/support/status_code_enum.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "common/mutex.h"
#include "docsparse/v1/docsparse.pb.h"
#include "server/drop_reason.h"

namespace prometheus {
class Gauge;
class Registry;
}  // namespace prometheus

namespace docsparse {

// The "task" label. kInfer is KServe's ModelInfer.
enum class MetricTask { kEmbed, kClassify, kSummarize, kSummarizeStream, kInfer };
std::string_view MetricTaskName(MetricTask task);    // "embed", ..., "infer"
std::string_view DropReasonName(DropReason reason);  // "deadline", "cancelled", "queue_full"

// Why decoding stopped before a request's summary was finished (the
// "reason" label of generation_cancelled_total).
enum class GenerationStop { kClientCancelled, kDeadline };
std::string_view GenerationStopName(GenerationStop stop);  // "client", "deadline"

// One finished request (answered with any status).
struct RequestObservation {
  // A duration below zero was not measured and is not observed, e.g. the
  // queue and inference time of a request refused before it was queued.
  static constexpr double kNotMeasured = -1;

  MetricTask task = MetricTask::kEmbed;
  grpc::StatusCode code = grpc::StatusCode::OK;
  double request_seconds = kNotMeasured;    // arrival to response
  double queue_seconds = kNotMeasured;      // arrival to start of work
  double inference_seconds = kNotMeasured;  // start of work to response
  // The response's cost report; read only when `code` is OK, may be null.
  // Gives input_tokens, mask_density (by cost->attention(); UNSPECIFIED means
  // the model's configured attention), the FLOP counters, request_flops and
  // budget_unmet_total (when !cost->budget_met()); for abstractive summaries
  // (cost->generated_tokens() > 0) also generated_tokens_total and
  // time_to_first_token_seconds.
  const v1::CostReport* cost = nullptr;
};

namespace metrics_internal {
struct Families;     // metrics.cc: the registry's families
struct ModelSeries;  // metrics.cc: one model's series, resolved on first use
}  // namespace metrics_internal

// Every series of one model. Thread-safe: any thread may call any method at
// any time. A series' first use adds it to its family (under the family's
// lock); later uses touch only the series (counters and gauges are atomics,
// a histogram takes its own short lock). Made and owned by Metrics;
// references stay valid for the Metrics' lifetime.
class ModelMetrics {
 public:
  ModelMetrics(const ModelMetrics&) = delete;
  ModelMetrics& operator=(const ModelMetrics&) = delete;
  ~ModelMetrics();

  // requests_total, request_duration_seconds, queue_duration_seconds,
  // inference_duration_seconds and, for OK requests with a cost report, the
  // cost families.
  void ObserveRequest(const RequestObservation& observation);
  // batch_size: one batch of `size` requests ran.
  void ObserveBatch(int size);
  // queue_depth: requests of this model waiting for compute now.
  void SetQueueDepth(int64_t depth);
  // inflight_requests: +1 when a request arrives, -1 when it is answered.
  void AddInflight(int delta);
  // dropped_requests_total. The request is still counted by ObserveRequest
  // with the status it was answered with.
  void CountDropped(DropReason reason);
  // stopped_requests_total: a request's encoder work stopped between layers
  // because nobody waited for it any more (kDeadline or kCancelled). It is
  // also counted by ObserveRequest with the status it was answered with.
  void CountStopped(DropReason reason);
  // decode_step_seconds: one decoder step over all rows decoding together.
  void ObserveDecodeStep(double seconds);
  // gpu_seconds_total: one batch's time on the GPU (a GPU server only: the
  // series appears at the first batch).
  void ObserveDeviceSeconds(double seconds);
  // generation_cancelled_total: a request's decoding stopped early (it is
  // also counted by ObserveRequest with the status it was answered with).
  void CountGenerationStopped(GenerationStop stop);

  const std::string& model() const { return model_; }

 private:
  friend class Metrics;

  // `attention`: index of the configured attention kind (see metrics.cc).
  ModelMetrics(metrics_internal::Families& families, std::string model, int attention);

  // Adds the series a registered model shows from the start. The unknown
  // model's show once it is first used.
  void AddDefaultSeries();
  void MarkUsed() {
    if (!used_.load(std::memory_order_relaxed) && !used_.exchange(true)) AddDefaultSeries();
  }

  metrics_internal::Families& families_;
  const std::string model_;
  const int configured_attention_;
  std::atomic<bool> registered_{false};  // by RegisterModel; "unknown" never is
  std::atomic<bool> used_{false};
  const std::unique_ptr<metrics_internal::ModelSeries> series_;
};

// A model's zero-shot label cache as the metrics read it at each scrape.
struct LabelCacheReading {
  uint64_t hits = 0;
  uint64_t misses = 0;
  uint64_t evictions = 0;
  uint64_t bytes = 0;
};

// The GPU the models run on, as the metrics read it at each scrape.
struct DeviceReading {
  int64_t allocated_bytes = 0;  // held by live tensors
  int64_t reserved_bytes = 0;   // held by LibTorch's caching allocator
  int64_t total_bytes = 0;      // the device's memory
  // Fraction of the driver's last sample period with a kernel running (NVML),
  // or below zero when unknown (no series then).
  double utilization = -1;
};

// The whole exposition: every model's series plus build_info.
// Thread-safe; RegisterModel and Render take a mutex, handles do not.
class Metrics {
 public:
  // `version` is build_info's label.
  explicit Metrics(std::string version);
  ~Metrics();

  // Creates `model`'s series; call once per model at load. `attention` is the
  // model's configured attention ("dense", "lsg", "sbm", ...; an unknown name
  // counts as "dense") and only decides which attention series show before
  // the first observation. Registering a name again updates its load time and
  // returns the same handle.
  ModelMetrics& RegisterModel(const std::string& model, std::string_view attention,
                              double load_seconds) ABSL_LOCKS_EXCLUDED(mu_);
  // docsparse_model_compute_info{model, precision, isa} 1: what the model's
  // linear layers run in ("fp32", "bf16", "int8", "fp16") on which
  // instruction set ("amx", "avx512", "avx2", ..., "cuda"). Setting it again
  // replaces it.
  void SetModelCompute(const std::string& model, std::string_view precision, std::string_view isa)
      ABSL_LOCKS_EXCLUDED(mu_);

  // label_cache_hits_total, label_cache_misses_total,
  // label_cache_evictions_total and label_cache_bytes{model}: `read` is
  // called at every scrape (from the scraping thread; it must be
  // thread-safe and outlive the Metrics). Setting it again replaces it.
  void SetLabelCacheSource(const std::string& model, std::function<LabelCacheReading()> read)
      ABSL_LOCKS_EXCLUDED(mu_);

  // docsparse_gpu_memory_{allocated,reserved,total}_bytes{device} and
  // docsparse_gpu_utilization_ratio{device}: `read` is called at every
  // scrape, as for SetLabelCacheSource. Unset on a CPU server: no GPU series.
  void SetDeviceSource(const std::string& device, std::function<DeviceReading()> read)
      ABSL_LOCKS_EXCLUDED(mu_);

  // The handle for requests naming no loaded model (label model="unknown");
  // its series are rendered once something was observed on it.
  ModelMetrics& Unknown() { return *unknown_; }

  // The registered model's handle, or null. For wiring at start-up, not for
  // the request path.
  ModelMetrics* Find(std::string_view model) const ABSL_LOCKS_EXCLUDED(mu_);

  // The exposition in the text format 0.0.4, by prometheus-cpp's
  // TextSerializer; serve as "text/plain; version=0.0.4; charset=utf-8".
  std::string Render() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Declared first: the families outlive every handle that refers to them.
  const std::unique_ptr<prometheus::Registry> registry_;
  const std::unique_ptr<metrics_internal::Families> families_;
  mutable Mutex mu_;
  std::map<std::string, std::unique_ptr<ModelMetrics>, std::less<>> models_ ABSL_GUARDED_BY(mu_);
  ModelMetrics* unknown_;  // owned by models_ under "unknown"
  // model -> its model_compute_info series, removed when replaced
  std::map<std::string, prometheus::Gauge*> compute_info_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::function<LabelCacheReading()>> label_caches_ ABSL_GUARDED_BY(mu_);
  std::string device_ ABSL_GUARDED_BY(mu_);
  std::function<DeviceReading()> device_reading_ ABSL_GUARDED_BY(mu_);
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_METRICS_H_
