// The position and content patterns through the real server (the planner
// contract, DESIGN.md): any encoder serves Longformer, BigBird, Sparse
// Transformer, Star, ETC, LSH, routing and a union of plans by
// budget.attention, with a request's knobs by name, budgets that move them,
// cost reports that name them, and model folders whose docsparse.json makes
// one of them (BigBird; a union of Star and LSH) their own.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>
#include <vector>

#include "client/docsparse_client.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/running_server.h"

namespace docsparse {
namespace {

namespace fs = std::filesystem;

// A copy of models/minilm-lsg's files with `docsparse_json` as its own.
void AddCopy(const fs::path& dir, const std::string& name, const std::string& docsparse_json) {
  const fs::path lsg = testing::SourcePath("models/minilm-lsg");
  fs::create_directories(dir / name);
  for (const auto& entry : fs::directory_iterator(lsg)) {
    if (entry.path().filename() == "docsparse.json") continue;
    fs::create_symlink(entry.path(), dir / name / entry.path().filename());
  }
  std::ofstream(dir / name / "docsparse.json") << docsparse_json;
}

// models/minilm-lsg as it is, a copy whose docsparse.json serves BigBird and
// one that serves a union of Star and LSH.
fs::path PatternRepository() {
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("docsparse-pattern-models." + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  fs::create_directory_symlink(testing::SourcePath("models/minilm-lsg"), dir / "minilm-lsg");
  AddCopy(dir, "minilm-bigbird",
          R"({"tasks": ["embed"], "max_document_tokens": 65536, "overflow": "chunk",
             "attention": {"kind": "bigbird", "knobs": {"block_size": 32, "random_blocks": 2}}})");
  AddCopy(dir, "minilm-union",
          R"({"tasks": ["embed"], "max_document_tokens": 65536, "overflow": "chunk",
             "attention": {"kind": "union", "union": ["star", "lsh"],
                           "knobs": {"lsh.chunk": 32}}})");
  return dir;
}

double Cosine(const v1::EmbedResponse& a, const v1::EmbedResponse& b) {
  double dot = 0, na = 0, nb = 0;
  for (int i = 0; i < a.embedding_size(); ++i) {
    dot += static_cast<double>(a.embedding(i)) * b.embedding(i);
    na += static_cast<double>(a.embedding(i)) * a.embedding(i);
    nb += static_cast<double>(b.embedding(i)) * b.embedding(i);
  }
  return dot / std::sqrt(na * nb);
}

class PatternServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(fs::exists(testing::SourcePath("models/minilm-lsg/config.json")))
        << "models/minilm-lsg is missing: run scripts/prepare-models";
    repository_ = PatternRepository();
    server_ = new testing::RunningServer();
    ASSERT_NO_FATAL_FAILURE(testing::StartServer(repository_.string(), {"--threads=2"}, server_));
    client_ = server_->client.get();
  }

  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    client_ = nullptr;
    fs::remove_all(repository_);
  }

  // GPL-3 (~8k tokens) in one pass of minilm-lsg.
  static v1::EmbedRequest Gpl3() {
    v1::EmbedRequest request;
    request.set_model("minilm-lsg");
    request.mutable_document()->set_text(testing::ReadFile("/usr/share/common-licenses/GPL-3"));
    request.mutable_budget()->set_seed(5);
    return request;
  }

  static fs::path repository_;
  static testing::RunningServer* server_;
  static DocsparseClient* client_;
};

fs::path PatternServerTest::repository_;
testing::RunningServer* PatternServerTest::server_ = nullptr;
DocsparseClient* PatternServerTest::client_ = nullptr;

TEST_F(PatternServerTest, EveryEncoderListsThePatternsWithTheirKnobs) {
  auto models = client_->ListModels();
  ASSERT_TRUE(models.ok()) << models.status();
  for (const v1::ModelInfo& model : models->models()) {
    std::set<int> kinds(model.available_attention().begin(), model.available_attention().end());
    for (int kind :
         {v1::ATTENTION_KIND_DENSE, v1::ATTENTION_KIND_LONGFORMER, v1::ATTENTION_KIND_BIGBIRD,
          v1::ATTENTION_KIND_SPARSE_TRANSFORMER, v1::ATTENTION_KIND_STAR, v1::ATTENTION_KIND_ETC,
          v1::ATTENTION_KIND_LSH, v1::ATTENTION_KIND_ROUTING, v1::ATTENTION_KIND_UNION}) {
      EXPECT_EQ(kinds.count(kind), 1u) << model.name() << " lacks " << kind;
    }
    ASSERT_EQ(model.planners_size(), model.available_attention_size());
    for (const v1::PlannerInfo& planner : model.planners()) {
      if (planner.attention() == v1::ATTENTION_KIND_LONGFORMER) {
        EXPECT_EQ(planner.knobs().at("window").native(), 512);
        EXPECT_EQ(planner.knobs().at("dilated_heads").max(), 12);
      }
      if (planner.attention() == v1::ATTENTION_KIND_BIGBIRD) {
        EXPECT_TRUE(planner.samples());
        // docsparse.json's knobs are minilm-bigbird's natives.
        EXPECT_EQ(planner.knobs().at("block_size").native(),
                  model.name() == "minilm-bigbird" ? 32 : 64);
      }
    }
    if (model.name() == "minilm-bigbird") {
      EXPECT_EQ(model.attention(), v1::ATTENTION_KIND_BIGBIRD);
    }
  }
}

