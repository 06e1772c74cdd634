// ModernBERT checkpoints served as they are (issue 17): the tiny
// ModernBertModel and ModernBertForSequenceClassification fixtures
// (tests/fixtures/modernbert) with the byte-level BPE tokenizer their
// vocabulary was made for. The server embeds and classifies with
// ModernBERT's schedule (sliding window, every third layer full) as the
// native plan, the cost report prices it, a cap drops to the window alone,
// and the outputs are transformers'.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

#include "client/docsparse_client.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/running_server.h"

namespace docsparse {
namespace {

namespace fs = std::filesystem;

constexpr double kTolerance = 1e-4;

fs::path ModernBertRepository() {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("docsparse-modernbert-models." + std::to_string(getpid()));
  fs::remove_all(dir);
  const fs::path tokenizer = testing::FixturePath("bpe_spm/bart_tokenizer");
  for (const auto& [name, fixture, serving] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"modernbert", "modernbert/model",
            R"({"tasks": ["embed"], "normalize": false, "precision": "fp32"})"},
           {"modernbert-classifier", "modernbert/classifier",
            R"({"tasks": ["classify"], "precision": "fp32"})"}}) {
    const fs::path model = dir / name;
    fs::create_directories(model);
    for (const char* file : {"config.json", "model.safetensors"}) {
      fs::copy_file(fs::path(testing::FixturePath(fixture)) / file, model / file);
    }
    for (const char* file : {"tokenizer.json", "tokenizer_config.json"}) {
      fs::copy_file(tokenizer / file, model / file);
    }
    std::ofstream(model / "docsparse.json") << serving;
  }
  return dir;
}

nlohmann::json Case(const std::string& fixture, const std::string& name) {
  const nlohmann::json expected =
      nlohmann::json::parse(testing::ReadFile(testing::FixturePath(fixture + "/expected.json")));
  for (const nlohmann::json& c : expected["cases"]) {
    if (c["name"] == name) return c;
  }
  ADD_FAILURE() << "no case " << name;
  return {};
}

// Row `row` of a case without <s> ... </s>, which the server adds back.
v1::Document Unframed(const nlohmann::json& c, size_t row) {
  const int64_t n = c["lengths"][row].get<int64_t>();
  v1::Document document;
  for (int64_t i = 1; i + 1 < n; ++i) {
    document.mutable_token_ids()->add_ids(c["input_ids"][row][i].get<int32_t>());
  }
  return document;
}

class ModernBertServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repository_ = ModernBertRepository();
    server_ = new testing::RunningServer();
    ASSERT_NO_FATAL_FAILURE(testing::StartServer(repository_.string(), {}, server_));
    client_ = server_->client.get();
  }

  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    client_ = nullptr;
    fs::remove_all(repository_);
  }

  static fs::path repository_;
  static testing::RunningServer* server_;
  static DocsparseClient* client_;
};

fs::path ModernBertServerTest::repository_;
testing::RunningServer* ModernBertServerTest::server_ = nullptr;
DocsparseClient* ModernBertServerTest::client_ = nullptr;

TEST_F(ModernBertServerTest, EmbedsAsTransformersWithItsScheduleAsTheNativePlan) {
  auto models = client_->ListModels();
  ASSERT_TRUE(models.ok()) << models.status();
  for (const v1::ModelInfo& model : models->models()) {
    EXPECT_EQ(model.attention(), v1::ATTENTION_KIND_MODERNBERT) << model.name();
    EXPECT_EQ(model.architecture(), "modernbert");
  }
  const nlohmann::json c = Case("modernbert/model", "single_odd");
  const int64_t n = c["lengths"][0].get<int64_t>();
  v1::EmbedRequest request;
  request.set_model("modernbert");
  *request.mutable_document() = Unframed(c, 0);
  auto response = client_->Embed(request);
  ASSERT_TRUE(response.ok()) << response.status();
  const nlohmann::json& hidden = c["last_hidden_state"][0];
  ASSERT_EQ(response->embedding_size(), static_cast<int>(hidden[0].size()));
  for (size_t d = 0; d < hidden[0].size(); ++d) {
    double mean = 0;
    for (int64_t t = 0; t < n; ++t) mean += hidden[t][d].get<double>() / n;
    EXPECT_NEAR(response->embedding(static_cast<int>(d)), mean, kTolerance) << "dim " << d;
  }
  const v1::CostReport& cost = response->cost();
  EXPECT_EQ(cost.attention(), v1::ATTENTION_KIND_MODERNBERT);
  EXPECT_EQ(cost.knobs().values().at("window"), 8);
  EXPECT_EQ(cost.knobs().values().at("full_layers"), 1);
  ASSERT_EQ(cost.layers_size(), 4);
  EXPECT_DOUBLE_EQ(cost.layers(0).head_density(0), 1.0);
  EXPECT_LT(cost.layers(1).head_density(0), 0.3);
  EXPECT_DOUBLE_EQ(cost.layers(3).head_density(0), 1.0);
  // A cap below the full layers' share: the window on every layer.
  request.mutable_budget()->set_max_density(0.3);
  auto capped = client_->Embed(request);
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_TRUE(capped->cost().budget_met());
  EXPECT_EQ(capped->cost().knobs().values().at("full_layers"), 0);
  EXPECT_LE(capped->cost().mean_density(), 0.3);
}

TEST_F(ModernBertServerTest, ClassifiesAsTransformersWithTheMeanPooledHead) {
  const nlohmann::json c = Case("modernbert/classifier", "padded_batch");
  const std::vector<std::string> labels = {"alpha", "beta", "gamma"};
  for (size_t row = 0; row < c["lengths"].size(); ++row) {
    SCOPED_TRACE(row);
    if (c["lengths"][row].get<int64_t>() < 3) continue;
    v1::ClassifyRequest request;
    request.set_model("modernbert-classifier");
    *request.mutable_document() = Unframed(c, row);
    auto response = client_->Classify(request);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->method(), v1::CLASSIFICATION_METHOD_HEAD);
    const std::vector<double> logits = c["logits"][row].get<std::vector<double>>();
    double total = 0;
    for (double logit : logits) total += std::exp(logit);
    ASSERT_EQ(response->scores_size(), 3);
    for (const v1::LabelScore& score : response->scores()) {
      const size_t id = std::find(labels.begin(), labels.end(), score.label()) - labels.begin();
      ASSERT_LT(id, labels.size()) << score.label();
      EXPECT_NEAR(score.score(), std::exp(logits[id]) / total, kTolerance) << score.label();
    }
  }
}

}  // namespace
}  // namespace docsparse
