// The HTTP JSON API of the real docsparse-server on loopback: TEI's and
// OpenAI's routes give what gRPC gives for the same text (one path), the
// cost report rides in the headers and bodies, streaming summaries arrive as
// Server-Sent Events, every error is JSON with TEI's status mapping, and the
// requests are counted in the same metrics. (Third-party clients — openai,
// huggingface_hub, an SSE library, schemathesis — run against it in
// tests/integration/python/http_clients_test.py.)
#include <gtest/gtest.h>
#include <httplib.h>

#include <atomic>
#include <cmath>
#include <cstring>
#include <future>
#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/escaping.h"
#include "client/docsparse_client.h"
#include "tests/common/exposition.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/http_client.h"
#include "tests/common/running_server.h"

namespace docsparse {
namespace {

using Json = nlohmann::json;

constexpr int64_t kMaxDocumentTokens = 20000;
constexpr int kMaxBodyBytes = 256 << 10;

std::string Gpl3() { return testing::ReadFile("/usr/share/common-licenses/GPL-3"); }

httplib::Client Http(const std::string& address) {
  httplib::Client http = testing::HttpClient(address);
  http.set_read_timeout(120, 0);
  return http;
}

class HttpApiTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(testing::MiniLmPresent());
    server_ = new testing::RunningServer();
    // fp32: HTTP and gRPC must agree exactly, whatever batch each row ran in.
    ASSERT_NO_FATAL_FAILURE(
        testing::StartServer(testing::MiniLmOnlyRepository(),
                             {"--threads=2", "--precision=fp32",
                              "--max_document_tokens=" + std::to_string(kMaxDocumentTokens),
                              "--max_http_body_bytes=" + std::to_string(kMaxBodyBytes)},
                             server_));
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
  }

  static httplib::Result Post(const std::string& path, const Json& body,
                              const httplib::Headers& headers = {}) {
    httplib::Client http = Http(server_->process->http_address());
    return http.Post(path.c_str(), headers, body.dump(), "application/json");
  }

  static Json BodyOf(const httplib::Result& result) {
    EXPECT_TRUE(result);
    if (!result) return Json();
    EXPECT_NE(result->get_header_value("Content-Type").find("application/json"), std::string::npos);
    return Json::parse(result->body, nullptr, false);
  }

  // A TEI error: the status, a JSON body {"error", "error_type"}; returns
  // the message.
  static std::string TeiError(const httplib::Result& result, int status) {
    EXPECT_TRUE(result);
    if (!result) return "";
    EXPECT_EQ(result->status, status) << result->body;
    const Json body = BodyOf(result);
    EXPECT_TRUE(body.is_object() && body["error"].is_string() && body["error_type"].is_string())
        << result->body;
    return body.value("error", "");
  }

  static v1::EmbedResponse GrpcEmbed(const std::string& text) {
    v1::EmbedRequest request;
    request.set_model("minilm");
    request.mutable_document()->set_text(text);
    auto response = server_->client->Embed(request);
    EXPECT_TRUE(response.ok()) << response.status();
    return response.ok() ? *response : v1::EmbedResponse();
  }

  static testing::RunningServer* server_;
};

testing::RunningServer* HttpApiTest::server_ = nullptr;

// How close an HTTP embedding must be to the gRPC one of the same text.
// kExact where both requests carry the text alone: JSON carries the float
// exactly (shortest round trip of its double). kBatched where the HTTP
// request batches several inputs and the gRPC ones go one by one: on
// AVX2-only CPUs oneDNN 2.6 runs fp32 products through gemm:jit, whose
// partitioning (and so a row's summation order) follows the product's row
// count, and a batched text came back 1 ulp away in some components (a Zen 3
// EPYC, docs/BENCHMARKS.md, "sixteenth part"); within 1e-6 of a unit-norm
// vector then.
enum class Match { kExact, kBatched };

