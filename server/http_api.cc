#include "server/http_api.h"

#include <google/protobuf/util/json_util.h>
#include <httplib.h>

#include <algorithm>
#include <cstring>
#include <deque>
#include <functional>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/mutex.h"
#include "server/cost_report.h"
#include "server/http_json.h"
#include "server/openapi_document.h"

namespace docsparse {
namespace {

using http::FieldError;
using http::Json;

constexpr char kJson[] = "application/json";
constexpr char kTimeoutHeader[] = "x-docsparse-timeout-ms";

// Which error body a route answers with.
enum class Dialect { kTei, kOpenAi };

// Why a request failed before its job was queued, where HTTP tells apart
// what gRPC calls RESOURCE_EXHAUSTED: over a size limit (413) or busy (429).
enum class Refusal { kNone, kPrepare, kQueueFull };

int HttpStatusOf(const absl::Status& status, Refusal refusal) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return 200;
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kFailedPrecondition:
    case absl::StatusCode::kOutOfRange:
      return 422;
    case absl::StatusCode::kNotFound:
      return 404;
    case absl::StatusCode::kUnauthenticated:
      return 401;
    case absl::StatusCode::kPermissionDenied:
      return 403;
    case absl::StatusCode::kResourceExhausted:
      return refusal == Refusal::kQueueFull ? 429 : 413;
    case absl::StatusCode::kUnavailable:
      return 503;
    case absl::StatusCode::kDeadlineExceeded:
      return 504;
    case absl::StatusCode::kCancelled:
      return 499;  // nginx's "client closed request": nobody reads it
    case absl::StatusCode::kInternal:
    case absl::StatusCode::kUnknown:
    case absl::StatusCode::kDataLoss:
      return 500;
    default:
      return 424;  // TEI: the inference failed
  }
}

// TEI's error_type values, and ours where TEI has none.
std::string TeiErrorType(int status) {
  switch (status) {
    case 400:
    case 413:
    case 415:
    case 422:
      return "Validation";
    case 429:
      return "Overloaded";
    case 503:
      return "Unhealthy";
    case 404:
      return "NotFound";
    case 401:
      return "Unauthorized";
    case 403:
      return "Forbidden";
    case 504:
      return "Timeout";
    default:
      return "Backend";
  }
}

