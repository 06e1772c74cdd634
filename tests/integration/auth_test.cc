// Bearer-token authentication on the real server: gRPC (DocumentService,
// KServe) and the HTTP JSON API refuse a call without a known token
// (UNAUTHENTICATED / 401 with WWW-Authenticate) and a token outside its
// models (PERMISSION_DENIED / 403); health and metrics stay open unless
// --auth_protect_health_and_metrics.
#include <grpcpp/generic/generic_stub.h>
#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <future>
#include <nlohmann/json.hpp>
#include <string>

#include "docsparse/v1/docsparse.grpc.pb.h"
#include "inference/grpc_predict_v2.grpc.pb.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/http_client.h"
#include "tests/common/running_server.h"
#include "tests/common/server_process.h"

namespace docsparse {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::json;

constexpr char kAdmin[] = "admin-0123456789abcdef";
constexpr char kScoped[] = "scoped-0123456789abcdef";

httplib::Headers Bearer(const std::string& token) { return {{"Authorization", "Bearer " + token}}; }

class AuthTest : public ::testing::Test {
 protected:
  // `protect`: --auth_protect_health_and_metrics.
  void StartServer(bool protect) {
    ASSERT_TRUE(testing::MiniLmPresent());
    tokens_ =
        fs::path(::testing::TempDir()) / ("docsparse-tokens." + std::to_string(getpid()) + ".txt");
    std::ofstream(tokens_) << kAdmin << "\n" << kScoped << " minilm-lsg  # not minilm\n";
    std::vector<std::string> flags = {"--threads=2", "--auth_token_file=" + tokens_.string()};
    if (protect) flags.push_back("--auth_protect_health_and_metrics");
    ASSERT_TRUE(server_.Start(testing::ServerBinary(),
                              testing::LoopbackFlags(testing::MiniLmOnlyRepository(), flags)))
        << server_.output();
  }
  void TearDown() override { fs::remove(tokens_); }