TEST_F(PatternServerTest, AFolderServesTheUnionItsDocsparseJsonNames) {
  auto models = client_->ListModels();
  ASSERT_TRUE(models.ok()) << models.status();
  const v1::ModelInfo* served = nullptr;
  for (const v1::ModelInfo& model : models->models()) {
    if (model.name() == "minilm-union") served = &model;
  }
  ASSERT_NE(served, nullptr);
  EXPECT_EQ(served->attention(), v1::ATTENTION_KIND_UNION);
  for (const v1::PlannerInfo& planner : served->planners()) {
    if (planner.attention() != v1::ATTENTION_KIND_UNION) continue;
    EXPECT_EQ(planner.knobs().at("lsh.chunk").native(), 32);
    EXPECT_EQ(planner.knobs().count("star.radius"), 1u);
    EXPECT_EQ(planner.knobs().count("longformer.window"), 0u);
  }

  v1::EmbedRequest request = Gpl3();
  request.set_model("minilm-union");
  auto response = client_->Embed(request, absl::Seconds(300));
  ASSERT_TRUE(response.ok()) << response.status();
  const v1::CostReport& cost = response->cost();
  EXPECT_EQ(cost.attention(), v1::ATTENTION_KIND_UNION);
  EXPECT_EQ(cost.knobs().values().at("lsh.chunk"), 32);
  // Star's band of 3 and a relay token, plus LSH's 2 rounds of two 32-key
  // chunks, over ~6,800 tokens: at most (3 + 1 + 128) keys per row and the
  // relay row, counted once.
  EXPECT_GT(cost.mean_density(), 0.0);
  EXPECT_LT(cost.mean_density(), 0.03);
}

TEST_F(PatternServerTest, EachPatternEmbedsALongDocumentInOnePassAndReportsItsKnobs) {
  v1::EmbedRequest dense_request = Gpl3();
  dense_request.mutable_budget()->set_attention(v1::ATTENTION_KIND_DENSE);
  auto dense = client_->Embed(dense_request, absl::Seconds(300));
  ASSERT_TRUE(dense.ok()) << dense.status();
  for (auto [kind, knob] : std::vector<std::pair<v1::AttentionKind, const char*>>{
           {v1::ATTENTION_KIND_LONGFORMER, "window"},
           {v1::ATTENTION_KIND_BIGBIRD, "random_blocks"},
           {v1::ATTENTION_KIND_SPARSE_TRANSFORMER, "stride"},
           {v1::ATTENTION_KIND_STAR, "radius"},
           {v1::ATTENTION_KIND_ETC, "hard_g2l"},
           {v1::ATTENTION_KIND_LSH, "chunk"},
           {v1::ATTENTION_KIND_ROUTING, "clusters"},
           {v1::ATTENTION_KIND_UNION, "lsh.chunk"}}) {
    v1::EmbedRequest request = Gpl3();
    request.mutable_budget()->set_attention(kind);
    request.mutable_options()->set_return_mask_map(true);
    auto response = client_->Embed(request, absl::Seconds(300));
    ASSERT_TRUE(response.ok()) << kind << ": " << response.status();
    const v1::CostReport& cost = response->cost();
    EXPECT_EQ(cost.attention(), kind);
    EXPECT_EQ(cost.windows(), 1);
    EXPECT_GT(cost.mean_density(), 0.0);
    EXPECT_LT(cost.mean_density(), 0.25) << kind;
    EXPECT_EQ(cost.knobs().values().count(knob), 1u) << kind;
    EXPECT_EQ(cost.mask_maps_size(), 6);
    const double cosine = Cosine(*response, *dense);
    std::printf("%s: density %.4f, attention %.2f GFLOP (dense %.2f), cosine to dense %.4f\n",
                v1::AttentionKind_Name(kind).c_str(), cost.mean_density(),
                cost.attention_flops() / 1e9, dense->cost().attention_flops() / 1e9, cosine);
    // Untrained, a band of 3 (Star) keeps little of the dense embedding
    // (0.59 when written) and routing's clusters not much more (0.75); LSH
    // 0.85, the wide patterns and the default union (Longformer + LSH) ~0.9.
    const double floor = kind == v1::ATTENTION_KIND_STAR      ? 0.45
                         : kind == v1::ATTENTION_KIND_ROUTING ? 0.65
                         : kind == v1::ATTENTION_KIND_LSH     ? 0.78
                                                              : 0.85;
    EXPECT_GT(cosine, floor) << kind;
  }
}