// The field an error message names ("budget.max_density: ..."), if any.
std::string FieldOf(std::string_view message) {
  const size_t colon = message.find(": ");
  if (colon == std::string_view::npos) return "";
  const std::string_view field = message.substr(0, colon);
  const bool plain = std::all_of(field.begin(), field.end(), [](char c) {
    return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_' || c == '.' || c == '[' ||
           c == ']' || c == '-';
  });
  return plain ? std::string(field) : "";
}

void WriteError(httplib::Response& res, Dialect dialect, int status, const std::string& message) {
  res.status = status;
  Json body;
  if (dialect == Dialect::kOpenAi) {
    const std::string field = FieldOf(message);
    body["error"] = {
        {"message", message},
        {"type", status == 429   ? "rate_limit_error"
                 : status == 401 ? "authentication_error"
                 : status == 403 ? "permission_error"
                 : status >= 500 ? "server_error"
                                 : "invalid_request_error"},
        {"param", field.empty() ? Json() : Json(field)},
        {"code", status == 404 && field == "model" ? Json("model_not_found") : Json()},
    };
  } else {
    body = {{"error", message}, {"error_type", TeiErrorType(status)}};
  }
  if (status == 401) res.set_header("WWW-Authenticate", "Bearer");
  res.set_content(body.dump(), kJson);
}

void WriteError(httplib::Response& res, Dialect dialect, const absl::Status& status,
                Refusal refusal = Refusal::kNone) {
  WriteError(res, dialect, HttpStatusOf(status, refusal), std::string(status.message()));
}

void WriteJson(httplib::Response& res, const Json& body) {
  res.status = 200;
  res.set_content(body.dump(-1, ' ', false, Json::error_handler_t::replace), kJson);
}

void SetCostHeaders(httplib::Response& res, const std::vector<const v1::CostReport*>& reports) {
  if (reports.empty()) return;
  for (const auto& [key, value] : CostMetadata(CombineCostReports(reports))) {
    res.set_header(key, value);
  }
}

std::string Lower(std::string text) { return absl::AsciiStrToLower(text); }

// One v1 request run to its end on the calling (HTTP handler) thread:
// prepared and queued by Start, answered when Wait returns. The request and
// response live here until the job is done with them.
template <typename Request, typename Response>
class BlockingCall {
 public:
  using Prepare = std::function<absl::StatusOr<std::unique_ptr<EncodeJob>>(
      const DocumentTasks&, const Request&, BatchClock::time_point, Response*, Completion)>;

  BlockingCall(RequestRunner& runner, MetricTask task, Request request)
      : runner_(runner),
        request_(std::move(request)),
        recorder_(runner.MetricsFor(request_.model()), task) {}
  BlockingCall(const BlockingCall&) = delete;
  BlockingCall& operator=(const BlockingCall&) = delete;
  // The job may still be writing the response: never go before it is done.
  ~BlockingCall() { Wait(); }

  // Prepares and queues the request. A refusal before it was queued (not
  // ready, invalid, over a limit, queue full) answers it at once and is
  // returned; OK means it is queued and Wait will give its outcome.
  absl::Status Start(const Prepare& prepare, BatchClock::time_point deadline,
                     std::function<bool()> is_cancelled) {
    absl::Status refused;
    if (!runner_.ready()) {
      refused = RequestRunner::NotReady();
      refusal_ = Refusal::kPrepare;
    } else {
      absl::StatusOr<std::unique_ptr<EncodeJob>> job =
          prepare(runner_.tasks(), request_, recorder_.received(), &response_,
                  [this](const absl::Status& status) { Complete(status); });
      if (!job.ok()) {
        refused = job.status();
        refusal_ = Refusal::kPrepare;
      } else {
        refused = runner_.Submit(*std::move(job), deadline, std::move(is_cancelled));
        if (refused.ok()) return refused;
        refusal_ = Refusal::kQueueFull;
      }
    }
    Complete(refused);
    return refused;
  }

  const absl::Status& Wait() {
    MutexLock lock(&mu_, absl::Condition(&done_));
    return status_;
  }
  // Why Start refused it (set by Start, on the caller's thread).
  Refusal refusal() const { return refusal_; }
  const Response& response() const { return response_; }

 private:
  void Complete(const absl::Status& status) {
    recorder_.Finish(status.code(), status.ok() ? &response_.cost() : nullptr);
    MutexLock lock(&mu_);
    status_ = status;
    done_ = true;
  }

  RequestRunner& runner_;
  const Request request_;
  Response response_;
  const RequestRecorder recorder_;
  Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
  Refusal refusal_ = Refusal::kNone;
};

// Runs every request at once (so they batch together) and waits for all.
// Null when all succeeded, else the first failure with the HTTP field of
// its input (`inputs`, `inputs[3]`).
template <typename Request, typename Response>
struct CallBatch {
  std::vector<std::unique_ptr<BlockingCall<Request, Response>>> calls;

  void Run(RequestRunner& runner, MetricTask task, std::vector<Request> requests,
           const typename BlockingCall<Request, Response>::Prepare& prepare,
           BatchClock::time_point deadline) {
    for (Request& request : requests) {
      calls.push_back(
          std::make_unique<BlockingCall<Request, Response>>(runner, task, std::move(request)));
      // A refusal is the call's outcome too: Wait gives it.
      calls.back()->Start(prepare, deadline, nullptr).IgnoreError();
    }
    for (auto& call : calls) call->Wait();
  }

  // Writes the first failure, if any; true when there was one.
  bool WriteFailure(httplib::Response& res, Dialect dialect, const std::string& field) {
    for (size_t i = 0; i < calls.size(); ++i) {
      const absl::Status& status = calls[i]->Wait();
      if (status.ok()) continue;
      const std::string name = calls.size() == 1 ? field : absl::StrCat(field, "[", i, "]");
      WriteError(res, dialect, http::RenameDocumentField(status, name), calls[i]->refusal());
      return true;
    }
    return false;
  }

  std::vector<const v1::CostReport*> Costs() const {
    std::vector<const v1::CostReport*> costs;
    for (const auto& call : calls) costs.push_back(&call->response().cost());
    return costs;
  }
};

template <typename Message>
absl::StatusOr<Message> FromJson(const Json& json, const char* field) {
  Message message;
  if (json.is_null()) return message;
  if (!json.is_object()) {
    return FieldError(field, absl::StrCat("must be an object, not ", json.type_name()));
  }
  google::protobuf::util::JsonParseOptions options;
  options.ignore_unknown_fields = false;
  const auto status = google::protobuf::util::JsonStringToMessage(json.dump(), &message, options);
  if (!status.ok()) return FieldError(field, std::string(status.message()));
  return message;
}

}  // namespace

// ---- Routes ----

class HttpApi::Routes {
 public:
  explicit Routes(const HttpApiOptions& options) : options_(options) {}

  void Attach(RequestRunner& runner, const ModelRegistry& registry) {
    backend_storage_ = std::make_unique<Backend>(Backend{runner, registry});
    backend_.store(backend_storage_.get(), std::memory_order_release);
  }

  void Install(httplib::Server& server) {
    const int threads = std::max(1, options_.threads);
    server.new_task_queue = [threads] { return new httplib::ThreadPool(threads); };
    server.Get("/openapi.json", [](const httplib::Request&, httplib::Response& res) {
      res.set_content(std::string(OpenApiDocument()), kJson);
    });
    server.Get("/health", [this](const httplib::Request&, httplib::Response& res) {
      const Backend* backend = this->backend();
      if (backend == nullptr || !backend->runner.ready()) {
        return WriteError(res, Dialect::kTei, RequestRunner::NotReady());
      }
      res.status = 200;
    });
    Route(server, "POST", "/embed", Dialect::kTei, &Routes::Embed);
    // TEI's route for the model's own task; InferenceClient posts here.
    Route(server, "POST", "/", Dialect::kTei, &Routes::Embed);
    Route(server, "POST", "/predict", Dialect::kTei, &Routes::Predict);
    Route(server, "POST", "/tokenize", Dialect::kTei, &Routes::Tokenize);
    Route(server, "GET", "/info", Dialect::kTei, &Routes::Info);
    Route(server, "POST", "/summarize", Dialect::kTei, &Routes::Summarize);
    Route(server, "POST", "/v1/embeddings", Dialect::kOpenAi, &Routes::OpenAiEmbeddings);
    Route(server, "GET", "/v1/models", Dialect::kOpenAi, &Routes::OpenAiModels);
  }