void ExpectSameVector(const Json& json, const v1::EmbedResponse& grpc, Match match) {
  ASSERT_TRUE(json.is_array());
  ASSERT_EQ(json.size(), static_cast<size_t>(grpc.embedding_size()));
  for (int i = 0; i < grpc.embedding_size(); ++i) {
    if (match == Match::kExact) {
      ASSERT_EQ(json[i].get<float>(), grpc.embedding(i)) << i;
    } else {
      ASSERT_NEAR(json[i].get<float>(), grpc.embedding(i), 1e-6) << i;
    }
  }
}

TEST_F(HttpApiTest, TeiEmbedEqualsGrpcEmbedForEachInputWithCostHeaders) {
  const std::vector<std::string> texts = {"The GNU General Public License.",
                                          "A recipe for bread: flour, water, salt, yeast.",
                                          Gpl3().substr(0, 20000)};
  auto result = Post("/embed", {{"model", "minilm"}, {"inputs", texts}});
  const Json body = BodyOf(result);
  ASSERT_EQ(result->status, 200) << result->body;
  ASSERT_TRUE(body.is_array());
  ASSERT_EQ(body.size(), texts.size());
  int64_t tokens = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const v1::EmbedResponse grpc = GrpcEmbed(texts[i]);
    ExpectSameVector(body[i], grpc, Match::kBatched);
    tokens += grpc.cost().input_tokens();
  }
  EXPECT_EQ(result->get_header_value("x-docsparse-input-tokens"), std::to_string(tokens));
  EXPECT_EQ(result->get_header_value("x-docsparse-budget-met"), "true");
  EXPECT_GT(std::stod(result->get_header_value("x-docsparse-total-gflops")), 0);

  // POST / is the model's task (TEI's route; InferenceClient posts there).
  auto root = Post("/", {{"model", "minilm"}, {"inputs", texts[0]}});
  ASSERT_EQ(root->status, 200) << root->body;
  ExpectSameVector(BodyOf(root)[0], GrpcEmbed(texts[0]), Match::kExact);
}

TEST_F(HttpApiTest, OpenAiEmbeddingsCarryUsageCostAndBase64) {
  const std::vector<std::string> texts = {"first document", "second document, a little longer"};
  auto result = Post("/v1/embeddings", {{"model", "minilm"}, {"input", texts}});
  ASSERT_EQ(result->status, 200) << result->body;
  Json body = BodyOf(result);
  EXPECT_EQ(body["object"], "list");
  EXPECT_EQ(body["model"], "minilm");
  ASSERT_EQ(body["data"].size(), 2u);
  int64_t tokens = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    const Json& item = body["data"][i];
    EXPECT_EQ(item["object"], "embedding");
    EXPECT_EQ(item["index"], i);
    const v1::EmbedResponse grpc = GrpcEmbed(texts[i]);
    ExpectSameVector(item["embedding"], grpc, Match::kBatched);
    // The cost report in the body, 64-bit integers as numbers.
    EXPECT_EQ(item["cost"]["input_tokens"], grpc.cost().input_tokens());
    EXPECT_EQ(item["cost"]["attention"], "ATTENTION_KIND_DENSE");
    tokens += grpc.cost().input_tokens();
  }
  EXPECT_EQ(body["usage"]["prompt_tokens"], tokens);
  EXPECT_EQ(body["usage"]["total_tokens"], tokens);

  auto base64 = Post("/v1/embeddings",
                     {{"model", "minilm"}, {"input", texts[0]}, {"encoding_format", "base64"}});
  ASSERT_EQ(base64->status, 200) << base64->body;
  std::string bytes;
  ASSERT_TRUE(
      absl::Base64Unescape(BodyOf(base64)["data"][0]["embedding"].get<std::string>(), &bytes));
  const v1::EmbedResponse grpc = GrpcEmbed(texts[0]);
  ASSERT_EQ(bytes.size(), grpc.embedding_size() * sizeof(float));
  EXPECT_EQ(std::memcmp(bytes.data(), grpc.embedding().data(), bytes.size()), 0);

  // Token ids, as OpenAI clients send them after tiktoken.
  auto ids = Post("/v1/embeddings", {{"model", "minilm"}, {"input", {7592, 2088}}});
  ASSERT_EQ(ids->status, 200) << ids->body;
  EXPECT_EQ(BodyOf(ids)["usage"]["prompt_tokens"], 4);  // [CLS] hello world [SEP]

  auto models = Http(server_->process->http_address()).Get("/v1/models");
  ASSERT_TRUE(models);
  EXPECT_EQ(BodyOf(models)["data"][0]["id"], "minilm");
}

