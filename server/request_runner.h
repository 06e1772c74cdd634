// The one path every front end runs a request through — the gRPC
// DocumentService and the HTTP JSON API alike: readiness, the request's
// metrics (in flight from arrival, observed once as it is answered), and
// submission of its prepared job to the model's batcher with the caller's
// deadline and a way to tell that the caller has gone. Validation,
// tokenization and pricing are DocumentTasks'; a front end only translates
// its wire format to and from the v1 messages.
#ifndef DOCSPARSE_SERVER_REQUEST_RUNNER_H_
#define DOCSPARSE_SERVER_REQUEST_RUNNER_H_

#include <grpcpp/server_context.h>

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/batcher.h"
#include "server/document_tasks.h"
#include "server/metrics.h"
#include "server/model_batchers.h"
#include "server/model_registry.h"
#include "server/token_auth.h"

namespace docsparse {

// Records one request's metrics: in flight from construction to Finish().
class RequestRecorder {
 public:
  RequestRecorder(ModelMetrics& metrics, MetricTask task);

  BatchClock::time_point received() const { return received_; }

  // Once, as the request is answered with `code`. `cost` is read only when
  // the code is OK (may be null).
  void Finish(absl::StatusCode code, const v1::CostReport* cost) const;

 private:
  ModelMetrics* metrics_;
  MetricTask task_;
  BatchClock::time_point received_;
};

// A gRPC call's "authorization" metadata, empty when absent.
absl::string_view GrpcAuthorization(const grpc::ServerContextBase& context);
// A gRPC call's deadline on the batcher's clock (gRPC's is wall-clock):
// max when it has none.
BatchClock::time_point GrpcDeadline(const grpc::ServerContextBase& context);

class RequestRunner;
// What request bytes that do not parse are answered (server/parsed_unary_call.h):
// `invalid`, or the authentication error first when the call's token is not
// good, so an unauthenticated caller learns nothing of the message.
grpc::Status RefuseUnparsed(const RequestRunner& runner, const grpc::ServerContextBase& context,
                            const grpc::Status& invalid);

class RequestRunner {
 public:
  // Borrows everything; all must outlive the runner. Models must be
  // registered in `metrics` before. At most `max_streams` streamed summaries
  // run at once, gRPC's and HTTP's together.
  RequestRunner(const ModelRegistry& registry, const DocumentTasks& tasks, ModelBatchers& batchers,
                Metrics& metrics, int max_streams);

  // Until set, and again once draining, requests are refused UNAVAILABLE.
  void SetReady(bool ready) { ready_.store(ready); }
  bool ready() const { return ready_.load(); }

  const DocumentTasks& tasks() const { return tasks_; }

  // Requires a bearer token from `auth` (must outlive the runner); null, the
  // default, lets everyone in. Set before serving.
  void SetAuthenticator(const TokenAuthenticator* auth) { auth_ = auth; }
  // Whether `authorization` ("Bearer TOKEN", the caller's header or
  // metadata) may call the model `requested` names ("" = the default):
  // OK, UNAUTHENTICATED or PERMISSION_DENIED. A name no model has needs
  // only a valid token (the request then fails NOT_FOUND as usual).
  absl::Status Authorize(absl::string_view authorization, const std::string& requested) const;
  // Whether it may call at all (listing models, metadata).
  absl::Status Authenticate(absl::string_view authorization) const;

  // The metrics handle of the model a request names ("" = the default
  // model); the "unknown" model's for names that are not loaded.
  ModelMetrics& MetricsFor(const std::string& requested) const;
  // The "unknown" model's, for protocols where "" names no model.
  ModelMetrics& UnknownMetrics() const { return metrics_.Unknown(); }

  // Queues a prepared job with the caller's deadline (max: none) and
  // `is_cancelled` (polled while it waits and between layers; may be empty).
  // RESOURCE_EXHAUSTED when the model's queue is full; the job's error when
  // it could not be prepared.
  absl::Status Submit(absl::StatusOr<std::unique_ptr<EncodeJob>> job,
                      BatchClock::time_point deadline, std::function<bool()> is_cancelled);

  // A streamed summary's slot: RESOURCE_EXHAUSTED when `max_streams` run
  // already. Each OK is followed by one ReleaseStream when the stream ends.
  absl::Status AcquireStream();
  void ReleaseStream() { streams_.fetch_sub(1); }

  static absl::Status NotReady();
  static absl::Status QueueFull();

 private:
  const ModelRegistry& registry_;
  const DocumentTasks& tasks_;
  ModelBatchers& batchers_;
  Metrics& metrics_;
  const TokenAuthenticator* auth_ = nullptr;
  const int max_streams_;
  std::atomic<int> streams_{0};
  std::atomic<bool> ready_{false};
  // Resolved once (STYLE: label sets per model, not per request).
  std::unordered_map<const ServedModel*, ModelMetrics*> model_metrics_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_REQUEST_RUNNER_H_
