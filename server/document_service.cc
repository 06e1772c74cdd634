#include "server/document_service.h"

#include <chrono>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "server/grpc_status.h"

namespace docsparse {
namespace {

using Seconds = std::chrono::duration<double>;

// The client's deadline on the batcher's clock (max when there is none).
BatchClock::time_point SteadyDeadline(std::chrono::system_clock::time_point deadline) {
  const auto now = std::chrono::system_clock::now();
  if (deadline >= now + std::chrono::hours(24 * 365)) return BatchClock::time_point::max();
  return BatchClock::now() + std::chrono::duration_cast<BatchClock::duration>(deadline - now);
}

// Records one request's metrics: in flight from construction to Finish().
class RequestRecorder {
 public:
  RequestRecorder(ModelMetrics& metrics, MetricTask task)
      : metrics_(&metrics), task_(task), received_(BatchClock::now()) {
    metrics_->AddInflight(1);
  }

  BatchClock::time_point received() const { return received_; }

  // Once, as the request is answered. `cost` is read only when OK.
  void Finish(const grpc::Status& status, const v1::CostReport* cost) const {
    RequestObservation observation;
    observation.task = task_;
    observation.code = status.error_code();
    observation.request_seconds = Seconds(BatchClock::now() - received_).count();
    if (status.ok() && cost != nullptr) {
      observation.queue_seconds = cost->timings().queue_ms() / 1e3;
      observation.inference_seconds = cost->timings().inference_ms() / 1e3;
      observation.cost = cost;
    }
    metrics_->ObserveRequest(observation);
    metrics_->AddInflight(-1);
  }

 private:
  ModelMetrics* metrics_;
  MetricTask task_;
  BatchClock::time_point received_;
};

// What the client will see: a call it already cancelled (or whose deadline
// passed) gets CANCELLED / DEADLINE_EXCEEDED from gRPC whatever we answer,
// so the metrics count that rather than our OK.
grpc::Status AsSeenByClient(const grpc::Status& status, grpc::CallbackServerContext* context) {
  if (!status.ok() || !context->IsCancelled()) return status;
  if (context->deadline() <= std::chrono::system_clock::now()) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "deadline passed during inference");
  }
  return grpc::Status(grpc::StatusCode::CANCELLED, "client cancelled during inference");
}

grpc::Status NotReady() {
  return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is not ready or is draining");
}

}  // namespace

std::vector<std::pair<std::string, std::string>> CostMetadata(const v1::CostReport& cost) {
  return {
      {"x-docsparse-density", absl::StrFormat("%.6g", cost.mean_density())},
      {"x-docsparse-attention-gflops", absl::StrFormat("%.6g", cost.attention_flops() / 1e9)},
      {"x-docsparse-total-gflops", absl::StrFormat("%.6g", cost.total_flops() / 1e9)},
      {"x-docsparse-dense-equivalent-gflops",
       absl::StrFormat("%.6g", cost.dense_equivalent_flops() / 1e9)},
      {"x-docsparse-input-tokens", absl::StrCat(cost.input_tokens())},
      {"x-docsparse-batch-size", absl::StrCat(cost.batch_size())},
      {"x-docsparse-budget-met", cost.budget_met() ? "true" : "false"},
      {"x-docsparse-queue-ms", absl::StrFormat("%.3f", cost.timings().queue_ms())},
      {"x-docsparse-inference-ms", absl::StrFormat("%.3f", cost.timings().inference_ms())},
      {"x-docsparse-total-ms", absl::StrFormat("%.3f", cost.timings().total_ms())},
  };
}

DocumentService::DocumentService(const ModelRegistry& registry, const DocumentTasks& tasks,
                                 ModelBatchers& batchers, Metrics& metrics, int max_streams)
    : registry_(registry),
      tasks_(tasks),
      batchers_(batchers),
      metrics_(metrics),
      max_streams_(max_streams) {
  for (const ServedModel* model : registry_.models()) {
    if (ModelMetrics* handle = metrics_.Find(model->name)) model_metrics_.emplace(model, handle);
  }
}

ModelMetrics& DocumentService::MetricsFor(const std::string& requested) const {
  absl::StatusOr<const ServedModel*> model = registry_.Find(requested);
  if (!model.ok()) return metrics_.Unknown();
  const auto it = model_metrics_.find(*model);
  return it != model_metrics_.end() ? *it->second : metrics_.Unknown();
}

absl::Status DocumentService::Submit(absl::StatusOr<std::unique_ptr<EncodeJob>> job,
                                     grpc::CallbackServerContext* context) {
  if (!job.ok()) return job.status();
  (*job)->pending.deadline = SteadyDeadline(context->deadline());
  (*job)->is_cancelled = [context] { return context->IsCancelled(); };
  if (!batchers_.Submit(*std::move(job))) {
    return absl::ResourceExhaustedError("inference queue is full; retry with backoff");
  }
  return absl::OkStatus();
}