 private:
  struct Backend {
    RequestRunner& runner;
    const ModelRegistry& registry;
  };
  using Handler = void (Routes::*)(const Backend&, const httplib::Request&, httplib::Response&,
                                   Dialect);

  const Backend* backend() const { return backend_.load(std::memory_order_acquire); }

  void Route(httplib::Server& server, const char* method, const char* path, Dialect dialect,
             Handler handler) {
    if (std::strcmp(method, "GET") == 0) {
      server.Get(path,
                 [this, dialect, handler](const httplib::Request& req, httplib::Response& res) {
                   const Backend* backend = this->backend();
                   if (backend == nullptr)
                     return WriteError(res, dialect, 503, "models are still loading");
                   if (absl::Status allowed =
                           backend->runner.Authenticate(req.get_header_value("Authorization"));
                       !allowed.ok()) {
                     return WriteError(res, dialect, allowed);
                   }
                   (this->*handler)(*backend, req, res, dialect);
                 });
      return;
    }
    // POST bodies are read here, whatever their Content-Type: httplib's own
    // reading would cap form-encoded bodies (what `curl -d` sends) at 8 KiB
    // and leave multipart ones to parse.
    server.Post(path, [this, dialect, handler](const httplib::Request& req, httplib::Response& res,
                                               const httplib::ContentReader& reader) {
      httplib::Request request = req;
      bool read = false;
      if (req.is_multipart_form_data()) {
        // Read to its end, so the connection stays in step, then refuse.
        read = reader([](const httplib::MultipartFormData&) { return true; },
                      [](const char*, size_t) { return true; });
        if (read) {
          return WriteError(res, dialect, 415,
                            "body: must be a JSON object (Content-Type: application/json), "
                            "not multipart/form-data");
        }
      } else {
        read = reader([&request](const char* data, size_t size) {
          request.body.append(data, size);
          return true;
        });
      }
      if (!read) {
        // Over the size cap (httplib set 413) or cut short: the rest of the
        // body was not read, so this connection cannot carry another request.
        res.set_header("Connection", "close");
        const int status = res.status == 413 ? 413 : 400;
        return WriteError(
            res, dialect, status,
            status == 413 ? BodyTooLarge(options_.max_body_bytes) : "body: could not be read");
      }
      const Backend* backend = this->backend();
      if (backend == nullptr) return WriteError(res, dialect, 503, "models are still loading");
      (this->*handler)(*backend, request, res, dialect);
    });
  }

  // The request's deadline: now + x-docsparse-timeout-ms, capped by (and
  // by default) the server's timeout.
  absl::StatusOr<BatchClock::time_point> Deadline(const httplib::Request& req) const {
    std::chrono::milliseconds timeout = options_.timeout;
    if (req.has_header(kTimeoutHeader)) {
      int64_t ms = 0;
      if (!absl::SimpleAtoi(req.get_header_value(kTimeoutHeader), &ms) || ms <= 0) {
        return FieldError(kTimeoutHeader, "must be a positive integer of milliseconds");
      }
      timeout = std::min(timeout, std::chrono::milliseconds(ms));
    }
    return BatchClock::now() + timeout;
  }

  // A task request's body, the fields every route shares, and its deadline.
  struct Parsed {
    Json body;
    http::CommonFields common;
    BatchClock::time_point deadline;
  };

  // Reads them; nullopt after writing the error. The caller must hold a token for the model it
  // names (when the server requires tokens); its credentials are checked before its body is read.
  // A request refused here is counted under `task` (none for /tokenize) as
  // gRPC counts its refusals: the model it names, or "unknown" when its body
  // could not be read.
  std::optional<Parsed> ReadRequest(const Backend& backend, const httplib::Request& req,
                                    httplib::Response& res, Dialect dialect,
                                    std::optional<MetricTask> task) const {
    const auto refuse = [&](const absl::Status& status, const std::string* model) {
      if (task.has_value()) {
        RequestRecorder(
            model != nullptr ? backend.runner.MetricsFor(*model) : backend.runner.UnknownMetrics(),
            *task)
            .Finish(status.code(), nullptr);
      }
      WriteError(res, dialect, status);
      return std::nullopt;
    };
    const std::string authorization = req.get_header_value("Authorization");
    if (absl::Status allowed = backend.runner.Authenticate(authorization); !allowed.ok()) {
      return refuse(allowed, nullptr);
    }
    absl::StatusOr<Json> body = http::ParseBody(req.body);
    if (!body.ok()) return refuse(body.status(), nullptr);
    absl::StatusOr<http::CommonFields> common = http::ReadCommon(*body);
    if (!common.ok()) return refuse(common.status(), nullptr);
    if (absl::Status allowed = backend.runner.Authorize(authorization, common->model);
        !allowed.ok()) {
      return refuse(allowed, &common->model);
    }
    absl::StatusOr<BatchClock::time_point> deadline = Deadline(req);
    if (!deadline.ok()) return refuse(deadline.status(), &common->model);
    return Parsed{*std::move(body), *std::move(common), *deadline};
  }

