// The real docsparse-server on loopback, called through the C++ client: every
// RPC, health, the HTTP side port, each error status, and a clean SIGTERM.
#include <gtest/gtest.h>
#include <httplib.h>

#include <cmath>
#include <nlohmann/json.hpp>
#include <sstream>

#include "client/docsparse_client.h"
#include "tests/common/exposition.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/http_client.h"
#include "tests/common/server_process.h"

namespace docsparse {
namespace {

using grpc::health::v1::HealthCheckResponse;

constexpr int64_t kMaxDocumentBytes = 200000;
constexpr int64_t kMaxDocumentTokens = 20000;

class ServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(testing::MiniLmPresent());
    server_ = new testing::ServerProcess();
    ASSERT_TRUE(server_->Start(
        testing::ServerBinary(),
        testing::LoopbackFlags(testing::MiniLmOnlyRepository(),
                               // fp32: embeddings are compared with HF transformers' at 1e-4;
                               // bf16 has its own fidelity gate (tests/model/encoder).
                               {"--threads=2", "--precision=fp32",
                                "--max_document_bytes=" + std::to_string(kMaxDocumentBytes),
                                "--max_document_tokens=" + std::to_string(kMaxDocumentTokens)})))
        << server_->output();
    auto client = DocsparseClient::Connect(server_->grpc_address());
    ASSERT_TRUE(client.ok()) << client.status();
    client_ = client->release();
  }

  static void TearDownTestSuite() {
    delete client_;
    client_ = nullptr;
    delete server_;
    server_ = nullptr;
  }

  static v1::Document Text(const std::string& text) {
    v1::Document document;
    document.set_text(text);
    return document;
  }

  static std::string Gpl3() { return testing::ReadFile("/usr/share/common-licenses/GPL-3"); }

  static testing::ServerProcess* server_;
  static DocsparseClient* client_;
};

testing::ServerProcess* ServerTest::server_ = nullptr;
DocsparseClient* ServerTest::client_ = nullptr;

TEST_F(ServerTest, HealthIsServingAfterWarmUp) {
  auto overall = client_->Health("");
  ASSERT_TRUE(overall.ok()) << overall.status();
  EXPECT_EQ(*overall, HealthCheckResponse::SERVING);
  auto service = client_->Health("docsparse.v1.DocumentService");
  ASSERT_TRUE(service.ok()) << service.status();
  EXPECT_EQ(*service, HealthCheckResponse::SERVING);
}

TEST_F(ServerTest, ListModelsDescribesTheDefaultModel) {
  auto models = client_->ListModels();
  ASSERT_TRUE(models.ok()) << models.status();
  ASSERT_GE(models->models_size(), 1);
  const v1::ModelInfo* minilm = nullptr;
  for (const auto& model : models->models()) {
    if (model.name() == "minilm") minilm = &model;
  }
  ASSERT_NE(minilm, nullptr);
  EXPECT_EQ(minilm->architecture(), "bert");
  EXPECT_EQ(minilm->hidden_size(), 384);
  EXPECT_EQ(minilm->num_layers(), 6);
  EXPECT_EQ(minilm->max_position_tokens(), 512);
  EXPECT_TRUE(minilm->ready());
  EXPECT_GE(minilm->default_labels_size(), 2);
}

TEST_F(ServerTest, EmbedMatchesSentenceTransformers) {
  std::istringstream lines(testing::ReadFile(testing::FixturePath("minilm/embeddings.jsonl")));
  std::string line;
  int checked = 0;
  while (std::getline(lines, line) && checked < 5) {
    const nlohmann::json c = nlohmann::json::parse(line);
    if (c["text"].get<std::string>().find_first_not_of(" \t\n") == std::string::npos) continue;
    v1::EmbedRequest request;
    request.set_model("minilm");
    *request.mutable_document() = Text(c["text"].get<std::string>());
    auto response = client_->Embed(request);
    ASSERT_TRUE(response.ok()) << response.status();
    const auto want = c["mean_normalized"].get<std::vector<float>>();
    ASSERT_EQ(response->embedding_size(), static_cast<int>(want.size()));
    for (size_t i = 0; i < want.size(); ++i) {
      ASSERT_NEAR(response->embedding(static_cast<int>(i)), want[i], 1e-4) << "dim " << i;
    }
    const v1::CostReport& cost = response->cost();
    EXPECT_EQ(cost.input_tokens(), static_cast<int64_t>(c["input_ids"].size()));
    EXPECT_EQ(cost.windows(), 1);
    EXPECT_DOUBLE_EQ(cost.mean_density(), 1.0);
    EXPECT_EQ(cost.attention(), v1::ATTENTION_KIND_DENSE);
    EXPECT_EQ(cost.layers_size(), 6);
    EXPECT_DOUBLE_EQ(cost.total_flops(), cost.dense_equivalent_flops());
    EXPECT_GT(cost.timings().total_ms(), 0);
    ++checked;
  }
  EXPECT_EQ(checked, 5);
}

