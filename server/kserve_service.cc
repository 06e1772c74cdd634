#include "server/kserve_service.h"

#include <algorithm>
#include <chrono>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/mutex.h"
#include "common/quote.h"
#include "common/status_macros.h"
#include "server/grpc_status.h"
#include "server/kserve_request.h"

namespace docsparse {
namespace {

// Keep in step with project(VERSION) in CMakeLists.txt.
constexpr char kServerName[] = "docsparse";
constexpr char kServerVersion[] = "0.1.0";
constexpr char kPlatform[] = "docsparse";
constexpr char kModelVersion[] = "1";

void AddTensorMetadata(
    const std::string& name, const std::string& datatype, std::vector<int64_t> shape,
    google::protobuf::RepeatedPtrField<inference::ModelMetadataResponse::TensorMetadata>* tensors) {
  inference::ModelMetadataResponse::TensorMetadata* tensor = tensors->Add();
  tensor->set_name(name);
  tensor->set_datatype(datatype);
  tensor->mutable_shape()->Add(shape.begin(), shape.end());
}

// The labels in the order "scores" columns come in: the request's, else the
// ones Classify falls back to (the checkpoint's head, else docsparse.json's).
std::vector<std::string> LabelOrder(const ServedModel& model, const KServeInferCall& call) {
  if (!call.labels.empty()) return call.labels;
  if (model.head != nullptr) return model.head->labels();
  std::vector<std::string> labels;
  for (const ZeroShotLabel& label : model.serving.zero_shot.labels) labels.push_back(label.name);
  return labels;
}

// A task error about one of the documents says which.
absl::Status ForDocument(const absl::Status& status, size_t index) {
  if (status.ok()) return status;
  return absl::Status(status.code(), absl::StrCat("text[", index, "]: ", status.message()));
}

double Seconds(BatchClock::duration duration) {
  return std::chrono::duration<double>(duration).count();
}

}  // namespace

// One ModelInfer in flight. Shared by ModelInfer while it submits and by
// every job's completion, so it lives until the last job is gone; the task
// requests and responses the jobs borrow live here.
class KServeService::InferCall : public std::enable_shared_from_this<InferCall> {
 public:
  using Rpc = ParsedUnaryCall<inference::ModelInferRequest, inference::ModelInferResponse>;

  InferCall(const KServeService& service, Rpc* rpc)
      : service_(service),
        context_(rpc->context()),
        rpc_(rpc),
        request_(rpc->request()),
        response_(rpc->response()),
        metrics_(service.MetricsFor(request_.model_name())),
        received_(BatchClock::now()) {
    metrics_.AddInflight(1);
  }

  // Validates the request, prepares its jobs and submits them; an error
  // before any job is queued finishes the RPC at once.
  void Start() {
    if (absl::Status allowed =
            service_.runner_.Authorize(GrpcAuthorization(*context_), request_.model_name());
        !allowed.ok()) {
      return Finish(allowed);
    }
    if (!service_.ready()) return Finish(RequestRunner::NotReady());
    std::vector<std::unique_ptr<EncodeJob>> jobs;
    if (absl::Status prepared = PrepareJobs(&jobs); !prepared.ok()) return Finish(prepared);
    {
      MutexLock lock(&mu_);
      pending_ = jobs.size();
    }
    const BatchClock::time_point deadline = GrpcDeadline(*context_);
    for (size_t i = 0; i < jobs.size(); ++i) {
      // Polled under the batcher's lock: atomics only. A failed sibling makes
      // the rest pointless.
      auto cancelled = [self = shared_from_this()] {
        return self->failed_.load() || self->context_->IsCancelled();
      };
      const absl::Status submitted =
          service_.runner_.Submit(std::move(jobs[i]), deadline, std::move(cancelled));
      if (submitted.ok()) continue;
      // This job and the ones after it will never complete: answer for them,
      // and let the queued ones be dropped as cancelled.
      for (size_t j = i; j < jobs.size(); ++j) JobDone(submitted);
      return;
    }
  }

 private:
  // One document's task requests and responses.
  struct Document {
    v1::EmbedRequest embed_request;
    v1::EmbedResponse embed_response;
    v1::ClassifyRequest classify_request;
    v1::ClassifyResponse classify_response;
  };