  // ---- Embeddings ----

  // The embed-specific fields into a request template (document unset).
  static absl::StatusOr<v1::EmbedRequest> EmbedTemplate(const Json& body,
                                                        const http::CommonFields& common) {
    v1::EmbedRequest request;
    request.set_model(common.model);
    *request.mutable_budget() = common.budget;
    *request.mutable_options() = common.options;
    absl::StatusOr<std::optional<bool>> normalize = http::ReadBool(body, "normalize");
    if (!normalize.ok()) return normalize.status();
    if (normalize->has_value()) request.set_normalize(**normalize);
    absl::StatusOr<std::optional<std::string>> pooling = http::ReadString(body, "pooling");
    if (!pooling.ok()) return pooling.status();
    if (pooling->has_value()) {
      if (**pooling == "cls") {
        request.set_pooling(v1::POOLING_CLS);
      } else if (**pooling == "mean") {
        request.set_pooling(v1::POOLING_MEAN);
      } else {
        return FieldError("pooling",
                          absl::StrCat(http::Quoted(**pooling), " is not one of cls, mean"));
      }
    }
    return request;
  }

  using EmbedCalls = CallBatch<v1::EmbedRequest, v1::EmbedResponse>;

  static void RunEmbeds(const Backend& backend, const v1::EmbedRequest& request_template,
                        std::vector<v1::Document> documents, BatchClock::time_point deadline,
                        EmbedCalls* calls) {
    std::vector<v1::EmbedRequest> requests;
    for (v1::Document& document : documents) {
      requests.push_back(request_template);
      *requests.back().mutable_document() = std::move(document);
    }
    calls->Run(
        backend.runner, MetricTask::kEmbed, std::move(requests),
        [](const DocumentTasks& tasks, const v1::EmbedRequest& request,
           BatchClock::time_point received, v1::EmbedResponse* response, Completion complete) {
          return tasks.PrepareEmbed(request, received, response, std::move(complete));
        },
        deadline);
  }

  static std::vector<v1::Document> TextDocuments(const std::vector<std::string>& texts) {
    std::vector<v1::Document> documents(texts.size());
    for (size_t i = 0; i < texts.size(); ++i) documents[i].set_text(texts[i]);
    return documents;
  }

  // TEI: {"inputs": str | [str], "normalize", "truncate", ...} -> [[float]].
  void Embed(const Backend& backend, const httplib::Request& req, httplib::Response& res,
             Dialect dialect) {
    std::optional<Parsed> parsed = ReadRequest(backend, req, res, dialect, MetricTask::kEmbed);
    if (!parsed.has_value()) return;
    const auto& [body, common, deadline] = *parsed;
    absl::StatusOr<std::vector<std::string>> texts =
        http::ReadTexts(body, "inputs", options_.max_inputs);
    if (!texts.ok()) return WriteError(res, dialect, texts.status());
    absl::StatusOr<v1::EmbedRequest> request = EmbedTemplate(body, common);
    if (!request.ok()) return WriteError(res, dialect, request.status());
    EmbedCalls calls;
    RunEmbeds(backend, *request, TextDocuments(*texts), deadline, &calls);
    if (calls.WriteFailure(res, dialect, "inputs")) return;
    Json vectors = Json::array();
    for (const auto& call : calls.calls) {
      const auto& embedding = call->response().embedding();
      vectors.push_back(std::vector<float>(embedding.begin(), embedding.end()));
    }
    SetCostHeaders(res, calls.Costs());
    WriteJson(res, vectors);
  }

  // OpenAI: input is a string, [str], [int] (one tokenized document) or
  // [[int]].
  absl::StatusOr<std::vector<v1::Document>> OpenAiInputs(const Json& body) const {
    const auto it = body.find("input");
    if (it == body.end() || it->is_null()) return FieldError("input", "is required");
    const auto token_ids = [](const Json& ids,
                              const std::string& field) -> absl::StatusOr<v1::Document> {
      v1::Document document;
      for (const Json& id : ids) {
        if (!id.is_number_integer() || id.get<int64_t>() < 0 ||
            id.get<int64_t>() > std::numeric_limits<int32_t>::max()) {
          return FieldError(field, "must hold token ids (integers in [0, 2^31))");
        }
        document.mutable_token_ids()->add_ids(static_cast<int32_t>(id.get<int64_t>()));
      }
      return document;
    };
    std::vector<v1::Document> documents;
    if (it->is_string()) {
      documents.emplace_back().set_text(it->get<std::string>());
      return documents;
    }
    if (!it->is_array()) {
      return FieldError("input",
                        absl::StrCat("must be a string or an array, not ", it->type_name()));
    }
    if (it->empty()) return FieldError("input", "must not be empty");
    if ((*it)[0].is_number()) {
      absl::StatusOr<v1::Document> document = token_ids(*it, "input");
      if (!document.ok()) return document.status();
      documents.push_back(*std::move(document));
      return documents;
    }
    if (it->size() > options_.max_inputs) {
      return FieldError("input", absl::StrCat("has ", it->size(), " inputs; at most ",
                                              options_.max_inputs, " per request"));
    }
    for (size_t i = 0; i < it->size(); ++i) {
      const Json& element = (*it)[i];
      const std::string field = absl::StrCat("input[", i, "]");
      if (element.is_string()) {
        documents.emplace_back().set_text(element.get<std::string>());
      } else if (element.is_array() && !element.empty()) {
        absl::StatusOr<v1::Document> document = token_ids(element, field);
        if (!document.ok()) return document.status();
        documents.push_back(*std::move(document));
      } else {
        return FieldError(field, "must be a string or a non-empty array of token ids");
      }
    }
    return documents;
  }