TEST_F(HttpApiTest, BudgetAndOptionsReachThePlanner) {
  const std::string text = Gpl3().substr(0, 3000);
  auto dense = Post("/v1/embeddings", {{"model", "minilm"}, {"input", text}});
  auto strict = Post("/v1/embeddings", {{"model", "minilm"},
                                        {"input", text},
                                        {"budget", {{"max_density", 0.01}, {"strict", true}}}});
  ASSERT_EQ(dense->status, 200) << dense->body;
  // Dense MiniLM cannot go below density 1: a strict budget is refused,
  // naming the budget field (in OpenAI's shape on its route).
  ASSERT_TRUE(strict);
  EXPECT_EQ(strict->status, 422);
  EXPECT_EQ(BodyOf(strict)["error"]["param"], "budget.max_density") << strict->body;
  const Json dense_cost = BodyOf(dense)["data"][0]["cost"];
  EXPECT_DOUBLE_EQ(dense_cost["mean_density"].get<double>(), 1.0);
  auto truncated = Post("/embed", {{"model", "minilm"}, {"inputs", Gpl3()}, {"truncate", true}});
  ASSERT_EQ(truncated->status, 200) << truncated->body;
  EXPECT_EQ(truncated->get_header_value("x-docsparse-input-tokens"), "512");
}

TEST_F(HttpApiTest, PredictEqualsGrpcClassify) {
  const std::string text = Gpl3().substr(0, 4000);
  const std::vector<std::string> labels = {"software license", "recipe", "news article"};
  auto result = Post("/predict", {{"model", "minilm"}, {"inputs", text}, {"labels", labels}});
  ASSERT_EQ(result->status, 200) << result->body;
  const Json body = BodyOf(result);
  v1::ClassifyRequest request;
  request.set_model("minilm");
  request.mutable_document()->set_text(text);
  for (const std::string& label : labels) request.add_labels(label);
  auto grpc = server_->client->Classify(request);
  ASSERT_TRUE(grpc.ok()) << grpc.status();
  ASSERT_EQ(body.size(), static_cast<size_t>(grpc->scores_size()));
  for (int i = 0; i < grpc->scores_size(); ++i) {
    EXPECT_EQ(body[i]["label"], grpc->scores(i).label());
    EXPECT_EQ(body[i]["score"].get<float>(), grpc->scores(i).score());
  }
  EXPECT_EQ(body[0]["label"], "software license");
}

TEST_F(HttpApiTest, TokenizeFramesWithSpecialTokens) {
  auto result = Post("/tokenize", {{"model", "minilm"}, {"inputs", {"hello world", "bread"}}});
  ASSERT_EQ(result->status, 200) << result->body;
  const Json body = BodyOf(result);
  ASSERT_EQ(body.size(), 2u);
  ASSERT_EQ(body[0].size(), 4u);
  EXPECT_EQ(body[0][0]["id"], 101);
  EXPECT_EQ(body[0][0]["special"], true);
  EXPECT_EQ(body[0][1]["id"], 7592);
  EXPECT_EQ(body[0][1]["text"], "hello");
  EXPECT_EQ(body[0][3]["special"], true);
  auto bare = Post("/tokenize",
                   {{"model", "minilm"}, {"inputs", "hello world"}, {"add_special_tokens", false}});
  EXPECT_EQ(BodyOf(bare)[0].size(), 2u);
}