  absl::Status PrepareJobs(std::vector<std::unique_ptr<EncodeJob>>* jobs) {
    ASSIGN_OR_RETURN(
        model_, service_.FindModel(request_.model_name(), request_.model_version(), "model_name"));
    ASSIGN_OR_RETURN(call_, ParseKServeInferRequest(request_));
    if (call_.wants(kKServeScoresOutput)) label_order_ = LabelOrder(*model_, call_);
    // Sized once: the jobs borrow its elements.
    documents_.resize(call_.texts.size());
    // The labels are embedded once for the whole call, by the first
    // document's job; the others score against its rows.
    LabelSharing labels{std::make_shared<SharedLabelRows>(), true};
    for (size_t i = 0; i < documents_.size(); ++i) {
      Document& document = documents_[i];
      v1::Document text;
      // utf8_bytes, not text: the task checks the encoding and names the field.
      text.set_utf8_bytes(std::move(call_.texts[i]));
      if (call_.wants(kKServeEmbeddingOutput)) {
        v1::EmbedRequest& embed = document.embed_request;
        embed.set_model(model_->name);
        *embed.mutable_document() = text;
        *embed.mutable_budget() = call_.budget;
        *embed.mutable_options() = call_.options;
        embed.set_pooling(call_.pooling);
        if (call_.normalize.has_value()) embed.set_normalize(*call_.normalize);
        RETURN_IF_ERROR(
            Add(tasks().PrepareEmbed(embed, received_, &document.embed_response, Completer(i)), i,
                jobs));
      }
      if (call_.wants(kKServeScoresOutput)) {
        v1::ClassifyRequest& classify = document.classify_request;
        classify.set_model(model_->name);
        *classify.mutable_document() = std::move(text);
        *classify.mutable_budget() = call_.budget;
        *classify.mutable_options() = call_.options;
        for (const std::string& label : call_.labels) classify.add_labels(label);
        if (call_.temperature.has_value()) classify.set_temperature(*call_.temperature);
        RETURN_IF_ERROR(
            Add(tasks().PrepareClassify(classify, received_, &document.classify_response,
                                        Completer(i), labels),
                i, jobs));
        labels.embeds = false;
      }
    }
    // Each document was admitted on its own; the call as a whole must be too.
    RequestPrice price;
    for (const auto& job : *jobs) price += job->price;
    return AdmitRequest(price, tasks().limits());
  }

  const DocumentTasks& tasks() const { return service_.runner_.tasks(); }

  Completion Completer(size_t index) {
    return [self = shared_from_this(), index](const absl::Status& status) {
      self->JobDone(ForDocument(status, index));
    };
  }

  // Appends a prepared job (Start submits it with the RPC's deadline and
  // cancellation).
  absl::Status Add(absl::StatusOr<std::unique_ptr<EncodeJob>> job, size_t index,
                   std::vector<std::unique_ptr<EncodeJob>>* jobs) {
    if (!job.ok()) return ForDocument(job.status(), index);
    jobs->push_back(std::move(*job));
    return absl::OkStatus();
  }

  // One job ended; the last one answers the RPC.
  void JobDone(const absl::Status& status) {
    absl::Status result;
    {
      MutexLock lock(&mu_);
      if (!status.ok() && error_.ok()) error_ = status;
      if (--pending_ > 0) {
        if (!error_.ok()) failed_.store(true);
        return;
      }
      result = error_;
    }
    if (result.ok()) result = BuildResponse();
    Finish(result);
  }