  void OpenAiEmbeddings(const Backend& backend, const httplib::Request& req, httplib::Response& res,
                        Dialect dialect) {
    std::optional<Parsed> parsed = ReadRequest(backend, req, res, dialect, MetricTask::kEmbed);
    if (!parsed.has_value()) return;
    const auto& [body, common, deadline] = *parsed;
    absl::StatusOr<std::vector<v1::Document>> documents = OpenAiInputs(body);
    if (!documents.ok()) return WriteError(res, dialect, documents.status());
    absl::StatusOr<std::optional<std::string>> format = http::ReadString(body, "encoding_format");
    if (!format.ok()) return WriteError(res, dialect, format.status());
    const std::string encoding = format->value_or("float");
    if (encoding != "float" && encoding != "base64") {
      return WriteError(
          res, dialect,
          FieldError("encoding_format",
                     absl::StrCat(http::Quoted(encoding), " is not one of float, base64")));
    }
    absl::StatusOr<std::optional<int64_t>> dimensions = http::ReadInteger(body, "dimensions");
    if (!dimensions.ok()) return WriteError(res, dialect, dimensions.status());
    if (absl::StatusOr<std::optional<std::string>> user = http::ReadString(body, "user");
        !user.ok()) {
      return WriteError(res, dialect, user.status());
    }
    absl::StatusOr<v1::EmbedRequest> request = EmbedTemplate(body, common);
    if (!request.ok()) return WriteError(res, dialect, request.status());
    absl::StatusOr<const ServedModel*> model = backend.registry.Find(common.model);
    if (!model.ok()) {
      return WriteError(res, dialect,
                        absl::IsNotFound(model.status())
                            ? absl::NotFoundError(absl::StrCat("model: ", model.status().message()))
                            : model.status());
    }
    if (dimensions->has_value() && **dimensions != (*model)->config.hidden_size) {
      return WriteError(
          res, dialect,
          FieldError("dimensions",
                     absl::StrCat("this model's embeddings have ", (*model)->config.hidden_size,
                                  " dimensions; it cannot shorten them")));
    }
    EmbedCalls calls;
    RunEmbeds(backend, *request, *std::move(documents), deadline, &calls);
    if (calls.WriteFailure(res, dialect, "input")) return;
    Json data = Json::array();
    int64_t tokens = 0;
    std::string model_name;
    for (size_t i = 0; i < calls.calls.size(); ++i) {
      const v1::EmbedResponse& response = calls.calls[i]->response();
      Json item = {{"object", "embedding"}, {"index", i}};
      if (encoding == "base64") {
        // Little-endian float32, as OpenAI's own base64 encoding.
        const auto& values = response.embedding();
        item["embedding"] = absl::Base64Escape(absl::string_view(
            reinterpret_cast<const char*>(values.data()), values.size() * sizeof(float)));
      } else {
        item["embedding"] =
            std::vector<float>(response.embedding().begin(), response.embedding().end());
      }
      item["cost"] = http::CostJson(response.cost());
      data.push_back(std::move(item));
      tokens += response.cost().input_tokens();
      model_name = response.model();
    }
    SetCostHeaders(res, calls.Costs());
    WriteJson(res, {{"object", "list"},
                    {"data", std::move(data)},
                    {"model", model_name},
                    {"usage", {{"prompt_tokens", tokens}, {"total_tokens", tokens}}}});
  }

  void OpenAiModels(const Backend& backend, const httplib::Request&, httplib::Response& res,
                    Dialect) {
    Json data = Json::array();
    for (const ServedModel* model : backend.registry.models()) {
      data.push_back(
          {{"id", model->name}, {"object", "model"}, {"created", 0}, {"owned_by", "docsparse"}});
    }
    WriteJson(res, {{"object", "list"}, {"data", std::move(data)}});
  }

  // ---- Zero-shot classification ----