template <typename Request, typename Response, typename Prepare>
grpc::ServerUnaryReactor* DocumentService::RunUnary(grpc::CallbackServerContext* context,
                                                    const Request* request, Response* response,
                                                    MetricTask task, Prepare prepare) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const RequestRecorder recorder(MetricsFor(request->model()), task);
  auto finish = [reactor, context, response, recorder](const absl::Status& status) {
    const grpc::Status grpc_status = ToGrpcStatus(status);
    if (status.ok()) {
      for (auto& [key, value] : CostMetadata(response->cost())) {
        context->AddTrailingMetadata(key, value);
      }
    }
    recorder.Finish(AsSeenByClient(grpc_status, context), &response->cost());
    reactor->Finish(grpc_status);
  };
  if (!ready()) {
    finish(absl::UnavailableError(NotReady().error_message()));
    return reactor;
  }
  // Until Submit succeeds the job is ours; after, only its completion may
  // finish the reactor.
  const absl::Status submitted =
      Submit((tasks_.*prepare)(*request, recorder.received(), response, finish), context);
  if (!submitted.ok()) finish(submitted);
  return reactor;
}

grpc::ServerUnaryReactor* DocumentService::Embed(grpc::CallbackServerContext* context,
                                                 const v1::EmbedRequest* request,
                                                 v1::EmbedResponse* response) {
  return RunUnary(context, request, response, MetricTask::kEmbed, &DocumentTasks::PrepareEmbed);
}

grpc::ServerUnaryReactor* DocumentService::Classify(grpc::CallbackServerContext* context,
                                                    const v1::ClassifyRequest* request,
                                                    v1::ClassifyResponse* response) {
  return RunUnary(context, request, response, MetricTask::kClassify,
                  &DocumentTasks::PrepareClassify);
}

grpc::ServerUnaryReactor* DocumentService::Summarize(grpc::CallbackServerContext* context,
                                                     const v1::SummarizeRequest* request,
                                                     v1::SummarizeResponse* response) {
  return RunUnary(context, request, response, MetricTask::kSummarize,
                  &DocumentTasks::PrepareSummarize);
}

grpc::ServerUnaryReactor* DocumentService::ListModels(grpc::CallbackServerContext* context,
                                                      const v1::ListModelsRequest*,
                                                      v1::ListModelsResponse* response) {
  tasks_.ListModels(response);
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  reactor->Finish(grpc::Status::OK);
  return reactor;
}

// Extractive models have the whole summary at once: the stream carries it
// as one final chunk with the cost report.
class DocumentService::SummaryStream final : public grpc::ServerWriteReactor<v1::SummarizeChunk> {
 public:
  SummaryStream(DocumentService& service, grpc::CallbackServerContext* context,
                const v1::SummarizeRequest* request)
      : service_(service),
        context_(context),
        recorder_(service.MetricsFor(request->model()), MetricTask::kSummarizeStream) {
    if (!service_.ready()) {
      Fail(absl::UnavailableError(NotReady().error_message()));
      return;
    }
    if (service_.streams_.fetch_add(1) >= service_.max_streams_) {
      service_.streams_.fetch_sub(1);
      Fail(absl::ResourceExhaustedError(absl::StrCat("too many concurrent streams (limit ",
                                                     service_.max_streams_, "); retry later")));
      return;
    }
    counted_ = true;
    const absl::Status submitted = service_.Submit(
        service_.tasks_.PrepareSummarize(*request, recorder_.received(), &response_,
                                         [this](const absl::Status& status) { Complete(status); }),
        context_);
    if (!submitted.ok()) Fail(submitted);
  }

  void OnDone() override {
    if (counted_) service_.streams_.fetch_sub(1);
    delete this;
  }

 private:
  void Complete(const absl::Status& status) {
    if (!status.ok()) return Fail(status);
    chunk_.set_text(response_.summary());
    chunk_.set_done(true);
    *chunk_.mutable_cost() = response_.cost();
    for (auto& [key, value] : CostMetadata(chunk_.cost())) {
      context_->AddTrailingMetadata(key, value);
    }
    recorder_.Finish(AsSeenByClient(grpc::Status::OK, context_), &chunk_.cost());
    StartWriteAndFinish(&chunk_, grpc::WriteOptions(), grpc::Status::OK);
  }

  void Fail(const absl::Status& status) {
    const grpc::Status grpc_status = ToGrpcStatus(status);
    recorder_.Finish(grpc_status, nullptr);
    Finish(grpc_status);
  }

  DocumentService& service_;
  grpc::CallbackServerContext* context_;
  const RequestRecorder recorder_;
  bool counted_ = false;
  v1::SummarizeResponse response_;
  v1::SummarizeChunk chunk_;
};

grpc::ServerWriteReactor<v1::SummarizeChunk>* DocumentService::SummarizeStream(
    grpc::CallbackServerContext* context, const v1::SummarizeRequest* request) {
  return new SummaryStream(*this, context, request);
}

}  // namespace docsparse