TEST_F(ServerTest, LongDocumentIsChunkedAndEveryWindowCounted) {
  v1::EmbedRequest request;
  *request.mutable_document() = Text(Gpl3());
  request.mutable_options()->set_overflow(v1::OVERFLOW_CHUNK);
  auto response = client_->Embed(request);
  ASSERT_TRUE(response.ok()) << response.status();
  const v1::CostReport& cost = response->cost();
  EXPECT_GT(cost.windows(), 10);
  EXPECT_GT(cost.input_tokens(), 6000);
  EXPECT_LE(cost.input_tokens(), static_cast<int64_t>(cost.windows()) * 512);
  EXPECT_EQ(cost.layers(0).head_edges_size(), 12);

  request.mutable_options()->set_overflow(v1::OVERFLOW_TRUNCATE);
  auto truncated = client_->Embed(request);
  ASSERT_TRUE(truncated.ok()) << truncated.status();
  EXPECT_EQ(truncated->cost().windows(), 1);
  EXPECT_TRUE(truncated->cost().truncated());
  EXPECT_EQ(truncated->cost().input_tokens(), 512);
}

TEST_F(ServerTest, ClassifyRanksLicenseFirstForGpl3) {
  v1::ClassifyRequest request;
  *request.mutable_document() = Text(Gpl3());
  for (const char* label : {"software license", "recipe", "news article", "scientific paper"}) {
    request.add_labels(label);
  }
  auto response = client_->Classify(request);
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->scores_size(), 4);
  EXPECT_EQ(response->scores(0).label(), "software license");
  double total = 0;
  for (const auto& score : response->scores()) total += score.score();
  EXPECT_NEAR(total, 1.0, 1e-5);
  EXPECT_EQ(response->method(), v1::CLASSIFICATION_METHOD_ZERO_SHOT);
  EXPECT_GT(response->cost().windows(), 10);
}

TEST_F(ServerTest, SummarizeAndStreamAgree) {
  v1::SummarizeRequest request;
  *request.mutable_document() = Text(Gpl3());
  request.mutable_extractive()->set_max_sentences(4);
  auto unary = client_->Summarize(request);
  ASSERT_TRUE(unary.ok()) << unary.status();
  ASSERT_EQ(unary->sentences_size(), 4);
  EXPECT_EQ(unary->kind(), v1::SUMMARY_KIND_EXTRACTIVE);
  const std::string gpl = Gpl3();
  for (int i = 0; i < 4; ++i) {
    const auto& sentence = unary->sentences(i);
    if (i > 0) {
      EXPECT_LT(unary->sentences(i - 1).index(), sentence.index());
    }
    ASSERT_LE(sentence.end_byte(), static_cast<int64_t>(gpl.size()));
    EXPECT_GT(sentence.end_byte(), sentence.begin_byte());
  }
  std::string streamed;
  int chunks = 0;
  auto last = client_->SummarizeStream(request, [&](const v1::SummarizeChunk& chunk) {
    streamed += chunk.text();
    ++chunks;
  });
  ASSERT_TRUE(last.ok()) << last.status();
  EXPECT_TRUE(last->done());
  EXPECT_GE(chunks, 1);
  EXPECT_EQ(streamed, unary->summary());
  EXPECT_GT(last->cost().attention_flops(), 0);
}

