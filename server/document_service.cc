#include "server/document_service.h"

#include <chrono>
#include <deque>
#include <functional>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/mutex.h"
#include "server/cost_report.h"
#include "server/grpc_status.h"

namespace docsparse {
namespace {

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

// The metrics' code for what the client saw.
absl::StatusCode CodeOf(const grpc::Status& status) {
  return static_cast<absl::StatusCode>(status.error_code());
}

}  // namespace

DocumentService::DocumentService(RequestRunner& runner) : runner_(runner) {}

absl::Status DocumentService::Submit(absl::StatusOr<std::unique_ptr<EncodeJob>> job,
                                     grpc::CallbackServerContext* context) {
  return runner_.Submit(std::move(job), GrpcDeadline(*context),
                        [context] { return context->IsCancelled(); });
}

template <typename Request, typename Response, typename Prepare>
grpc::ServerUnaryReactor* DocumentService::RunUnary(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request_bytes,
                                                    grpc::ByteBuffer* response_bytes,
                                                    MetricTask task, Prepare prepare) {
  using Call = ParsedUnaryCall<Request, Response>;
  return Call::Start(
      context, request_bytes, response_bytes,
      [this, context, task](const grpc::Status& invalid) {
        const grpc::Status status = RefuseUnparsed(runner_, *context, invalid);
        RequestRecorder(runner_.UnknownMetrics(), task).Finish(CodeOf(status), nullptr);
        return status;
      },
      [this, task, &prepare](Call* call) {
        grpc::CallbackServerContext* context = call->context();
        const Request& request = call->request();
        const RequestRecorder recorder(runner_.MetricsFor(request.model()), task);
        auto finish = [call, context, recorder](const absl::Status& status) {
          const grpc::Status grpc_status = ToGrpcStatus(status);
          if (status.ok()) {
            for (auto& [key, value] : CostMetadata(call->response()->cost())) {
              context->AddTrailingMetadata(key, value);
            }
          }
          recorder.Finish(CodeOf(AsSeenByClient(grpc_status, context)), &call->response()->cost());
          call->Respond(grpc_status);
        };
        if (absl::Status allowed = runner_.Authorize(GrpcAuthorization(*context), request.model());
            !allowed.ok()) {
          return finish(allowed);
        }
        if (!runner_.ready()) return finish(RequestRunner::NotReady());
        // Until Submit succeeds the job is ours; after, only its completion
        // may finish the call.
        const absl::Status submitted =
            Submit(std::invoke(prepare, runner_.tasks(), request, recorder.received(),
                               call->response(), finish),
                   context);
        if (!submitted.ok()) finish(submitted);
      });
}

grpc::ServerUnaryReactor* DocumentService::Embed(grpc::CallbackServerContext* context,
                                                 const grpc::ByteBuffer* request,
                                                 grpc::ByteBuffer* response) {
  return RunUnary<v1::EmbedRequest, v1::EmbedResponse>(
      context, request, response, MetricTask::kEmbed, &DocumentTasks::PrepareEmbed);
}

grpc::ServerUnaryReactor* DocumentService::Classify(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  return RunUnary<v1::ClassifyRequest, v1::ClassifyResponse>(
      context, request, response, MetricTask::kClassify,
      [](const DocumentTasks& tasks, const v1::ClassifyRequest& request,
         BatchClock::time_point received, v1::ClassifyResponse* response, Completion complete) {
        return tasks.PrepareClassify(request, received, response, std::move(complete));
      });
}

grpc::ServerUnaryReactor* DocumentService::Summarize(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  return RunUnary<v1::SummarizeRequest, v1::SummarizeResponse>(
      context, request, response, MetricTask::kSummarize,
      [](const DocumentTasks& tasks, const v1::SummarizeRequest& request,
         BatchClock::time_point received, v1::SummarizeResponse* response, Completion complete) {
        return tasks.PrepareSummarize(request, received, response, std::move(complete));
      });
}

grpc::ServerUnaryReactor* DocumentService::ListModels(grpc::CallbackServerContext* context,
                                                      const grpc::ByteBuffer* request,
                                                      grpc::ByteBuffer* response) {
  using Call = ParsedUnaryCall<v1::ListModelsRequest, v1::ListModelsResponse>;
  return Call::Start(
      context, request, response,
      [this, context](const grpc::Status& invalid) {
        return RefuseUnparsed(runner_, *context, invalid);
      },
      [this](Call* call) {
        if (absl::Status allowed = runner_.Authenticate(GrpcAuthorization(*call->context()));
            !allowed.ok()) {
          return call->Respond(ToGrpcStatus(allowed));
        }
        runner_.tasks().ListModels(call->response());
        call->Respond(grpc::Status::OK);
      });
}

// SummarizeStream. Greedy abstractive summaries send a chunk per chosen
// token (its id and the text that became final with it) as the batcher
// thread produces them; beam search and extractive models have the whole
// summary only at the end. The last chunk carries the rest of the text, the
// cost report and done. gRPC allows one write in flight: chunks wait in
// order behind it, so a slow client never holds up the batch's decoding.
class DocumentService::SummaryStream final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  SummaryStream(DocumentService& service, grpc::CallbackServerContext* context,
                const grpc::ByteBuffer* request_bytes)
      : service_(service),
        context_(context),
        parsed_(ParseRequestBytes(*request_bytes, &request_)),
        recorder_(parsed_ ? service.runner_.MetricsFor(request_.model())
                          : service.runner_.UnknownMetrics(),
                  MetricTask::kSummarizeStream) {
    if (!parsed_) {
      const grpc::Status refused = RefuseUnparsed(
          service_.runner_, *context, UnparsedRequest(*v1::SummarizeRequest::descriptor()));
      Complete(absl::Status(static_cast<absl::StatusCode>(refused.error_code()),
                            refused.error_message()));
      return;
    }
    const v1::SummarizeRequest* request = &request_;
    if (absl::Status allowed =
            service_.runner_.Authorize(GrpcAuthorization(*context), request->model());
        !allowed.ok()) {
      Complete(allowed);
      return;
    }
    if (!service_.runner_.ready()) {
      Complete(RequestRunner::NotReady());
      return;
    }
    if (absl::Status slot = service_.runner_.AcquireStream(); !slot.ok()) {
      Complete(slot);
      return;
    }
    counted_ = true;
    const absl::Status submitted =
        service_.Submit(service_.runner_.tasks().PrepareSummarize(
                            *request, recorder_.received(), &response_,
                            [this](const absl::Status& status) { Complete(status); },
                            [this](int32_t token, const std::string& text) { Push(token, text); }),
                        context_);
    if (!submitted.ok()) Complete(submitted);
  }

