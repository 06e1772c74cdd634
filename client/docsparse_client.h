// C++ client of docsparse-server: one method per RPC, errors as absl::Status
// carrying the server's code and message.
#ifndef DOCSPARSE_CLIENT_DOCSPARSE_CLIENT_H_
#define DOCSPARSE_CLIENT_DOCSPARSE_CLIENT_H_

#include <grpcpp/security/credentials.h>

#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "docsparse/v1/docsparse.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"

namespace docsparse {

// Thread-safe: calls may be made from several threads at once.
class DocsparseClient {
 public:
  // Connects to `target` ("host:port"), waiting up to `connect_timeout` for
  // the channel to be ready. UNAVAILABLE if it is not. A `bearer_token` is
  // sent with every call (`authorization: Bearer TOKEN`), for servers run
  // with --auth_token_file. `credentials` (null: plain text) reach a server
  // run with TLS (client/channel_credentials.h).
  static absl::StatusOr<std::unique_ptr<DocsparseClient>> Connect(
      const std::string& target, absl::Duration connect_timeout = absl::Seconds(10),
      std::string bearer_token = "",
      std::shared_ptr<grpc::ChannelCredentials> credentials = nullptr);

  // Each call fails with DEADLINE_EXCEEDED after `timeout`.
  absl::StatusOr<v1::EmbedResponse> Embed(const v1::EmbedRequest& request,
                                          absl::Duration timeout = absl::Minutes(10));
  absl::StatusOr<v1::ClassifyResponse> Classify(const v1::ClassifyRequest& request,
                                                absl::Duration timeout = absl::Minutes(10));
  absl::StatusOr<v1::SummarizeResponse> Summarize(const v1::SummarizeRequest& request,
                                                  absl::Duration timeout = absl::Minutes(10));
  // Calls `on_chunk` for every chunk as it arrives; returns the last one.
  absl::StatusOr<v1::SummarizeChunk> SummarizeStream(
      const v1::SummarizeRequest& request,
      const std::function<void(const v1::SummarizeChunk&)>& on_chunk,
      absl::Duration timeout = absl::Minutes(10));
  absl::StatusOr<v1::ListModelsResponse> ListModels(absl::Duration timeout = absl::Seconds(30));
  // grpc.health.v1 status of `service` ("" is the whole server).
  absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> Health(
      const std::string& service = "", absl::Duration timeout = absl::Seconds(5));

 private:
  DocsparseClient(std::shared_ptr<grpc::Channel> channel, std::string token);

  std::shared_ptr<grpc::Channel> channel_;
  const std::string token_;
  std::unique_ptr<v1::DocumentService::Stub> stub_;
  std::unique_ptr<grpc::health::v1::Health::Stub> health_;
};

// gRPC status -> absl::Status with the same code and message.
absl::Status FromGrpcStatus(const grpc::Status& status);

}  // namespace docsparse

#endif  // DOCSPARSE_CLIENT_DOCSPARSE_CLIENT_H_
