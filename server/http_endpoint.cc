#include "server/http_endpoint.h"

#include <httplib.h>

#include <chrono>
#include <exception>
#include <nlohmann/json.hpp>
#include <string>

#include "absl/strings/str_cat.h"
#include "server/http_api.h"
#include "server/tls_files.h"
#include "server/token_auth.h"

namespace docsparse {

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    const std::string& host, int port, std::function<std::string()> render_metrics,
    std::function<bool()> ready, HttpApi* api, size_t max_body_bytes,
    const TokenAuthenticator* infra_auth, const TlsReloader* tls) {
  std::unique_ptr<HttpEndpoint> endpoint(new HttpEndpoint());
  if (tls == nullptr) {
    endpoint->server_ = std::make_unique<httplib::Server>();
  } else {
    auto https = std::make_unique<httplib::SSLServer>(
        [tls](SSL_CTX& context) { return tls->Install(context); });
    if (!https->is_valid()) return absl::InternalError("cannot set up TLS for the HTTP port");
    endpoint->server_ = std::move(https);
  }
  httplib::Server& server = *endpoint->server_;
  server.set_payload_max_length(max_body_bytes);
  if (api != nullptr) api->Install(server);
  // httplib answers some errors itself with an empty body (404 for unknown
  // routes, 413 for bodies over the cap, 400 for malformed HTTP): give them
  // a JSON one in the shape of the route's API. Errors our handlers wrote
  // keep theirs.
  server.set_error_handler(httplib::Server::HandlerWithResponse(
      [max_body_bytes](const httplib::Request& req, httplib::Response& res) {
        if (!res.body.empty()) return httplib::Server::HandlerResponse::Unhandled;
        std::string message;
        if (res.status == 404) {
          message = "no route " + req.method + " " + req.path;
        } else if (res.status == 413) {
          message = HttpApi::BodyTooLarge(max_body_bytes);
        } else {
          message = "HTTP status " + std::to_string(res.status);
        }
        HttpApi::WriteRouteError(req.path, res.status, message, res);
        return httplib::Server::HandlerResponse::Handled;
      }));
  // One request per connection. httplib 0.11 does not read a body sent with
  // GET, HEAD or OPTIONS, and a kept-alive connection would read those bytes
  // as its next request: a request-smuggling hole behind any proxy that
  // reuses connections, which no response header closes. Our requests are
  // milliseconds of compute at least, so a new connection each costs next
  // to nothing.
  server.set_keep_alive_max_count(1);
  if (infra_auth != nullptr) {
    server.set_pre_routing_handler([infra_auth](const httplib::Request& req,
                                                httplib::Response& res) {
      if (req.path != "/metrics" && req.path != "/healthz" && req.path != "/readyz" &&
          req.path != "/health") {
        return httplib::Server::HandlerResponse::Unhandled;
      }
      const absl::Status allowed = infra_auth->Authenticate(req.get_header_value("Authorization"));
      if (allowed.ok()) return httplib::Server::HandlerResponse::Unhandled;
      HttpApi::WriteRouteError(req.path, 401, std::string(allowed.message()), res);
      return httplib::Server::HandlerResponse::Handled;
    });
  }
  server.set_exception_handler(
      [](const httplib::Request&, httplib::Response& res, std::exception_ptr error) {
        std::string what = "unknown exception";
        try {
          if (error) std::rethrow_exception(error);
        } catch (const std::exception& e) {
          what = e.what();
        } catch (...) {
        }
        res.status = 500;
        res.set_content(
            nlohmann::json{{"error", "internal error: " + what}, {"error_type", "Backend"}}.dump(
                -1, ' ', false, nlohmann::json::error_handler_t::replace),
            "application/json");
      });
  server.Get("/metrics", [render_metrics](const httplib::Request&, httplib::Response& res) {
    res.set_content(render_metrics(), "text/plain; version=0.0.4; charset=utf-8");
  });
  server.Get("/healthz", [](const httplib::Request&, httplib::Response& res) {
    res.set_content("ok\n", "text/plain");
  });
  server.Get("/readyz", [ready](const httplib::Request&, httplib::Response& res) {
    const bool is_ready = ready();
    res.status = is_ready ? 200 : 503;
    res.set_content(is_ready ? "ready\n" : "not ready\n", "text/plain");
  });
  if (port == 0) {
    endpoint->port_ = server.bind_to_any_port(host);
  } else {
    endpoint->port_ = server.bind_to_port(host, port) ? port : -1;
  }
  if (endpoint->port_ < 0) {
    return absl::UnavailableError(absl::StrCat("cannot bind HTTP port ", host, ":", port));
  }
  endpoint->thread_ = std::thread([&server] { server.listen_after_bind(); });
  // Return only once the listener runs: a stop() that comes before it would
  // be lost and the thread would never end.
  while (!server.is_running()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  return endpoint;
}

void HttpEndpoint::Stop() {
  if (server_) server_->stop();
  if (thread_.joinable()) thread_.join();
}

HttpEndpoint::~HttpEndpoint() { Stop(); }

}  // namespace docsparse