  // TEI's /predict with docsparse's zero-shot labels: {"inputs": str |
  // [str], "labels": [str], "temperature", "raw_scores"}. One input: a list
  // of {label, score}, best first; several: a list of such lists. (TEI reads
  // a two-string list as a sentence pair; docsparse has no pair classifier,
  // so a list is always a batch of documents.)
  void Predict(const Backend& backend, const httplib::Request& req, httplib::Response& res,
               Dialect dialect) {
    std::optional<Parsed> parsed = ReadRequest(backend, req, res, dialect, MetricTask::kClassify);
    if (!parsed.has_value()) return;
    const auto& [body, common, deadline] = *parsed;
    absl::StatusOr<std::vector<std::string>> texts =
        http::ReadTexts(body, "inputs", options_.max_inputs);
    if (!texts.ok()) return WriteError(res, dialect, texts.status());
    v1::ClassifyRequest request;
    request.set_model(common.model);
    *request.mutable_budget() = common.budget;
    *request.mutable_options() = common.options;
    if (const auto it = body.find("labels"); it != body.end() && !it->is_null()) {
      absl::StatusOr<std::vector<std::string>> labels = http::ReadTexts(body, "labels", 1024);
      if (!labels.ok()) return WriteError(res, dialect, labels.status());
      for (std::string& label : *labels) request.add_labels(std::move(label));
    }
    absl::StatusOr<std::optional<double>> temperature = http::ReadNumber(body, "temperature");
    if (!temperature.ok()) return WriteError(res, dialect, temperature.status());
    if (temperature->has_value()) request.set_temperature(static_cast<float>(**temperature));
    absl::StatusOr<std::optional<bool>> raw_scores = http::ReadBool(body, "raw_scores");
    if (!raw_scores.ok()) return WriteError(res, dialect, raw_scores.status());
    std::vector<v1::ClassifyRequest> requests;
    for (const std::string& text : *texts) {
      requests.push_back(request);
      requests.back().mutable_document()->set_text(text);
    }
    CallBatch<v1::ClassifyRequest, v1::ClassifyResponse> calls;
    calls.Run(
        backend.runner, MetricTask::kClassify, std::move(requests),
        [](const DocumentTasks& tasks, const v1::ClassifyRequest& request,
           BatchClock::time_point received, v1::ClassifyResponse* response, Completion complete) {
          return tasks.PrepareClassify(request, received, response, std::move(complete));
        },
        deadline);
    if (calls.WriteFailure(res, dialect, "inputs")) return;
    Json results = Json::array();
    for (const auto& call : calls.calls) {
      Json scores = Json::array();
      for (const v1::LabelScore& score : call->response().scores()) {
        scores.push_back(
            {{"label", score.label()},
             {"score", raw_scores->value_or(false) ? score.similarity() : score.score()}});
      }
      results.push_back(std::move(scores));
    }
    SetCostHeaders(res, calls.Costs());
    WriteJson(res, results.size() == 1 ? results[0] : results);
  }

  // ---- Tokenize ----

  // TEI: {"inputs": str | [str], "add_special_tokens": bool} -> one list of
  // {id, text, special, start, stop} per input. Our tokenizers keep no
  // offsets: start and stop are null, text is the token decoded alone.
  void Tokenize(const Backend& backend, const httplib::Request& req, httplib::Response& res,
                Dialect dialect) {
    std::optional<Parsed> parsed = ReadRequest(backend, req, res, dialect, std::nullopt);
    if (!parsed.has_value()) return;
    const auto& [body, common, deadline] = *parsed;
    absl::StatusOr<std::vector<std::string>> texts =
        http::ReadTexts(body, "inputs", options_.max_inputs);
    if (!texts.ok()) return WriteError(res, dialect, texts.status());
    absl::StatusOr<std::optional<bool>> special = http::ReadBool(body, "add_special_tokens");
    if (!special.ok()) return WriteError(res, dialect, special.status());
    absl::StatusOr<const ServedModel*> model = backend.registry.Find(common.model);
    if (!model.ok()) return WriteError(res, dialect, model.status());
    const Tokenizer& tokenizer = *(*model)->tokenizer;
    const size_t max_bytes =
        static_cast<size_t>(backend.runner.tasks().limits().max_document_bytes);
    Json lists = Json::array();
    for (size_t i = 0; i < texts->size(); ++i) {
      const std::string& text = (*texts)[i];
      if (text.size() > max_bytes) {
        return WriteError(res, dialect,
                          absl::ResourceExhaustedError(
                              absl::StrCat("inputs: ", text.size(), " bytes; the limit is ",
                                           max_bytes, " (--max_document_bytes)")));
      }
      std::vector<int32_t> ids = tokenizer.Encode(text);
      std::vector<bool> is_special(ids.size(), false);
      if (special->value_or(true)) {
        std::vector<int32_t> framed = tokenizer.FramePrefix();
        is_special.assign(framed.size(), true);
        framed.insert(framed.end(), ids.begin(), ids.end());
        is_special.resize(framed.size(), false);
        for (int32_t id : tokenizer.FrameSuffix()) {
          framed.push_back(id);
          is_special.push_back(true);
        }
        ids = std::move(framed);
      }
      Json tokens = Json::array();
      for (size_t t = 0; t < ids.size(); ++t) {
        tokens.push_back({{"id", ids[t]},
                          {"text", tokenizer.Decode({ids[t]})},
                          {"special", static_cast<bool>(is_special[t])},
                          {"start", nullptr},
                          {"stop", nullptr}});
      }
      lists.push_back(std::move(tokens));
    }
    WriteJson(res, lists);
  }

  // ---- Info ----

