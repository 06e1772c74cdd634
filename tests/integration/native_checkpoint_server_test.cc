// Long-document checkpoints served as they are (issue 17): one repository
// holds the tiny Longformer (LongformerModel, LongformerForSequenceClassification),
// ModernBERT (ModernBertModel, ModernBertForSequenceClassification) and
// BigBird (BigBirdModel, BigBirdForSequenceClassification) fixtures of
// tests/fixtures/{longformer,modernbert,bigbird}, with the byte-level BPE
// tokenizer their vocabulary was made for. The server embeds and classifies
// with each checkpoint's own attention as the native plan (Longformer's
// window and global rows; ModernBERT's sliding window and full layers;
// BigBird's blocks as transformers runs them), a request's knobs and budget
// move it, the cost report prices it, and the outputs are transformers'.
// LED and BigBird-Pegasus are served in summarize_server_test.cc.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <tuple>
#include <vector>

#include "client/docsparse_client.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/running_server.h"
#include "tests/integration/native_pattern_density.h"

namespace docsparse {
namespace {

namespace fs = std::filesystem;

constexpr double kTolerance = 1e-4;

// Six model folders: each fixture's config and weights, the BPE tokenizer
// and a docsparse.json (fp32: compared with HF at 1e-4).
fs::path NativeCheckpointRepository() {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("docsparse-native-checkpoints." + std::to_string(getpid()));
  fs::remove_all(dir);
  const fs::path tokenizer = testing::FixturePath("bpe_spm/bart_tokenizer");
  const std::string embed = R"({"tasks": ["embed"], "normalize": false, "precision": "fp32"})";
  const std::string classify = R"({"tasks": ["classify"], "precision": "fp32"})";
  for (const auto& [name, fixture, serving] :
       std::vector<std::tuple<std::string, std::string, std::string>>{
           {"longformer", "longformer/model", embed},
           {"longformer-classifier", "longformer/classifier", classify},
           {"modernbert", "modernbert/model", embed},
           {"modernbert-classifier", "modernbert/classifier", classify},
           {"bigbird", "bigbird/model", embed},
           {"bigbird-classifier", "bigbird/classifier", classify}}) {
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

// Row `row` of a case as a request document: its ids without <s> ... </s>,
// which the server adds back.
v1::Document Unframed(const nlohmann::json& c, size_t row) {
  const int64_t n = c["lengths"][row].get<int64_t>();
  v1::Document document;
  for (int64_t i = 1; i + 1 < n; ++i) {
    document.mutable_token_ids()->add_ids(c["input_ids"][row][i].get<int32_t>());
  }
  return document;
}

// HF's last_hidden_state of that row, mean-pooled over its tokens.
std::vector<double> MeanOfRow(const nlohmann::json& c, size_t row) {
  const int64_t n = c["lengths"][row].get<int64_t>();
  const nlohmann::json& hidden = c["last_hidden_state"][row];
  std::vector<double> mean(hidden[0].size(), 0.0);
  for (int64_t t = 0; t < n; ++t) {
    for (size_t d = 0; d < mean.size(); ++d) mean[d] += hidden[t][d].get<double>() / n;
  }
  return mean;
}

using testing::BigBirdDensity;
using testing::LongformerDensity;

class NativeCheckpointServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    repository_ = NativeCheckpointRepository();
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

  static void ExpectEmbeddingOf(const v1::EmbedResponse& response, const nlohmann::json& c,
                                size_t row) {
    const std::vector<double> want = MeanOfRow(c, row);
    ASSERT_EQ(response.embedding_size(), static_cast<int>(want.size()));
    for (size_t d = 0; d < want.size(); ++d) {
      EXPECT_NEAR(response.embedding(static_cast<int>(d)), want[d], kTolerance) << "dim " << d;
    }
  }

  // The head's probabilities for row `row` of a classifier case: softmax of
  // HF's logits, by label name.
  static void ExpectHeadScoresOf(const v1::ClassifyResponse& response, const nlohmann::json& c,
                                 size_t row) {
    EXPECT_EQ(response.method(), v1::CLASSIFICATION_METHOD_HEAD);
    const std::vector<double> logits = c["logits"][row].get<std::vector<double>>();
    double total = 0;
    for (double logit : logits) total += std::exp(logit);
    const std::vector<std::string> labels = {"alpha", "beta", "gamma"};
    ASSERT_EQ(response.scores_size(), 3);
    for (const v1::LabelScore& score : response.scores()) {
      const size_t id = std::find(labels.begin(), labels.end(), score.label()) - labels.begin();
      ASSERT_LT(id, labels.size()) << score.label();
      EXPECT_NEAR(score.score(), std::exp(logits[id]) / total, kTolerance) << score.label();
    }
  }

  static fs::path repository_;
  static testing::RunningServer* server_;
  static DocsparseClient* client_;
};

fs::path NativeCheckpointServerTest::repository_;
testing::RunningServer* NativeCheckpointServerTest::server_ = nullptr;
DocsparseClient* NativeCheckpointServerTest::client_ = nullptr;

TEST_F(NativeCheckpointServerTest, ListsEachCheckpointsOwnPatternAsNativeWithItsKnobs) {
  auto models = client_->ListModels();
  ASSERT_TRUE(models.ok()) << models.status();
  ASSERT_EQ(models->models_size(), 6);
  for (const v1::ModelInfo& model : models->models()) {
    SCOPED_TRACE(model.name());
    if (model.name().rfind("bigbird", 0) == 0) {
      EXPECT_EQ(model.architecture(), "big_bird");
      EXPECT_EQ(model.attention(), v1::ATTENTION_KIND_BIGBIRD);
      const bool classifier = model.name() == "bigbird-classifier";
      for (const v1::PlannerInfo& planner : model.planners()) {
        if (planner.attention() != model.attention()) continue;
        EXPECT_EQ(planner.knobs().at("block_size").native(), classifier ? 4 : 8);
        EXPECT_EQ(planner.knobs().at("random_blocks").native(), 2);
        EXPECT_EQ(planner.knobs().at("last_block_global").native(), 1);
        EXPECT_EQ(planner.knobs().at("random_at_first_block").native(), 1);
      }
      continue;
    }
    const bool longformer = model.name().rfind("longformer", 0) == 0;
    EXPECT_EQ(model.architecture(), longformer ? "longformer" : "modernbert");
    EXPECT_EQ(model.attention(),
              longformer ? v1::ATTENTION_KIND_LONGFORMER : v1::ATTENTION_KIND_MODERNBERT);
    for (const v1::PlannerInfo& planner : model.planners()) {
      if (planner.attention() != model.attention()) continue;
      EXPECT_EQ(planner.knobs().at("window").native(), 8);
      EXPECT_EQ(planner.knobs().at(longformer ? "global_tokens" : "full_layers").native(), 1);
    }
  }
}

TEST_F(NativeCheckpointServerTest, EmbedsAsTransformersWithTheCostOfLongformersPattern) {
  const nlohmann::json c = Case("longformer/model", "single_odd");
  v1::EmbedRequest request;
  request.set_model("longformer");
  *request.mutable_document() = Unframed(c, 0);
  auto response = client_->Embed(request);
  ASSERT_TRUE(response.ok()) << response.status();
  ExpectEmbeddingOf(*response, c, 0);
  const v1::CostReport& cost = response->cost();
  EXPECT_EQ(cost.attention(), v1::ATTENTION_KIND_LONGFORMER);
  EXPECT_EQ(cost.knobs().values().at("window"), 8);
  EXPECT_EQ(cost.knobs().values().at("global_tokens"), 1);
  EXPECT_NEAR(cost.mean_density(), LongformerDensity(61, 1, 8), 1e-9);
  EXPECT_GT(cost.attention_flops(), 0);
}

TEST_F(NativeCheckpointServerTest, RequestKnobsMoveTheWindowAsTransformersDoes) {
  const nlohmann::json c = Case("longformer/model", "narrow_window");
  ASSERT_EQ(c["window"], 4);
  v1::EmbedRequest request;
  request.set_model("longformer");
  *request.mutable_document() = Unframed(c, 1);
  (*request.mutable_budget()->mutable_knobs())["window"] = 4;
  auto response = client_->Embed(request);
  ASSERT_TRUE(response.ok()) << response.status();
  ExpectEmbeddingOf(*response, c, 1);
  EXPECT_EQ(response->cost().knobs().values().at("window"), 4);
  EXPECT_NEAR(response->cost().mean_density(), LongformerDensity(30, 1, 4), 1e-9);
}

TEST_F(NativeCheckpointServerTest, ADensityCapNarrowsTheWindow) {
  const nlohmann::json c = Case("longformer/model", "long");
  const int64_t n = c["lengths"][0].get<int64_t>();
  v1::EmbedRequest request;
  request.set_model("longformer");
  *request.mutable_document() = Unframed(c, 0);
  // From a request's window of 32, a cap just above window 16's density
  // halves it once.
  (*request.mutable_budget()->mutable_knobs())["window"] = 32;
  request.mutable_budget()->set_max_density(LongformerDensity(n, 1, 16) + 1e-6);
  auto capped = client_->Embed(request);
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_TRUE(capped->cost().budget_met());
  EXPECT_EQ(capped->cost().knobs().values().at("window"), 16);
  EXPECT_NEAR(capped->cost().mean_density(), LongformerDensity(n, 1, 16), 1e-9);
  // Below window 8's density (the lattice's floor) nothing fits: the floor
  // runs, or a strict request is refused.
  request.mutable_budget()->set_max_density(0.5 * LongformerDensity(n, 1, 8));
  auto floor = client_->Embed(request);
  ASSERT_TRUE(floor.ok()) << floor.status();
  EXPECT_FALSE(floor->cost().budget_met());
  EXPECT_EQ(floor->cost().knobs().values().at("window"), 8);
  request.mutable_budget()->set_strict(true);
  auto strict = client_->Embed(request);
  ASSERT_FALSE(strict.ok());
  EXPECT_EQ(strict.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(NativeCheckpointServerTest, ClassifiesAsTransformersWithTheHeadOnTheGlobalToken) {
  const nlohmann::json c = Case("longformer/classifier", "padded_batch");
  for (size_t row = 0; row < c["lengths"].size(); ++row) {
    SCOPED_TRACE(row);
    if (c["lengths"][row].get<int64_t>() < 3) continue;
    v1::ClassifyRequest request;
    request.set_model("longformer-classifier");
    *request.mutable_document() = Unframed(c, row);
    auto response = client_->Classify(request);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->cost().attention(), v1::ATTENTION_KIND_LONGFORMER);
    ExpectHeadScoresOf(*response, c, row);
  }
}

TEST_F(NativeCheckpointServerTest, EmbedsTextThroughTheByteLevelTokenizer) {
  v1::EmbedRequest request;
  request.set_model("longformer");
  request.mutable_document()->set_text(
      testing::ReadFile("/usr/share/common-licenses/Apache-2.0").substr(0, 600));
  auto response = client_->Embed(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->embedding_size(), 32);
  EXPECT_GT(response->cost().input_tokens(), 100);
  EXPECT_LT(response->cost().mean_density(), 0.2);
}

TEST_F(NativeCheckpointServerTest, EmbedsAsTransformersWithItsScheduleAsTheNativePlan) {
  const nlohmann::json c = Case("modernbert/model", "single_odd");
  v1::EmbedRequest request;
  request.set_model("modernbert");
  *request.mutable_document() = Unframed(c, 0);
  auto response = client_->Embed(request);
  ASSERT_TRUE(response.ok()) << response.status();
  ExpectEmbeddingOf(*response, c, 0);
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

TEST_F(NativeCheckpointServerTest, ClassifiesAsTransformersWithTheMeanPooledHead) {
  const nlohmann::json c = Case("modernbert/classifier", "padded_batch");
  for (size_t row = 0; row < c["lengths"].size(); ++row) {
    SCOPED_TRACE(row);
    if (c["lengths"][row].get<int64_t>() < 3) continue;
    v1::ClassifyRequest request;
    request.set_model("modernbert-classifier");
    *request.mutable_document() = Unframed(c, row);
    auto response = client_->Classify(request);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->cost().attention(), v1::ATTENTION_KIND_MODERNBERT);
    ExpectHeadScoresOf(*response, c, row);
  }
}

TEST_F(NativeCheckpointServerTest, EmbedsAsTransformersWithBigBirdsBlocks) {
  for (const auto& [name, row] : std::vector<std::pair<std::string, size_t>>{
           {"odd", 0}, {"short_dense", 0}, {"just_above", 0}, {"padded_batch", 3}}) {
    SCOPED_TRACE(name);
    const nlohmann::json c = Case("bigbird/model", name);
    const int64_t n = c["lengths"][row].get<int64_t>();
    v1::EmbedRequest request;
    request.set_model("bigbird");
    *request.mutable_document() = Unframed(c, row);
    auto response = client_->Embed(request);
    ASSERT_TRUE(response.ok()) << response.status();
    ExpectEmbeddingOf(*response, c, row);
    const v1::CostReport& cost = response->cost();
    EXPECT_EQ(cost.attention(), v1::ATTENTION_KIND_BIGBIRD);
    EXPECT_EQ(cost.knobs().values().at("block_size"), 8);
    EXPECT_EQ(cost.knobs().values().at("random_blocks"), 2);
    // The copies of block 0 are computed, so they are priced.
    EXPECT_NEAR(cost.mean_density(), BigBirdDensity(n, 8, 2), 1e-9);
    EXPECT_GT(cost.attention_flops(), 0);
  }
}

TEST_F(NativeCheckpointServerTest, FewerRandomBlocksAsTransformersAndUnderACap) {
  const nlohmann::json c = Case("bigbird/model", "fewer_random");
  ASSERT_EQ(c["knobs"]["random_blocks"], 1);
  const int64_t n = c["lengths"][0].get<int64_t>();
  v1::EmbedRequest request;
  request.set_model("bigbird");
  *request.mutable_document() = Unframed(c, 0);
  for (const auto& [knob, value] : c["knobs"].items()) {
    (*request.mutable_budget()->mutable_knobs())[knob] = value.get<double>();
  }
  auto response = client_->Embed(request);
  ASSERT_TRUE(response.ok()) << response.status();
  ExpectEmbeddingOf(*response, c, 0);
  EXPECT_NEAR(response->cost().mean_density(), BigBirdDensity(n, 8, 1), 1e-9);
  // A density cap between one and two random blocks: the lattice drops to
  // one (or fewer) and meets it.
  v1::EmbedRequest capped_request;
  capped_request.set_model("bigbird");
  *capped_request.mutable_document() = Unframed(c, 0);
  const double cap = 0.5 * (BigBirdDensity(n, 8, 1) + BigBirdDensity(n, 8, 2));
  capped_request.mutable_budget()->set_max_density(cap);
  auto capped = client_->Embed(capped_request);
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_TRUE(capped->cost().budget_met());
  EXPECT_LE(capped->cost().mean_density(), cap);
  EXPECT_LE(capped->cost().knobs().values().at("random_blocks"), 1);
}

TEST_F(NativeCheckpointServerTest, ClassifiesAsTransformersWithBigBirdsHead) {
  const nlohmann::json c = Case("bigbird/classifier", "padded_batch");
  for (size_t row = 0; row < c["lengths"].size(); ++row) {
    SCOPED_TRACE(row);
    v1::ClassifyRequest request;
    request.set_model("bigbird-classifier");
    *request.mutable_document() = Unframed(c, row);
    auto response = client_->Classify(request);
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->cost().attention(), v1::ATTENTION_KIND_BIGBIRD);
    ExpectHeadScoresOf(*response, c, row);
  }
}

}  // namespace
}  // namespace docsparse