  absl::Status BuildResponse() {
    const int64_t count = static_cast<int64_t>(documents_.size());
    const int64_t hidden = model_->config.hidden_size;
    std::vector<float> embeddings;
    std::vector<float> scores;
    for (const Document& document : documents_) {
      if (call_.wants(kKServeEmbeddingOutput)) {
        const auto& embedding = document.embed_response.embedding();
        // ModelMetadata promises [N, hidden]; a pooled embedding is hidden wide.
        if (embedding.size() != hidden) {
          return absl::InternalError(absl::StrCat("embedding of ", embedding.size(),
                                                  " values; the model is ", hidden, " wide"));
        }
        embeddings.insert(embeddings.end(), embedding.begin(), embedding.end());
        AddCost(document.embed_response.cost());
      }
      if (call_.wants(kKServeScoresOutput)) {
        // Classify sorts by score; the tensor keeps the labels' order.
        std::map<std::string, float> by_label;
        for (const v1::LabelScore& score : document.classify_response.scores()) {
          by_label[score.label()] = score.score();
        }
        for (const std::string& label : label_order_) {
          const auto found = by_label.find(label);
          if (found == by_label.end()) {
            return absl::InternalError(absl::StrCat("Classify gave no score for '", label, "'"));
          }
          scores.push_back(found->second);
        }
        AddCost(document.classify_response.cost());
      }
    }
    response_->set_model_name(model_->name);
    response_->set_model_version(kModelVersion);
    response_->set_id(request_.id());
    for (const std::string& output : call_.outputs) {
      if (output == kKServeEmbeddingOutput) {
        AddFp32Output(output, {count, hidden}, embeddings, call_.raw, response_);
      } else {
        const int64_t labels = static_cast<int64_t>(label_order_.size());
        AddFp32Output(output, {count, labels}, scores, call_.raw, response_);
        // The column order, for clients that sent no labels.
        (*response_->mutable_outputs()->rbegin()->mutable_parameters())["labels"].set_string_param(
            absl::StrJoin(label_order_, ","));
      }
    }
    cost_.WriteParameters(response_);
    return absl::OkStatus();
  }

  void AddCost(const v1::CostReport& cost) {
    cost_.Add(cost);
    queue_ms_ = std::max(queue_ms_, cost.timings().queue_ms());
  }

  void Finish(const absl::Status& status) {
    RequestObservation observation;
    observation.task = MetricTask::kInfer;
    observation.code = static_cast<grpc::StatusCode>(status.code());
    observation.request_seconds = Seconds(BatchClock::now() - received_);
    if (status.ok()) {
      // Queued until its last job started; computing from then on.
      observation.queue_seconds = std::min(queue_ms_ / 1e3, observation.request_seconds);
      observation.inference_seconds = observation.request_seconds - observation.queue_seconds;
      observation.cost = &cost_.summary();
    }
    metrics_.ObserveRequest(observation);
    metrics_.AddInflight(-1);
    rpc_->Respond(ToGrpcStatus(status));
  }

  const KServeService& service_;
  grpc::CallbackServerContext* const context_;
  Rpc* const rpc_;
  const inference::ModelInferRequest& request_;
  inference::ModelInferResponse* const response_;
  ModelMetrics& metrics_;
  const BatchClock::time_point received_;
  // Set by PrepareJobs, read by the last completion.
  const ServedModel* model_ = nullptr;
  KServeInferCall call_;
  std::vector<std::string> label_order_;
  std::vector<Document> documents_;
  // Written by the last completion only.
  KServeCostTotals cost_;
  double queue_ms_ = 0;