TEST_F(ServerTest, BudgetIsReportedAndStrictCapsFail) {
  v1::EmbedRequest request;
  *request.mutable_document() = Text("A short document about budgets.");
  request.mutable_budget()->set_max_density(0.5);
  auto lenient = client_->Embed(request);
  ASSERT_TRUE(lenient.ok()) << lenient.status();
  EXPECT_FALSE(lenient->cost().budget_met());
  EXPECT_DOUBLE_EQ(lenient->cost().budget().max_density(), 0.5);

  request.mutable_budget()->set_strict(true);
  auto strict = client_->Embed(request);
  EXPECT_EQ(strict.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(strict.status().message().find("budget.max_density"), std::string::npos);

  request.mutable_budget()->set_max_density(1.0);
  auto met = client_->Embed(request);
  ASSERT_TRUE(met.ok()) << met.status();
  EXPECT_TRUE(met->cost().budget_met());
}

struct ErrorCase {
  const char* name;
  std::function<void(v1::EmbedRequest*)> mutate;
  absl::StatusCode code;
  const char* message_part;
};

TEST_F(ServerTest, ErrorsCarryTheRightCodeAndNameTheField) {
  const std::string long_text = Gpl3();
  const std::vector<ErrorCase> cases = {
      {"unknown model", [](v1::EmbedRequest* r) { r->set_model("no-such-model"); },
       absl::StatusCode::kNotFound, "no-such-model"},
      {"no document", [](v1::EmbedRequest* r) { r->clear_document(); },
       absl::StatusCode::kInvalidArgument, "document"},
      {"blank text", [](v1::EmbedRequest* r) { r->mutable_document()->set_text(" \n\t "); },
       absl::StatusCode::kInvalidArgument, "document.text"},
      {"invalid utf-8",
       [](v1::EmbedRequest* r) { r->mutable_document()->set_utf8_bytes("ok \xC3\x28 bad"); },
       absl::StatusCode::kInvalidArgument, "document.utf8_bytes"},
      {"too many bytes",
       [](v1::EmbedRequest* r) {
         r->mutable_document()->set_text(std::string(kMaxDocumentBytes + 1, 'a'));
       },
       absl::StatusCode::kResourceExhausted, "200000 bytes"},
      {"too many tokens",
       [&](v1::EmbedRequest* r) {
         r->mutable_document()->set_text(long_text + long_text + long_text);
       },
       absl::StatusCode::kResourceExhausted, "20000 tokens"},
      {"over positions with REJECT",
       [&](v1::EmbedRequest* r) {
         r->mutable_document()->set_text(long_text);
         r->mutable_options()->set_overflow(v1::OVERFLOW_REJECT);
       },
       absl::StatusCode::kResourceExhausted, "512"},
      {"token id outside vocabulary",
       [](v1::EmbedRequest* r) {
         auto* ids = r->mutable_document()->mutable_token_ids();
         ids->add_ids(2023);
         ids->add_ids(999999);
       },
       absl::StatusCode::kInvalidArgument, "document.token_ids.ids[1]"},
      {"sparse planner the model lacks",
       [](v1::EmbedRequest* r) { r->mutable_budget()->set_attention(v1::ATTENTION_KIND_SBM); },
       absl::StatusCode::kInvalidArgument, "budget.attention"},
      {"density out of range",
       [](v1::EmbedRequest* r) { r->mutable_budget()->set_max_density(1.5); },
       absl::StatusCode::kInvalidArgument, "budget.max_density"},
  };
  for (const ErrorCase& c : cases) {
    SCOPED_TRACE(c.name);
    v1::EmbedRequest request;
    *request.mutable_document() = Text("A valid document.");
    c.mutate(&request);
    auto response = client_->Embed(request);
    EXPECT_EQ(response.status().code(), c.code) << response.status();
    EXPECT_NE(response.status().message().find(c.message_part), std::string::npos)
        << response.status();
  }
}

TEST_F(ServerTest, ClassifyAndSummarizeValidateTheirFields) {
  v1::ClassifyRequest classify;
  *classify.mutable_document() = Text("Some text.");
  classify.add_labels("a");
  classify.add_labels("a");
  auto duplicate = client_->Classify(classify);
  EXPECT_EQ(duplicate.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(duplicate.status().message().find("labels[1]"), std::string::npos);
  // A whitespace-only label is no label.
  classify.set_labels(1, " \t ");
  auto blank = client_->Classify(classify);
  EXPECT_EQ(blank.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(blank.status().message().find("labels[1]: blank"), std::string::npos) << blank.status();

  v1::SummarizeRequest summarize;
  summarize.mutable_document()->mutable_token_ids()->add_ids(2023);
  auto ids = client_->Summarize(summarize);
  EXPECT_EQ(ids.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(ids.status().message().find("document.token_ids"), std::string::npos);

  *summarize.mutable_document() = Text("One sentence here. Another one there.");
  summarize.mutable_extractive()->set_diversity(2);
  auto diversity = client_->Summarize(summarize);
  EXPECT_EQ(diversity.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(diversity.status().message().find("extractive.diversity"), std::string::npos);
}

TEST_F(ServerTest, HttpPortServesHealthAndMetrics) {
  v1::EmbedRequest request;
  *request.mutable_document() = Text("Counted.");
  ASSERT_TRUE(client_->Embed(request).ok());
  httplib::Client http = testing::HttpClient(server_->http_address());
  auto healthz = http.Get("/healthz");
  ASSERT_TRUE(healthz);
  EXPECT_EQ(healthz->status, 200);
  auto readyz = http.Get("/readyz");
  ASSERT_TRUE(readyz);
  EXPECT_EQ(readyz->status, 200);
  auto metrics = http.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_TRUE(testing::Exposition(metrics->body)
                  .Has("docsparse_requests_total{model=\"minilm\",task=\"embed\",code=\"OK\"}"))
      << metrics->body;
}

TEST(ServerLifecycleTest, SigtermStopsCleanly) {
  ASSERT_TRUE(testing::MiniLmPresent());
  testing::ServerProcess server;
  ASSERT_TRUE(
      server.Start(testing::ServerBinary(), testing::LoopbackFlags(testing::SourcePath("models"))))
      << server.output();
  const std::optional<int> code = server.Stop(SIGTERM, std::chrono::seconds(30));
  ASSERT_TRUE(code.has_value()) << server.output();
  EXPECT_EQ(*code, 0) << server.output();
  EXPECT_NE(server.output().find("docsparse-server: stopped"), std::string::npos);
}

TEST(ServerLifecycleTest, BadRepositoryFailsAtStartWithAMessage) {
  testing::ServerProcess server;
  EXPECT_FALSE(server.Start(testing::ServerBinary(), testing::LoopbackFlags("/nonexistent")));
  EXPECT_NE(server.output().find("/nonexistent"), std::string::npos) << server.output();
}

}  // namespace
}  // namespace docsparse