  void Info(const Backend& backend, const httplib::Request&, httplib::Response& res, Dialect) {
    v1::ListModelsResponse listed;
    backend.runner.tasks().ListModels(&listed);
    absl::StatusOr<const ServedModel*> default_model = backend.registry.Find("");
    Json models = Json::array();
    Json info = {{"version", options_.version},
                 {"max_client_batch_size", options_.max_inputs},
                 {"max_concurrent_requests", options_.threads},
                 {"tokenization_workers", options_.threads}};
    for (const v1::ModelInfo& model : listed.models()) {
      Json entry = {{"id", model.name()},
                    {"architecture", model.architecture()},
                    {"attention", http::AttentionName(model.attention())},
                    {"max_input_length", model.max_document_tokens()},
                    {"max_position_tokens", model.max_position_tokens()},
                    {"hidden_size", model.hidden_size()},
                    {"ready", model.ready()}};
      Json tasks = Json::array();
      for (int task : model.tasks()) {
        std::string name = v1::Task_Name(v1::Task(task));
        tasks.push_back(Lower(name.substr(std::strlen("TASK_"))));
      }
      entry["tasks"] = std::move(tasks);
      if (default_model.ok() && (*default_model)->name == model.name()) {
        info["model_id"] = model.name();
        info["model_dtype"] = PrecisionName((*default_model)->precision());
        info["max_input_length"] = model.max_document_tokens();
        info["auto_truncate"] = model.default_overflow() == v1::OVERFLOW_TRUNCATE;
        info["model_type"] = {
            {"embedding",
             {{"pooling", model.default_pooling() == v1::POOLING_CLS ? "cls" : "mean"}}}};
      }
      models.push_back(std::move(entry));
    }
    info["docsparse"] = {{"models", std::move(models)}};
    WriteJson(res, info);
  }

  // ---- Summaries ----

  // {"inputs": str, "extractive": {max_sentences, diversity}, "generation":
  // {num_beams, max_length, ...} (the proto's fields), "stream": bool}.
  void Summarize(const Backend& backend, const httplib::Request& req, httplib::Response& res,
                 Dialect dialect) {
    std::optional<Parsed> parsed = ReadRequest(backend, req, res, dialect, MetricTask::kSummarize);
    if (!parsed.has_value()) return;
    const auto& [body, common, deadline] = *parsed;
    absl::StatusOr<std::optional<std::string>> text = http::ReadString(body, "inputs");
    if (!text.ok()) return WriteError(res, dialect, text.status());
    if (!text->has_value()) return WriteError(res, dialect, FieldError("inputs", "is required"));
    v1::SummarizeRequest request;
    request.set_model(common.model);
    *request.mutable_budget() = common.budget;
    *request.mutable_options() = common.options;
    request.mutable_document()->set_text(**text);
    const auto generation = body.find("generation");
    absl::StatusOr<v1::GenerationParams> params = FromJson<v1::GenerationParams>(
        generation == body.end() ? Json() : *generation, "generation");
    if (!params.ok()) return WriteError(res, dialect, params.status());
    if (generation != body.end()) *request.mutable_generation() = *params;
    const auto extractive = body.find("extractive");
    absl::StatusOr<v1::ExtractiveParams> extractive_params = FromJson<v1::ExtractiveParams>(
        extractive == body.end() ? Json() : *extractive, "extractive");
    if (!extractive_params.ok()) return WriteError(res, dialect, extractive_params.status());
    if (extractive != body.end()) *request.mutable_extractive() = *extractive_params;
    absl::StatusOr<std::optional<bool>> stream = http::ReadBool(body, "stream");
    if (!stream.ok()) return WriteError(res, dialect, stream.status());
    if (stream->value_or(false)) return Stream(backend, std::move(request), deadline, res, dialect);

    CallBatch<v1::SummarizeRequest, v1::SummarizeResponse> calls;
    calls.Run(
        backend.runner, MetricTask::kSummarize, {std::move(request)},
        [](const DocumentTasks& tasks, const v1::SummarizeRequest& request,
           BatchClock::time_point received, v1::SummarizeResponse* response, Completion complete) {
          return tasks.PrepareSummarize(request, received, response, std::move(complete));
        },
        deadline);
    if (calls.WriteFailure(res, dialect, "inputs")) return;
    SetCostHeaders(res, calls.Costs());
    WriteJson(res, SummaryJson(calls.calls[0]->response()));
  }

  static Json SummaryJson(const v1::SummarizeResponse& response) {
    Json sentences = Json::array();
    for (const v1::ExtractedSentence& sentence : response.sentences()) {
      sentences.push_back({{"index", sentence.index()},
                           {"text", sentence.text()},
                           {"score", sentence.score()},
                           {"begin_byte", sentence.begin_byte()},
                           {"end_byte", sentence.end_byte()}});
    }
    return {
        {"model", response.model()},
        {"summary", response.summary()},
        {"kind", response.kind() == v1::SUMMARY_KIND_ABSTRACTIVE ? "abstractive" : "extractive"},
        {"sentences", std::move(sentences)},
        {"token_ids",
         std::vector<int32_t>(response.token_ids().begin(), response.token_ids().end())},
        {"cost", http::CostJson(response.cost())}};
  }

