// The HTTP port: /metrics (Prometheus), /healthz (process alive), /readyz
// (models warmed up and not draining), and the JSON API's routes
// (server/http_api.h). Errors without a body of their own (unknown route,
// body over the size cap, a handler that threw) get a JSON one.
#ifndef DOCSPARSE_SERVER_HTTP_ENDPOINT_H_
#define DOCSPARSE_SERVER_HTTP_ENDPOINT_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"

namespace httplib {
class Server;
}

namespace docsparse {

class HttpApi;
class TlsReloader;
class TokenAuthenticator;

class HttpEndpoint {
 public:
  // Binds host:port (port 0 picks a free one) and serves on its own thread.
  // `api` (may be null) adds its routes; request bodies over
  // `max_body_bytes` are refused 413. With `infra_auth` (may be null: open),
  // /metrics, /healthz, /readyz and /health want a bearer token too. With
  // `tls` (may be null: plain HTTP; must outlive the endpoint) the port
  // speaks HTTPS only, with its certificates and client CAs.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(
      const std::string& host, int port, std::function<std::string()> render_metrics,
      std::function<bool()> ready, HttpApi* api, size_t max_body_bytes,
      const TokenAuthenticator* infra_auth, const TlsReloader* tls);
  ~HttpEndpoint();

  int port() const { return port_; }
  void Stop();

 private:
  HttpEndpoint() = default;

  std::unique_ptr<httplib::Server> server_;
  std::thread thread_;
  int port_ = 0;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_HTTP_ENDPOINT_H_
