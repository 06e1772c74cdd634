// The default model, models/minilm-lsg (all-MiniLM-L6-v2 converted to LSG for
// 16384 tokens by scripts/prepare-models), through the real server: a
// 16384-token document in one pass, GPL-3 natively, and budgets that pick
// cheaper LSG knobs.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "client/docsparse_client.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/running_server.h"

namespace docsparse {
namespace {

class LsgServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    ASSERT_TRUE(std::filesystem::exists(testing::SourcePath("models/minilm-lsg/config.json")))
        << "models/minilm-lsg is missing: run scripts/prepare-models";
    server_ = new testing::RunningServer();
    ASSERT_NO_FATAL_FAILURE(
        testing::StartServer(testing::SourcePath("models"), {"--threads=2"}, server_));
    client_ = server_->client.get();
  }

  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    client_ = nullptr;
  }

  static testing::RunningServer* server_;
  static DocsparseClient* client_;
};

testing::RunningServer* LsgServerTest::server_ = nullptr;
DocsparseClient* LsgServerTest::client_ = nullptr;

TEST_F(LsgServerTest, DefaultModelIsLsg) {
  auto models = client_->ListModels();
  ASSERT_TRUE(models.ok()) << models.status();
  bool found = false;
  for (const auto& model : models->models()) {
    if (model.name() != "minilm-lsg") continue;
    found = true;
    EXPECT_EQ(model.attention(), v1::ATTENTION_KIND_LSG);
  }
  EXPECT_TRUE(found);
  v1::EmbedRequest request;  // no model named: the default
  request.mutable_document()->set_text("A short sentence.");
  auto response = client_->Embed(request);
  ASSERT_TRUE(response.ok()) << response.status();
  EXPECT_EQ(response->model(), "minilm-lsg");
}

// 16382 token ids + [CLS] and [SEP] = 16384, the converted position table.
TEST_F(LsgServerTest, Embeds16384TokensInOnePass) {
  v1::EmbedRequest request;
  request.set_model("minilm-lsg");
  for (int i = 0; i < 16382; ++i) {
    request.mutable_document()->mutable_token_ids()->add_ids(2000 + (i * 7919) % 20000);
  }
  auto response = client_->Embed(request, absl::Seconds(300));
  ASSERT_TRUE(response.ok()) << response.status();
  ASSERT_EQ(response->embedding_size(), 384);
  double norm = 0;
  for (float x : response->embedding()) norm += static_cast<double>(x) * x;
  EXPECT_NEAR(std::sqrt(norm), 1.0, 1e-4);
  const v1::CostReport& cost = response->cost();
  EXPECT_EQ(cost.attention(), v1::ATTENTION_KIND_LSG);
  EXPECT_EQ(cost.windows(), 1);
  EXPECT_EQ(cost.input_tokens(), 16384 + 1);  // the global token counts
  EXPECT_GT(cost.mean_density(), 0.0);
  EXPECT_LT(cost.mean_density(), 0.05);
  EXPECT_LT(cost.attention_flops(), cost.dense_equivalent_flops() / 10);
}

// The same document under three density caps: densities and FLOPs order as
// the caps do, each cap is met, and a cap below the lattice's cheapest plan
// is refused with strict and reported unmet without.
TEST_F(LsgServerTest, BudgetsOrderDensityAndFlops) {
  const std::string gpl3 = testing::ReadFile("/usr/share/common-licenses/GPL-3");
  std::vector<double> densities, flops;
  for (double cap : {0.08, 0.03, 0.012}) {
    v1::EmbedRequest request;
    request.set_model("minilm-lsg");
    request.mutable_document()->set_text(gpl3);
    request.mutable_budget()->set_max_density(cap);
    auto response = client_->Embed(request, absl::Seconds(120));
    ASSERT_TRUE(response.ok()) << response.status();
    EXPECT_EQ(response->cost().windows(), 1) << "GPL-3 fits one LSG pass";
    EXPECT_TRUE(response->cost().budget_met()) << cap;
    EXPECT_LE(response->cost().mean_density(), cap);
    densities.push_back(response->cost().mean_density());
    flops.push_back(response->cost().attention_flops());
  }
  EXPECT_GT(densities[0], densities[1]);
  EXPECT_GT(densities[1], densities[2]);
  EXPECT_GT(flops[0], flops[1]);
  EXPECT_GT(flops[1], flops[2]);

  v1::EmbedRequest tight;
  tight.set_model("minilm-lsg");
  tight.mutable_document()->set_text(gpl3);
  tight.mutable_budget()->set_max_density(0.0001);
  auto unmet = client_->Embed(tight, absl::Seconds(120));
  ASSERT_TRUE(unmet.ok()) << unmet.status();
  EXPECT_FALSE(unmet->cost().budget_met());
  tight.mutable_budget()->set_strict(true);
  auto refused = client_->Embed(tight, absl::Seconds(120));
  ASSERT_FALSE(refused.ok());
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(refused.status().message().find("budget.max_density"), std::string::npos);
  EXPECT_NE(refused.status().message().find("minimum"), std::string::npos);
}

}  // namespace
}  // namespace docsparse
