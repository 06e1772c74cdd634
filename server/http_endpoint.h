// The HTTP side port: /metrics (Prometheus), /healthz (process alive) and
// /readyz (models warmed up and not draining).
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

class HttpEndpoint {
 public:
  // Binds host:port (port 0 picks a free one) and serves on its own thread.
  static absl::StatusOr<std::unique_ptr<HttpEndpoint>> Start(
      const std::string& host, int port, std::function<std::string()> render_metrics,
      std::function<bool()> ready);
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