  std::atomic<bool> failed_{false};
  Mutex mu_;
  size_t pending_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

KServeService::KServeService(RequestRunner& runner, const ModelRegistry& registry)
    : runner_(runner), registry_(registry) {}

ModelMetrics& KServeService::MetricsFor(const std::string& requested) const {
  // The registry reads "" as the default model; this protocol requires a name.
  return requested.empty() ? runner_.UnknownMetrics() : runner_.MetricsFor(requested);
}

absl::StatusOr<const ServedModel*> KServeService::FindModel(const std::string& name,
                                                            const std::string& version,
                                                            const char* field) const {
  if (name.empty()) return absl::InvalidArgumentError(absl::StrCat(field, ": required"));
  absl::StatusOr<const ServedModel*> model = registry_.Find(name);
  if (!model.ok()) {
    return absl::Status(model.status().code(), absl::StrCat(field, ": ", model.status().message()));
  }
  if (!version.empty() && version != kModelVersion) {
    return absl::NotFoundError(absl::StrCat("model ", Quote(name), " has no version ",
                                            Quote(version), " (versions: ", kModelVersion, ")"));
  }
  return model;
}

template <typename Request, typename Response, typename Answer>
grpc::ServerUnaryReactor* KServeService::Unary(grpc::CallbackServerContext* context,
                                               const grpc::ByteBuffer* request,
                                               grpc::ByteBuffer* response, Access access,
                                               Answer answer) {
  using Call = ParsedUnaryCall<Request, Response>;
  return Call::Start(
      context, request, response,
      [this, context, access](const grpc::Status& invalid) {
        return access == Access::kOpen ? invalid : RefuseUnparsed(runner_, *context, invalid);
      },
      [answer](Call* call) {
        call->Respond(answer(*call->context(), call->request(), call->response()));
      });
}

grpc::ServerUnaryReactor* KServeService::ServerLive(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  return Unary<inference::ServerLiveRequest, inference::ServerLiveResponse>(
      context, request, response, Access::kOpen,
      [](const grpc::CallbackServerContext&, const inference::ServerLiveRequest&,
         inference::ServerLiveResponse* live) {
        live->set_live(true);
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* KServeService::ServerReady(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* request,
                                                     grpc::ByteBuffer* response) {
  return Unary<inference::ServerReadyRequest, inference::ServerReadyResponse>(
      context, request, response, Access::kOpen,
      [this](const grpc::CallbackServerContext&, const inference::ServerReadyRequest&,
             inference::ServerReadyResponse* ready_response) {
        ready_response->set_ready(ready());
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* KServeService::ModelReady(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  return Unary<inference::ModelReadyRequest, inference::ModelReadyResponse>(
      context, request, response, Access::kOpen,
      [this](const grpc::CallbackServerContext&, const inference::ModelReadyRequest& asked,
             inference::ModelReadyResponse* ready_response) {
        absl::StatusOr<const ServedModel*> model = FindModel(asked.name(), asked.version(), "name");
        if (!model.ok()) return ToGrpcStatus(model.status());
        // Models load before the server starts; ready is the warm-up being done.
        ready_response->set_ready(ready());
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* KServeService::ServerMetadata(grpc::CallbackServerContext* context,
                                                        const grpc::ByteBuffer* request,
                                                        grpc::ByteBuffer* response) {
  return Unary<inference::ServerMetadataRequest, inference::ServerMetadataResponse>(
      context, request, response, Access::kOpen,
      [](const grpc::CallbackServerContext&, const inference::ServerMetadataRequest&,
         inference::ServerMetadataResponse* metadata) {
        metadata->set_name(kServerName);
        metadata->set_version(kServerVersion);
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* KServeService::ModelMetadata(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request,
                                                       grpc::ByteBuffer* response) {
  return Unary<inference::ModelMetadataRequest, inference::ModelMetadataResponse>(
      context, request, response, Access::kToken,
      [this](const grpc::CallbackServerContext& call_context,
             const inference::ModelMetadataRequest& asked,
             inference::ModelMetadataResponse* metadata) {
        if (absl::Status allowed = runner_.Authorize(GrpcAuthorization(call_context), asked.name());
            !allowed.ok()) {
          return ToGrpcStatus(allowed);
        }
        absl::StatusOr<const ServedModel*> model = FindModel(asked.name(), asked.version(), "name");
        if (!model.ok()) return ToGrpcStatus(model.status());
        metadata->set_name((*model)->name);
        metadata->add_versions(kModelVersion);
        metadata->set_platform(kPlatform);
        AddTensorMetadata(kKServeTextInput, "BYTES", {-1}, metadata->mutable_inputs());
        if ((*model)->serving.HasTask(Task::kEmbed)) {
          AddTensorMetadata(kKServeEmbeddingOutput, "FP32", {-1, (*model)->config.hidden_size},
                            metadata->mutable_outputs());
        }
        if ((*model)->serving.HasTask(Task::kClassify)) {
          AddTensorMetadata(kKServeScoresOutput, "FP32", {-1, -1}, metadata->mutable_outputs());
        }
        return grpc::Status::OK;
      });
}

grpc::ServerUnaryReactor* KServeService::ModelInfer(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer* request,
                                                    grpc::ByteBuffer* response) {
  return InferCall::Rpc::Start(
      context, request, response,
      [this, context](const grpc::Status& invalid) {
        const grpc::Status status = RefuseUnparsed(runner_, *context, invalid);
        RequestObservation observation;
        observation.task = MetricTask::kInfer;
        observation.code = status.error_code();
        runner_.UnknownMetrics().ObserveRequest(observation);
        return status;
      },
      [this](InferCall::Rpc* rpc) { std::make_shared<InferCall>(*this, rpc)->Start(); });
}

}  // namespace docsparse
