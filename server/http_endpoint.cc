#include "server/http_endpoint.h"

#include <httplib.h>

#include <chrono>

#include "absl/strings/str_cat.h"

namespace docsparse {

absl::StatusOr<std::unique_ptr<HttpEndpoint>> HttpEndpoint::Start(
    const std::string& host, int port, std::function<std::string()> render_metrics,
    std::function<bool()> ready) {
  std::unique_ptr<HttpEndpoint> endpoint(new HttpEndpoint());
  endpoint->server_ = std::make_unique<httplib::Server>();
  httplib::Server& server = *endpoint->server_;
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
