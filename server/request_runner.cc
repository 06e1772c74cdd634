#include "server/request_runner.h"

#include <chrono>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/grpc_status.h"

namespace docsparse {

absl::string_view GrpcAuthorization(const grpc::ServerContextBase& context) {
  const auto& metadata = context.client_metadata();
  const auto it = metadata.find("authorization");
  if (it == metadata.end()) return {};
  return absl::string_view(it->second.data(), it->second.size());
}

grpc::Status RefuseUnparsed(const RequestRunner& runner, const grpc::ServerContextBase& context,
                            const grpc::Status& invalid) {
  const absl::Status allowed = runner.Authenticate(GrpcAuthorization(context));
  return allowed.ok() ? invalid : ToGrpcStatus(allowed);
}

BatchClock::time_point GrpcDeadline(const grpc::ServerContextBase& context) {
  const auto left = context.deadline() - std::chrono::system_clock::now();
  if (left > std::chrono::hours(24 * 365)) return BatchClock::time_point::max();  // none
  return BatchClock::now() + std::chrono::duration_cast<BatchClock::duration>(left);
}

RequestRecorder::RequestRecorder(ModelMetrics& metrics, MetricTask task)
    : metrics_(&metrics), task_(task), received_(BatchClock::now()) {
  metrics_->AddInflight(1);
}

void RequestRecorder::Finish(absl::StatusCode code, const v1::CostReport* cost) const {
  RequestObservation observation;
  observation.task = task_;
  observation.code = static_cast<grpc::StatusCode>(code);
  observation.request_seconds =
      std::chrono::duration<double>(BatchClock::now() - received_).count();
  if (code == absl::StatusCode::kOk && cost != nullptr) {
    observation.queue_seconds = cost->timings().queue_ms() / 1e3;
    observation.inference_seconds = cost->timings().inference_ms() / 1e3;
    observation.cost = cost;
  }
  metrics_->ObserveRequest(observation);
  metrics_->AddInflight(-1);
}

RequestRunner::RequestRunner(const ModelRegistry& registry, const DocumentTasks& tasks,
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

ModelMetrics& RequestRunner::MetricsFor(const std::string& requested) const {
  absl::StatusOr<const ServedModel*> model = registry_.Find(requested);
  if (!model.ok()) return metrics_.Unknown();
  const auto it = model_metrics_.find(*model);
  return it != model_metrics_.end() ? *it->second : metrics_.Unknown();
}

absl::Status RequestRunner::Authorize(absl::string_view authorization,
                                      const std::string& requested) const {
  if (auth_ == nullptr) return absl::OkStatus();
  absl::StatusOr<const ServedModel*> model = registry_.Find(requested);
  if (!model.ok()) return auth_->Authenticate(authorization);
  return auth_->Authorize(authorization, (*model)->name);
}

absl::Status RequestRunner::Authenticate(absl::string_view authorization) const {
  return auth_ == nullptr ? absl::OkStatus() : auth_->Authenticate(authorization);
}

absl::Status RequestRunner::Submit(absl::StatusOr<std::unique_ptr<EncodeJob>> job,
                                   BatchClock::time_point deadline,
                                   std::function<bool()> is_cancelled) {
  if (!job.ok()) return job.status();
  (*job)->pending.deadline = deadline;
  (*job)->is_cancelled = std::move(is_cancelled);
  if (!batchers_.Submit(*std::move(job))) return QueueFull();
  return absl::OkStatus();
}

absl::Status RequestRunner::AcquireStream() {
  if (streams_.fetch_add(1) < max_streams_) return absl::OkStatus();
  streams_.fetch_sub(1);
  return absl::ResourceExhaustedError(
      absl::StrCat("too many concurrent streams (limit ", max_streams_, "); retry later"));
}

absl::Status RequestRunner::NotReady() {
  return absl::UnavailableError("server is not ready or is draining");
}

absl::Status RequestRunner::QueueFull() {
  return absl::ResourceExhaustedError("inference queue is full; retry with backoff");
}

}  // namespace docsparse