  void OnWriteDone(bool ok) override {
    {
      MutexLock lock(&mu_);
      write_in_flight_ = false;
      // The client is gone: nothing more will be read.
      if (!ok) {
        write_failed_ = true;
        pending_.clear();
      }
    }
    WriteNext();
  }

  void OnDone() override {
    if (counted_) service_.runner_.ReleaseStream();
    delete this;
  }

 private:
  // A token chosen (compute thread, while generating).
  void Push(int32_t token, const std::string& text) {
    v1::SummarizeChunk chunk;
    chunk.set_text(text);
    chunk.add_token_ids(token);
    streamed_bytes_ += text.size();
    {
      MutexLock lock(&mu_);
      if (write_failed_) return;
      pending_.push_back(std::move(chunk));
    }
    WriteNext();
  }

  // How the request ended (once; compute thread, batcher thread when dropped
  // from the queue, or the RPC thread when it never reached the batcher).
  void Complete(const absl::Status& status) {
    if (!status.ok()) {
      const grpc::Status grpc_status = ToGrpcStatus(status);
      recorder_.Finish(CodeOf(grpc_status), nullptr);
      {
        MutexLock lock(&mu_);
        pending_.clear();  // the error is what the client needs now
        finish_status_ = grpc_status;
      }
      return WriteNext();
    }
    v1::SummarizeChunk last;
    // The streamed pieces are a prefix of the summary
    // (model/text/streaming_detokenizer.h), so the chunks add up to it exactly.
    const std::string& summary = response_.summary();
    last.set_text(streamed_bytes_ < summary.size() ? summary.substr(streamed_bytes_) : "");
    last.set_done(true);
    *last.mutable_cost() = response_.cost();
    for (auto& [key, value] : CostMetadata(last.cost())) context_->AddTrailingMetadata(key, value);
    recorder_.Finish(CodeOf(AsSeenByClient(grpc::Status::OK, context_)), &last.cost());
    {
      MutexLock lock(&mu_);
      if (!write_failed_) pending_.push_back(std::move(last));
      finish_status_ = grpc::Status::OK;
    }
    WriteNext();
  }

  // Starts the next write, or the finish once everything is written. After
  // it has started the finish, `this` may be gone.
  void WriteNext() {
    const grpc::ByteBuffer* chunk = nullptr;
    bool last = false;
    grpc::Status finish;
    {
      MutexLock lock(&mu_);
      if (write_in_flight_ || finished_) return;
      if (!pending_.empty()) {
        bool own_buffer = false;
        writing_.Clear();  // the serializer wants an empty buffer; the last write is done
        grpc::SerializationTraits<v1::SummarizeChunk>::Serialize(pending_.front(), &writing_,
                                                                 &own_buffer);
        last = pending_.front().done();
        pending_.pop_front();
        chunk = &writing_;
        write_in_flight_ = !last;
        finished_ = last;
      } else if (finish_status_.has_value()) {
        finish = *finish_status_;
        finished_ = true;
      } else {
        return;
      }
    }
    if (chunk == nullptr) return Finish(finish);
    if (last) return StartWriteAndFinish(chunk, grpc::WriteOptions(), grpc::Status::OK);
    StartWrite(chunk);
  }

  DocumentService& service_;
  grpc::CallbackServerContext* context_;
  v1::SummarizeRequest request_;  // parsed from the call's bytes
  const bool parsed_;
  const RequestRecorder recorder_;
  bool counted_ = false;
  v1::SummarizeResponse response_;
  size_t streamed_bytes_ = 0;  // text sent in token chunks (compute thread)
  Mutex mu_;
  std::deque<v1::SummarizeChunk> pending_ ABSL_GUARDED_BY(mu_);
  grpc::ByteBuffer writing_;  // in flight; gRPC reads it until OnWriteDone
  bool write_in_flight_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  // Set by Complete: finish with it once the pending chunks are written.
  std::optional<grpc::Status> finish_status_ ABSL_GUARDED_BY(mu_);
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
};

grpc::ServerWriteReactor<grpc::ByteBuffer>* DocumentService::SummarizeStream(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* request) {
  return new SummaryStream(*this, context, request);
}

}  // namespace docsparse