  grpc::Status GrpcEmbed(const std::string& token, v1::EmbedResponse* response) {
    auto stub = v1::DocumentService::NewStub(
        grpc::CreateChannel(server_.grpc_address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext context;
    if (!token.empty()) context.AddMetadata("authorization", "Bearer " + token);
    v1::EmbedRequest request;
    request.set_model("minilm");
    request.mutable_document()->set_text("a short document");
    return stub->Embed(&context, request, response);
  }

  httplib::Result HttpEmbed(const httplib::Headers& headers) {
    return testing::HttpClient(server_.http_address())
        .Post("/v1/embeddings", headers, Json{{"model", "minilm"}, {"input", "text"}}.dump(),
              "application/json");
  }

  testing::ServerProcess server_;
  fs::path tokens_;
};

TEST_F(AuthTest, GrpcWantsAKnownTokenForTheModel) {
  ASSERT_NO_FATAL_FAILURE(StartServer(/*protect=*/false));
  v1::EmbedResponse response;
  EXPECT_EQ(GrpcEmbed("", &response).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  EXPECT_EQ(GrpcEmbed("wrong-0123456789abcdef", &response).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  const grpc::Status denied = GrpcEmbed(kScoped, &response);
  EXPECT_EQ(denied.error_code(), grpc::StatusCode::PERMISSION_DENIED);
  EXPECT_NE(denied.error_message().find("minilm"), std::string::npos);
  const grpc::Status ok = GrpcEmbed(kAdmin, &response);
  ASSERT_TRUE(ok.ok()) << ok.error_message();
  EXPECT_EQ(response.embedding_size(), 384);

  // ListModels wants a token; KServe's ModelInfer too.
  auto stub = v1::DocumentService::NewStub(
      grpc::CreateChannel(server_.grpc_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext anonymous;
  v1::ListModelsResponse models;
  EXPECT_EQ(stub->ListModels(&anonymous, v1::ListModelsRequest(), &models).error_code(),
            grpc::StatusCode::UNAUTHENTICATED);
  auto kserve = inference::GRPCInferenceService::NewStub(
      grpc::CreateChannel(server_.grpc_address(), grpc::InsecureChannelCredentials()));
  grpc::ClientContext infer_context;
  infer_context.AddMetadata("authorization", std::string("Bearer ") + kScoped);
  inference::ModelInferRequest infer;
  infer.set_model_name("minilm");
  inference::ModelInferResponse inferred;
  EXPECT_EQ(kserve->ModelInfer(&infer_context, infer, &inferred).error_code(),
            grpc::StatusCode::PERMISSION_DENIED);
  // Bytes that are not a request: UNAUTHENTICATED without a token (the
  // caller learns nothing of the message), INVALID_ARGUMENT with one.
  for (const std::string& token : {std::string(), std::string(kAdmin)}) {
    grpc::GenericStub generic(
        grpc::CreateChannel(server_.grpc_address(), grpc::InsecureChannelCredentials()));
    grpc::ClientContext garbage_context;
    if (!token.empty()) garbage_context.AddMetadata("authorization", "Bearer " + token);
    grpc::Slice slice(std::string("\x0f\x01\x02", 3));
    const grpc::ByteBuffer garbage(&slice, 1);
    grpc::ByteBuffer answer;
    std::promise<grpc::Status> done;
    generic.UnaryCall(&garbage_context, "/docsparse.v1.DocumentService/Embed", grpc::StubOptions(),
                      &garbage, &answer, [&done](grpc::Status status) { done.set_value(status); });
    const grpc::Status status = done.get_future().get();
    EXPECT_EQ(status.error_code(), token.empty() ? grpc::StatusCode::UNAUTHENTICATED
                                                 : grpc::StatusCode::INVALID_ARGUMENT)
        << status.error_message();
  }
  // Readiness stays open (KServe's and gRPC health's).
  grpc::ClientContext ready_context;
  inference::ServerReadyResponse ready;
  ASSERT_TRUE(kserve->ServerReady(&ready_context, inference::ServerReadyRequest(), &ready).ok());
  EXPECT_TRUE(ready.ready());
}

TEST_F(AuthTest, HttpAnswers401And403AndLeavesMetricsOpen) {
  ASSERT_NO_FATAL_FAILURE(StartServer(/*protect=*/false));
  auto missing = HttpEmbed({});
  ASSERT_TRUE(missing);
  EXPECT_EQ(missing->status, 401) << missing->body;
  EXPECT_EQ(missing->get_header_value("WWW-Authenticate"), "Bearer");
  EXPECT_EQ(Json::parse(missing->body)["error"]["type"], "authentication_error");
  auto denied = HttpEmbed(Bearer(kScoped));
  ASSERT_TRUE(denied);
  EXPECT_EQ(denied->status, 403) << denied->body;
  auto ok = HttpEmbed(Bearer(kAdmin));
  ASSERT_TRUE(ok);
  EXPECT_EQ(ok->status, 200) << ok->body;
  // TEI's shape on TEI's routes; GET routes want a token too.
  auto tei = testing::HttpClient(server_.http_address())
                 .Post("/embed", Json{{"inputs", "x"}}.dump(), "application/json");
  ASSERT_TRUE(tei);
  EXPECT_EQ(tei->status, 401);
  EXPECT_EQ(Json::parse(tei->body)["error_type"], "Unauthorized");
  EXPECT_EQ(testing::HttpClient(server_.http_address()).Get("/v1/models")->status, 401);
  EXPECT_EQ(testing::HttpClient(server_.http_address()).Get("/v1/models", Bearer(kScoped))->status,
            200);
  for (const char* open : {"/metrics", "/healthz", "/readyz", "/health", "/openapi.json"}) {
    EXPECT_EQ(testing::HttpClient(server_.http_address()).Get(open)->status, 200) << open;
  }
  // Refusals are counted like any other answer.
  const std::string metrics = testing::HttpClient(server_.http_address()).Get("/metrics")->body;
  EXPECT_NE(metrics.find("code=\"UNAUTHENTICATED\""), std::string::npos);
  EXPECT_NE(metrics.find("code=\"PERMISSION_DENIED\""), std::string::npos);
}

// The CLI sends --token, or $DOCSPARSE_TOKEN.
TEST_F(AuthTest, TheCliSendsItsToken) {
  ASSERT_NO_FATAL_FAILURE(StartServer(/*protect=*/false));
  const std::string cli = std::string(DOCSPARSE_BINARY_DIR) + "/client/docsparse --server " +
                          server_.grpc_address() + " models > /dev/null 2>&1";
  const auto exit_code = [](const std::string& command) {
    const int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(exit_code(cli), 1);
  EXPECT_EQ(exit_code("DOCSPARSE_TOKEN=" + std::string(kScoped) + " " + cli), 0);
  EXPECT_EQ(exit_code(std::string(DOCSPARSE_BINARY_DIR) + "/client/docsparse --server " +
                      server_.grpc_address() + " --token " + kAdmin + " models > /dev/null 2>&1"),
            0);
}

TEST_F(AuthTest, HealthAndMetricsCanBeProtected) {
  ASSERT_NO_FATAL_FAILURE(StartServer(/*protect=*/true));
  for (const char* path : {"/metrics", "/healthz", "/readyz", "/health"}) {
    auto anonymous = testing::HttpClient(server_.http_address()).Get(path);
    ASSERT_TRUE(anonymous);
    EXPECT_EQ(anonymous->status, 401) << path;
    EXPECT_EQ(testing::HttpClient(server_.http_address()).Get(path, Bearer(kScoped))->status, 200)
        << path;
  }
}

TEST(AuthFlagTest, ABadTokenFileStopsTheServerNamingTheLine) {
  const fs::path tokens = fs::path(::testing::TempDir()) /
                          ("docsparse-bad-tokens." + std::to_string(getpid()) + ".txt");
  std::ofstream(tokens) << "short\n";
  testing::ExpectMiniLmServerStartFailsSaying({"--auth_token_file=" + tokens.string()},
                                              ":1: a token needs at least 16 characters");
  fs::remove(tokens);
}

}  // namespace
}  // namespace docsparse
