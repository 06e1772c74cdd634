// The HTTP JSON API on the HTTP port, in the shapes existing clients speak:
//
//   TEI      POST /embed, POST /predict, POST /tokenize, GET /info, GET /health,
//            POST / (TEI's route for the model's own task: embed here, which is
//            where huggingface_hub's InferenceClient.feature_extraction posts)
//   OpenAI   POST /v1/embeddings, GET /v1/models
//   docsparse POST /summarize (Server-Sent Events with "stream": true)
//            GET /openapi.json (OpenAPI 3.0 document of every route)
//
// One path with gRPC: each document becomes the v1 request the gRPC API takes
// and runs through the same RequestRunner (validation, pricing, batcher,
// metrics), so a list of inputs is submitted at once and batched together.
// docsparse's own fields (budget, return_mask_map, overflow, model) are
// accepted everywhere; the cost report is in the body where the schema has
// room for it (OpenAI's data items, /predict's and /summarize's objects) and
// always in the x-docsparse-* headers (summed over a request's inputs).
//
// Errors are JSON: TEI's {"error", "error_type"} on TEI's and docsparse's
// routes, OpenAI's {"error": {"message", "type", "param", "code"}} on
// /v1/...; statuses as TEI maps them: 413 over a size limit, 422 invalid
// input (the message names the field), 424 inference failed, 429 queue full,
// 503 not ready or draining, 504 deadline passed; 404 unknown model or route.
//
// Deadlines: header x-docsparse-timeout-ms, else the server's default
// (--http_timeout_seconds). httplib cannot tell a unary handler that its
// client left, so the deadline is what bounds such a request's work; a
// streaming client that leaves is noticed at the next event and its
// decoding stops.
#ifndef DOCSPARSE_SERVER_HTTP_API_H_
#define DOCSPARSE_SERVER_HTTP_API_H_

#include <atomic>
#include <chrono>
#include <memory>
#include <string>

#include "server/model_registry.h"
#include "server/request_runner.h"

namespace httplib {
struct Response;
class Server;
}  // namespace httplib

namespace docsparse {

struct HttpApiOptions {
  std::string version;  // /info's version
  // Documents in one request (TEI's --max-client-batch-size).
  size_t max_inputs = 32;
  // Deadline of a request that sends no x-docsparse-timeout-ms, and the
  // longest one may ask for.
  std::chrono::milliseconds timeout{std::chrono::minutes(5)};
  // Handler threads: requests in progress at once (each waits for its
  // batch on its thread).
  int threads = 32;
  // Largest request body (--max_http_body_bytes), for the 413's message.
  size_t max_body_bytes = 32 << 20;
};

class HttpApi {
 public:
  explicit HttpApi(HttpApiOptions options);
  ~HttpApi();

  // Adds the routes to `server` and sizes its thread pool, before it
  // listens. Until Attach, every route answers 503.
  void Install(httplib::Server& server);

  // The models are loaded: serve them. Both must outlive the server.
  void Attach(RequestRunner& runner, const ModelRegistry& registry);

  // The 413's message.
  static std::string BodyTooLarge(size_t max_body_bytes);
  // An error body in the shape of the route at `path` (OpenAI's under /v1/,
  // else TEI's), for errors httplib raises before a route runs.
  static void WriteRouteError(const std::string& path, int status, const std::string& message,
                              httplib::Response& res);

 private:
  class Routes;

  const HttpApiOptions options_;
  std::unique_ptr<Routes> routes_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_HTTP_API_H_