  // Server-Sent Events: one `data:` event per text piece as greedy decoding
  // chooses tokens ({"text", "token_ids"}), then a last one with "done":
  // true, the rest of the text, the whole summary and the cost report; an
  // error after the stream started is an `event: error`. A request refused
  // before it started gets a plain JSON error with its status instead.
  class SummaryEvents {
   public:
    // A token chosen (compute thread).
    void Push(int32_t token, const std::string& text) {
      Json event = {{"text", text}, {"token_ids", {token}}};
      MutexLock lock(&mu_);
      streamed_bytes_ += text.size();
      events_.push_back("data: " + event.dump(-1, ' ', false, Json::error_handler_t::replace) +
                        "\n\n");
    }
    // How it ended (once).
    void Finish(const absl::Status& status, const v1::SummarizeResponse& response) {
      MutexLock lock(&mu_);
      if (status.ok()) {
        const std::string& summary = response.summary();
        Json last = SummaryJson(response);
        last["text"] = streamed_bytes_ < summary.size() ? summary.substr(streamed_bytes_) : "";
        last["done"] = true;
        events_.push_back("data: " + last.dump(-1, ' ', false, Json::error_handler_t::replace) +
                          "\n\n");
      } else {
        const int http_status = HttpStatusOf(status, Refusal::kNone);
        const Json error = {{"error", std::string(status.message())},
                            {"error_type", TeiErrorType(http_status)},
                            {"status", http_status}};
        events_.push_back("event: error\ndata: " + error.dump() + "\n\n");
      }
      finished_ = true;
    }
    // The next event, or nullopt once everything is sent; waits for one.
    std::optional<std::string> Next() {
      MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](SummaryEvents* self) ABSL_EXCLUSIVE_LOCKS_REQUIRED(self->mu_) {
            return !self->events_.empty() || self->finished_;
          },
          this));
      if (events_.empty()) return std::nullopt;
      std::string event = std::move(events_.front());
      events_.pop_front();
      return event;
    }
    void ClientGone() { client_gone_.store(true); }
    bool client_gone() const { return client_gone_.load(); }

   private:
    Mutex mu_;
    std::deque<std::string> events_ ABSL_GUARDED_BY(mu_);
    size_t streamed_bytes_ ABSL_GUARDED_BY(mu_) = 0;
    bool finished_ ABSL_GUARDED_BY(mu_) = false;
    std::atomic<bool> client_gone_{false};
  };

  // Gives the runner's stream slot back; the first member of StreamState,
  // so it goes last, once the call is done.
  struct StreamSlot {
    RequestRunner& runner;
    ~StreamSlot() { runner.ReleaseStream(); }
  };

  // Takes a stream slot the caller acquired.
  struct StreamState {
    StreamState(RequestRunner& runner, v1::SummarizeRequest request)
        : slot{runner}, call(runner, MetricTask::kSummarizeStream, std::move(request)) {}
    StreamSlot slot;
    SummaryEvents events;
    BlockingCall<v1::SummarizeRequest, v1::SummarizeResponse> call;
  };

  void Stream(const Backend& backend, v1::SummarizeRequest request, BatchClock::time_point deadline,
              httplib::Response& res, Dialect dialect) {
    // Slots are shared with gRPC's SummarizeStream; none free is "busy": 429.
    if (absl::Status slot = backend.runner.AcquireStream(); !slot.ok()) {
      return WriteError(res, dialect, slot, Refusal::kQueueFull);
    }
    auto state = std::make_shared<StreamState>(backend.runner, std::move(request));
    SummaryEvents* events = &state->events;
    // The job's completion finishes the events first: once the call is
    // done, whoever holds the last reference may free them.
    const absl::Status refused = state->call.Start(
        [events](const DocumentTasks& tasks, const v1::SummarizeRequest& request,
                 BatchClock::time_point received, v1::SummarizeResponse* response,
                 Completion complete) {
          return tasks.PrepareSummarize(
              request, received, response,
              [events, response, complete = std::move(complete)](const absl::Status& status) {
                events->Finish(status, *response);
                complete(status);
              },
              [events](int32_t token, const std::string& text) { events->Push(token, text); });
        },
        deadline, [events] { return events->client_gone(); });
    // Refused before it started: a plain error, with its status.
    if (!refused.ok()) {
      return WriteError(res, dialect, http::RenameDocumentField(refused, "inputs"),
                        state->call.refusal());
    }
    res.status = 200;
    res.set_header("Cache-Control", "no-cache");
    res.set_chunked_content_provider("text/event-stream", [state](size_t, httplib::DataSink& sink) {
      std::optional<std::string> event = state->events.Next();
      if (!event.has_value()) {
        state->call.Wait();
        sink.done();
        return true;
      }
      if (!sink.write(event->data(), event->size())) {
        state->events.ClientGone();
        return false;
      }
      return true;
    });
  }

  const HttpApiOptions& options_;
  std::unique_ptr<Backend> backend_storage_;
  std::atomic<const Backend*> backend_{nullptr};
};

std::string HttpApi::BodyTooLarge(size_t max_body_bytes) {
  return absl::StrCat("body: larger than the limit of ", max_body_bytes,
                      " bytes (--max_http_body_bytes)");
}

void HttpApi::WriteRouteError(const std::string& path, int status, const std::string& message,
                              httplib::Response& res) {
  docsparse::WriteError(res, absl::StartsWith(path, "/v1/") ? Dialect::kOpenAi : Dialect::kTei,
                        status, message);
}

HttpApi::HttpApi(HttpApiOptions options)
    : options_(std::move(options)), routes_(std::make_unique<Routes>(options_)) {}

HttpApi::~HttpApi() = default;

void HttpApi::Install(httplib::Server& server) { routes_->Install(server); }

void HttpApi::Attach(RequestRunner& runner, const ModelRegistry& registry) {
  routes_->Attach(runner, registry);
}

}  // namespace docsparse
