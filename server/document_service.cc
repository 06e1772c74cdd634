#include "server/document_service.h"

#include <chrono>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "server/grpc_status.h"

namespace docsparse {
namespace {

std::string CodeName(grpc::StatusCode code) {
  return absl::StatusCodeToString(static_cast<absl::StatusCode>(code));
}

grpc::Status QueueFull() {
  return grpc::Status(grpc::StatusCode::RESOURCE_EXHAUSTED,
                      "inference queue is full; retry with backoff");
}

}  // namespace

std::string DocumentService::ModelLabel(const std::string& requested) const {
  absl::StatusOr<const ServedModel*> model = registry_.Find(requested);
  return model.ok() ? (*model)->name : "unknown";
}

grpc::Status DocumentService::Admit(grpc::CallbackServerContext* context) const {
  if (!ready()) return grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is not ready");
  if (context->IsCancelled()) {
    return grpc::Status(grpc::StatusCode::CANCELLED, "client cancelled before inference");
  }
  if (context->deadline() < std::chrono::system_clock::now()) {
    return grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED,
                        "deadline passed while the request was queued");
  }
  return grpc::Status::OK;
}

template <typename Work>
grpc::ServerUnaryReactor* DocumentService::RunUnary(grpc::CallbackServerContext* context,
                                                    const std::string& model, const char* task,
                                                    Work work) {
  grpc::ServerUnaryReactor* reactor = context->DefaultReactor();
  const std::string label = ModelLabel(model);
  const auto finish = [this, reactor, label, task](const grpc::Status& status) {
    metrics_.CountRequest(label, task, CodeName(status.error_code()));
    reactor->Finish(status);
  };
  if (!ready()) {
    finish(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is not ready"));
    return reactor;
  }
  RequestClock clock{std::chrono::steady_clock::now(), {}};
  const bool queued = pool_.TrySubmit([this, context, clock, work, finish]() mutable {
    grpc::Status admitted = Admit(context);
    if (!admitted.ok()) return finish(admitted);
    clock.started = std::chrono::steady_clock::now();
    finish(ToGrpcStatus(work(clock)));
  });
  if (!queued) finish(QueueFull());
  return reactor;
}

grpc::ServerUnaryReactor* DocumentService::Embed(grpc::CallbackServerContext* context,
                                                 const v1::EmbedRequest* request,
                                                 v1::EmbedResponse* response) {
  return RunUnary(context, request->model(), "embed",
                  [this, request, response](const RequestClock& clock) {
                    return tasks_.Embed(*request, clock, response);
                  });
}

grpc::ServerUnaryReactor* DocumentService::Classify(grpc::CallbackServerContext* context,
                                                    const v1::ClassifyRequest* request,
                                                    v1::ClassifyResponse* response) {
  return RunUnary(context, request->model(), "classify",
                  [this, request, response](const RequestClock& clock) {
                    return tasks_.Classify(*request, clock, response);
                  });
}

grpc::ServerUnaryReactor* DocumentService::Summarize(grpc::CallbackServerContext* context,
                                                     const v1::SummarizeRequest* request,
                                                     v1::SummarizeResponse* response) {
  return RunUnary(context, request->model(), "summarize",
                  [this, request, response](const RequestClock& clock) {
                    return tasks_.Summarize(*request, clock, response);
                  });
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
        request_(request),
        label_(service.ModelLabel(request->model())) {
    if (!service_.ready()) {
      Fail(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is not ready"));
      return;
    }
    const RequestClock clock{std::chrono::steady_clock::now(), {}};
    if (!service_.pool_.TrySubmit([this, clock] { Run(clock); })) Fail(QueueFull());
  }

  void OnDone() override { delete this; }

 private:
  void Run(RequestClock clock) {
    grpc::Status admitted = service_.Admit(context_);
    if (!admitted.ok()) return Fail(admitted);
    clock.started = std::chrono::steady_clock::now();
    v1::SummarizeResponse response;
    const absl::Status status = service_.tasks_.Summarize(*request_, clock, &response);
    if (!status.ok()) return Fail(ToGrpcStatus(status));
    chunk_.set_text(response.summary());
    chunk_.set_done(true);
    *chunk_.mutable_cost() = response.cost();
    service_.metrics_.CountRequest(label_, "summarize_stream", "OK");
    StartWriteAndFinish(&chunk_, grpc::WriteOptions(), grpc::Status::OK);
  }

  void Fail(const grpc::Status& status) {
    service_.metrics_.CountRequest(label_, "summarize_stream", CodeName(status.error_code()));
    Finish(status);
  }

  DocumentService& service_;
  grpc::CallbackServerContext* context_;
  const v1::SummarizeRequest* request_;
  const std::string label_;
  v1::SummarizeChunk chunk_;
};

grpc::ServerWriteReactor<v1::SummarizeChunk>* DocumentService::SummarizeStream(
    grpc::CallbackServerContext* context, const v1::SummarizeRequest* request) {
  return new SummaryStream(*this, context, request);
}

}  // namespace docsparse