TEST_F(HttpApiTest, SummarizeAndItsServerSentEvents) {
  const std::string text = Gpl3().substr(0, 6000);
  auto plain =
      Post("/summarize",
           {{"model", "minilm"}, {"inputs", text}, {"extractive", {{"max_sentences", 3}}}});
  ASSERT_EQ(plain->status, 200) << plain->body;
  const Json summary = BodyOf(plain);
  EXPECT_EQ(summary["kind"], "extractive");
  EXPECT_EQ(summary["sentences"].size(), 3u);
  EXPECT_GT(summary["cost"]["input_tokens"].get<int64_t>(), 0);

  auto stream = Post("/summarize", {{"model", "minilm"},
                                    {"inputs", text},
                                    {"extractive", {{"max_sentences", 3}}},
                                    {"stream", true}});
  ASSERT_TRUE(stream);
  ASSERT_EQ(stream->status, 200);
  EXPECT_EQ(stream->get_header_value("Content-Type"), "text/event-stream");
  // Events are "data: {json}\n\n"; the last says done and carries the cost.
  std::string joined;
  Json last;
  size_t at = 0;
  while ((at = stream->body.find("data: ", at)) != std::string::npos) {
    const size_t end = stream->body.find("\n\n", at);
    ASSERT_NE(end, std::string::npos);
    last = Json::parse(stream->body.substr(at + 6, end - at - 6));
    joined += last["text"].get<std::string>();
    at = end;
  }
  EXPECT_EQ(last["done"], true);
  EXPECT_EQ(joined, summary["summary"]);
  EXPECT_EQ(last["cost"]["input_tokens"], summary["cost"]["input_tokens"]);
}

TEST_F(HttpApiTest, ErrorsAreJsonWithTeiStatuses) {
  // 422: invalid input, the message naming the field.
  EXPECT_NE(TeiError(Post("/embed", {{"inputs", 7}}), 422).find("inputs"), std::string::npos);
  EXPECT_NE(TeiError(Post("/embed", {{"model", "minilm"}}), 422).find("inputs"), std::string::npos);
  EXPECT_NE(TeiError(Post("/embed", {{"inputs", "a"}, {"budget", {{"max_density", "x"}}}}), 422)
                .find("budget.max_density"),
            std::string::npos);
  EXPECT_NE(TeiError(Post("/embed", {{"inputs", "a"}, {"budget", {{"max_densty", 0.5}}}}), 422)
                .find("budget: unknown field \"max_densty\""),
            std::string::npos);
  EXPECT_NE(
      TeiError(Post("/embed", {{"inputs", std::vector<std::string>(33, "a")}}), 422).find("32"),
      std::string::npos);
  EXPECT_NE(TeiError(Post("/summarize", {{"inputs", "a. b."}, {"generation", {{"beams", 2}}}}), 422)
                .find("generation"),
            std::string::npos);
  {
    httplib::Client http = Http(server_->process->http_address());
    EXPECT_NE(TeiError(http.Post("/embed", "{not json", "application/json"), 422).find("body"),
              std::string::npos);
  }
  // 404: unknown model, unknown route.
  EXPECT_NE(TeiError(Post("/embed", {{"inputs", "a"}, {"model", "nope"}}), 404).find("nope"),
            std::string::npos);
  EXPECT_FALSE(TeiError(Http(server_->process->http_address()).Get("/nope"), 404).empty());
  // The OpenAI routes answer in OpenAI's shape.
  auto openai = Post("/v1/embeddings", {{"input", "a"}, {"model", "nope"}});
  ASSERT_TRUE(openai);
  EXPECT_EQ(openai->status, 404);
  const Json error = BodyOf(openai)["error"];
  EXPECT_EQ(error["code"], "model_not_found");
  EXPECT_EQ(error["param"], "model");
  EXPECT_EQ(error["type"], "invalid_request_error");
  // 413: a document over --max_document_tokens, a body over the cap.
  std::string long_text;
  while (long_text.size() < 200000) long_text += "word ";
  EXPECT_NE(TeiError(Post("/embed", {{"model", "minilm"},
                                     {"inputs", long_text.substr(0, 120000)},
                                     {"overflow", "chunk"}}),
                     413)
                .find("token"),
            std::string::npos);
  EXPECT_NE(TeiError(Post("/embed", {{"inputs", long_text + long_text}}), 413).find("body"),
            std::string::npos);
  // 504: the deadline passes (x-docsparse-timeout-ms).
  TeiError(Post("/embed", {{"model", "minilm"}, {"inputs", Gpl3()}, {"overflow", "chunk"}},
                {{"x-docsparse-timeout-ms", "1"}}),
           504);
  TeiError(Post("/embed", {{"inputs", "a"}}, {{"x-docsparse-timeout-ms", "soon"}}), 422);
}

