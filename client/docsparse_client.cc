#include "client/docsparse_client.h"

#include <grpcpp/grpcpp.h>

#include "absl/strings/str_cat.h"

namespace docsparse {
namespace {

// The call's deadline and, when the client has one, its bearer token.
void Prepare(grpc::ClientContext* context, absl::Duration timeout, const std::string& token) {
  context->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  if (!token.empty()) context->AddMetadata("authorization", "Bearer " + token);
}

template <typename Response, typename Call>
absl::StatusOr<Response> Unary(absl::Duration timeout, const std::string& token, Call call) {
  grpc::ClientContext context;
  Prepare(&context, timeout, token);
  Response response;
  grpc::Status status = call(&context, &response);
  if (!status.ok()) return FromGrpcStatus(status);
  return response;
}

}  // namespace

absl::Status FromGrpcStatus(const grpc::Status& status) {
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()), status.error_message());
}

DocsparseClient::DocsparseClient(std::shared_ptr<grpc::Channel> channel, std::string token)
    : channel_(std::move(channel)),
      token_(std::move(token)),
      stub_(v1::DocumentService::NewStub(channel_)),
      health_(grpc::health::v1::Health::NewStub(channel_)) {}

absl::StatusOr<std::unique_ptr<DocsparseClient>> DocsparseClient::Connect(
    const std::string& target, absl::Duration connect_timeout, std::string bearer_token,
    std::shared_ptr<grpc::ChannelCredentials> credentials) {
  grpc::ChannelArguments args;
  // Documents and their reports can exceed gRPC's 4 MiB default.
  args.SetMaxReceiveMessageSize(64 << 20);
  args.SetMaxSendMessageSize(64 << 20);
  if (credentials == nullptr) credentials = grpc::InsecureChannelCredentials();
  std::shared_ptr<grpc::Channel> channel = grpc::CreateCustomChannel(target, credentials, args);
  if (!channel->WaitForConnected(absl::ToChronoTime(absl::Now() + connect_timeout))) {
    return absl::UnavailableError(absl::StrCat("cannot connect to docsparse-server at ", target));
  }
  return std::unique_ptr<DocsparseClient>(
      new DocsparseClient(std::move(channel), std::move(bearer_token)));
}

absl::StatusOr<v1::EmbedResponse> DocsparseClient::Embed(const v1::EmbedRequest& request,
                                                         absl::Duration timeout) {
  return Unary<v1::EmbedResponse>(
      timeout, token_,
      [&](grpc::ClientContext* c, v1::EmbedResponse* r) { return stub_->Embed(c, request, r); });
}

absl::StatusOr<v1::ClassifyResponse> DocsparseClient::Classify(const v1::ClassifyRequest& request,
                                                               absl::Duration timeout) {
  return Unary<v1::ClassifyResponse>(timeout, token_,
                                     [&](grpc::ClientContext* c, v1::ClassifyResponse* r) {
                                       return stub_->Classify(c, request, r);
                                     });
}

absl::StatusOr<v1::SummarizeResponse> DocsparseClient::Summarize(
    const v1::SummarizeRequest& request, absl::Duration timeout) {
  return Unary<v1::SummarizeResponse>(timeout, token_,
                                      [&](grpc::ClientContext* c, v1::SummarizeResponse* r) {
                                        return stub_->Summarize(c, request, r);
                                      });
}

absl::StatusOr<v1::SummarizeChunk> DocsparseClient::SummarizeStream(
    const v1::SummarizeRequest& request,
    const std::function<void(const v1::SummarizeChunk&)>& on_chunk, absl::Duration timeout) {
  grpc::ClientContext context;
  Prepare(&context, timeout, token_);
  std::unique_ptr<grpc::ClientReader<v1::SummarizeChunk>> reader =
      stub_->SummarizeStream(&context, request);
  v1::SummarizeChunk chunk, last;
  while (reader->Read(&chunk)) {
    on_chunk(chunk);
    last = chunk;
  }
  grpc::Status status = reader->Finish();
  if (!status.ok()) return FromGrpcStatus(status);
  return last;
}

absl::StatusOr<v1::ListModelsResponse> DocsparseClient::ListModels(absl::Duration timeout) {
  return Unary<v1::ListModelsResponse>(timeout, token_,
                                       [&](grpc::ClientContext* c, v1::ListModelsResponse* r) {
                                         return stub_->ListModels(c, v1::ListModelsRequest(), r);
                                       });
}

absl::StatusOr<grpc::health::v1::HealthCheckResponse::ServingStatus> DocsparseClient::Health(
    const std::string& service, absl::Duration timeout) {
  grpc::health::v1::HealthCheckRequest request;
  request.set_service(service);
  absl::StatusOr<grpc::health::v1::HealthCheckResponse> response =
      Unary<grpc::health::v1::HealthCheckResponse>(
          timeout, token_, [&](grpc::ClientContext* c, grpc::health::v1::HealthCheckResponse* r) {
            return health_->Check(c, request, r);
          });
  if (!response.ok()) return response.status();
  return response->status();
}

}  // namespace docsparse