TEST_F(PatternServerTest, RequestKnobsAndCapsMoveThePlan) {
  v1::EmbedRequest request = Gpl3();
  request.mutable_budget()->set_attention(v1::ATTENTION_KIND_LONGFORMER);
  auto native = client_->Embed(request, absl::Seconds(300));
  ASSERT_TRUE(native.ok()) << native.status();
  (*request.mutable_budget()->mutable_knobs())["window"] = 64;
  auto narrow = client_->Embed(request, absl::Seconds(300));
  ASSERT_TRUE(narrow.ok()) << narrow.status();
  EXPECT_EQ(narrow->cost().knobs().values().at("window"), 64);
  EXPECT_EQ(narrow->cost().knobs().window(), 64);
  EXPECT_LT(narrow->cost().attention_edges(), native->cost().attention_edges() / 4);

  // A cap moves the window down the lattice from the request's own.
  request.mutable_budget()->mutable_knobs()->clear();
  request.mutable_budget()->set_max_density(native->cost().mean_density() / 3);
  auto capped = client_->Embed(request, absl::Seconds(300));
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_TRUE(capped->cost().budget_met());
  EXPECT_LE(capped->cost().mean_density(), native->cost().mean_density() / 3);
  EXPECT_LT(capped->cost().knobs().values().at("window"), 512);

  request.mutable_budget()->set_max_density(1e-6);
  request.mutable_budget()->set_strict(true);
  auto refused = client_->Embed(request);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("budget.max_density: 1e-06 is below the minimum"),
            std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("longformer: the narrowest window"), std::string::npos)
      << refused.status();
}

TEST_F(PatternServerTest, KnobsAPlannerDoesNotHaveAreRefusedByName) {
  v1::EmbedRequest request = Gpl3();
  request.mutable_budget()->set_attention(v1::ATTENTION_KIND_STAR);
  (*request.mutable_budget()->mutable_knobs())["window"] = 64;
  auto unknown = client_->Embed(request);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find(
                "budget.knobs.window: not a knob of star attention (radius, relay_tokens)"),
            std::string::npos)
      << unknown.status();

  request.mutable_budget()->set_attention(v1::ATTENTION_KIND_LONGFORMER);
  (*request.mutable_budget()->mutable_knobs())["window"] = 63;
  auto odd = client_->Embed(request);
  EXPECT_EQ(odd.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(odd.status().message().find("window: 63 must be even"), std::string::npos)
      << odd.status();
}

TEST_F(PatternServerTest, AFolderMayServeAPatternAsItsOwn) {
  v1::EmbedRequest request = Gpl3();
  request.set_model("minilm-bigbird");
  auto first = client_->Embed(request, absl::Seconds(300));
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->cost().attention(), v1::ATTENTION_KIND_BIGBIRD);
  EXPECT_EQ(first->cost().knobs().values().at("block_size"), 32);
  EXPECT_EQ(first->cost().knobs().random_blocks(), 2);
  EXPECT_EQ(first->cost().knobs().seed(), 5u);
  // Same seed, same random blocks, same embedding; another seed, others.
  auto again = client_->Embed(request, absl::Seconds(300));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(std::vector<float>(first->embedding().begin(), first->embedding().end()),
            std::vector<float>(again->embedding().begin(), again->embedding().end()));
  EXPECT_EQ(first->cost().attention_edges(), again->cost().attention_edges());
  request.mutable_budget()->set_seed(6);
  auto reseeded = client_->Embed(request, absl::Seconds(300));
  ASSERT_TRUE(reseeded.ok()) << reseeded.status();
  EXPECT_LT(Cosine(*first, *reseeded), 1.0);
}

}  // namespace
}  // namespace docsparse