// 429 when the model's queue is full: a server with a queue of one and no
// batching, flooded with long documents at once.
TEST(HttpApiQueueTest, FullQueueIs429) {
  ASSERT_TRUE(testing::MiniLmPresent());
  testing::RunningServer server;
  ASSERT_NO_FATAL_FAILURE(
      testing::StartServer(testing::MiniLmOnlyRepository(),
                           {"--threads=2", "--max_queue=1", "--max_batch_size=1"}, &server));
  const std::string body =
      Json{{"model", "minilm"}, {"inputs", Gpl3()}, {"overflow", "chunk"}}.dump();
  std::vector<std::future<int>> statuses;
  for (int i = 0; i < 8; ++i) {
    statuses.push_back(std::async(std::launch::async, [&] {
      httplib::Client http = Http(server.process->http_address());
      auto result = http.Post("/embed", body, "application/json");
      if (!result) return -1;
      if (result->status == 429) {
        const Json error = Json::parse(result->body, nullptr, false);
        if (error.value("error_type", "") != "Overloaded") return -2;
      }
      return result->status;
    }));
  }
  int ok = 0;
  int busy = 0;
  for (auto& status : statuses) {
    const int code = status.get();
    ok += code == 200;
    busy += code == 429;
    EXPECT_TRUE(code == 200 || code == 429) << code;
  }
  EXPECT_GE(ok, 1);
  EXPECT_GE(busy, 1);
}

TEST_F(HttpApiTest, HttpRequestsAreCountedInTheSameMetrics) {
  httplib::Client http = Http(server_->process->http_address());
  const auto count = [&](const std::string& series) {
    auto metrics = http.Get("/metrics");
    EXPECT_TRUE(metrics && metrics->status == 200);
    return testing::Exposition(metrics ? metrics->body : "").Find(series).value_or(0);
  };
  const std::string ok = R"(docsparse_requests_total{model="minilm",task="embed",code="OK"})";
  const std::string invalid =
      R"(docsparse_requests_total{model="minilm",task="classify",code="INVALID_ARGUMENT"})";
  const double ok_before = count(ok);
  const double invalid_before = count(invalid);
  ASSERT_EQ(Post("/embed", {{"model", "minilm"}, {"inputs", {"a", "b"}}})->status, 200);
  ASSERT_EQ(Post("/predict", {{"model", "minilm"}, {"inputs", "a"}, {"labels", {"", "x"}}})->status,
            422);
  EXPECT_EQ(count(ok), ok_before + 2);
  EXPECT_EQ(count(invalid), invalid_before + 1);
}

TEST_F(HttpApiTest, InfoHealthAndTheOpenApiDocument) {
  httplib::Client http = Http(server_->process->http_address());
  auto health = http.Get("/health");
  ASSERT_TRUE(health);
  EXPECT_EQ(health->status, 200);
  const Json info = BodyOf(http.Get("/info"));
  EXPECT_EQ(info["model_id"], "minilm");
  EXPECT_EQ(info["max_client_batch_size"], 32);
  EXPECT_EQ(info["model_type"]["embedding"]["pooling"], "mean");
  const Json openapi = BodyOf(http.Get("/openapi.json"));
  EXPECT_EQ(openapi["openapi"], "3.0.3");
  for (const char* path : {"/embed", "/", "/predict", "/tokenize", "/info", "/health", "/summarize",
                           "/v1/embeddings", "/v1/models", "/openapi.json"}) {
    EXPECT_TRUE(openapi["paths"].contains(path)) << path;
  }
}

}  // namespace
}  // namespace docsparse
