// ModernBERT checkpoints with their own attention schedule on our
// executors, against Hugging Face transformers: tiny random ModernBertModel
// and ModernBertForSequenceClassification checkpoints in the published
// config format (tests/fixtures/modernbert, tools/make_modernbert_fixtures.py):
// rotary positions, pre-norm layers, GeGLU, no biases, every third layer
// global and the others a sliding window, mean-pooled classifier head.
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <nlohmann/json.hpp>

#include "model/encoder/classification_head.h"
#include "model/encoder/encoder.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/json_tensor.h"
#include "tests/model/encoder/served_checkpoint.h"

namespace docsparse {
namespace {

using testing::FixturePath;

constexpr double kTolerance = 1e-4;

using testing::LoadAsServed;
using testing::SequencesOf;

// The checkpoint as served; its native planner must be ModernBERT's.
testing::ServedCheckpoint Load(const std::string& dir) {
  testing::ServedCheckpoint loaded = LoadAsServed(dir);
  if (loaded.planners != nullptr) {
    EXPECT_EQ(loaded.planners->native().kind(), AttentionKind::kModernBert);
  }
  return loaded;
}

// Mean density over layers of n tokens: full layers n², sliding ones
// |i - j| <= half.
double ScheduleDensity(int64_t n, const std::vector<bool>& full, int64_t half) {
  int64_t band = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) band += std::abs(i - j) <= half ? 1 : 0;
  }
  double total = 0;
  for (const bool dense : full) {
    total += dense ? 1.0 : static_cast<double>(band) / static_cast<double>(n * n);
  }
  return total / static_cast<double>(full.size());
}

TEST(ModernBertParityTest, PublishedConfigGivesItsSchedule) {
  const testing::ServedCheckpoint loaded = Load(FixturePath("modernbert/model"));
  ASSERT_NE(loaded.encoder, nullptr);
  ASSERT_TRUE(loaded.config.modernbert.has_value());
  EXPECT_EQ(loaded.config.architecture, Architecture::kModernBert);
  EXPECT_EQ(loaded.config.modernbert->global_layers, (std::vector<bool>{true, false, false, true}));
  EXPECT_EQ(loaded.config.modernbert->local_attention, 8);
  EXPECT_EQ(loaded.planners->native().Knobs().at("window").native, 8);
  EXPECT_EQ(loaded.encoder->max_sequence_length(), 128);
}

TEST(ModernBertParityTest, HiddenStatesMatchTransformers) {
  const testing::ServedCheckpoint loaded = Load(FixturePath("modernbert/model"));
  ASSERT_NE(loaded.encoder, nullptr);
  const nlohmann::json expected =
      nlohmann::json::parse(testing::ReadFile(FixturePath("modernbert/model/expected.json")));
  c10::InferenceMode inference_mode;
  ASSERT_GE(expected["cases"].size(), 4u);
  for (const nlohmann::json& c : expected["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const EncoderBatch batch = SequencesOf(c);
    std::vector<CostAccount> costs(batch.sequences.size(), CostAccount(loaded.encoder->shape()));
    std::vector<CostAccount*> rows;
    for (CostAccount& cost : costs) rows.push_back(&cost);
    absl::StatusOr<EncoderOutput> out = loaded.encoder->Forward(batch, rows);
    ASSERT_TRUE(out.ok()) << out.status();
    const at::Tensor want = testing::JsonToTensor(c["last_hidden_state"]);
    for (size_t i = 0; i < batch.sequences.size(); ++i) {
      const int64_t n = static_cast<int64_t>(batch.sequences[i].size());
      const at::Tensor error = (out->hidden[i].narrow(0, 0, n) - want[i].narrow(0, 0, n)).abs();
      EXPECT_LE(error.max().item<double>(), kTolerance) << "row " << i;
      EXPECT_NEAR(costs[i].MeanDensity(),
                  ScheduleDensity(n, loaded.config.modernbert->global_layers, 4), 1e-12)
          << "row " << i;
    }
  }
}

TEST(ModernBertParityTest, MeanPooledClassifierMatchesTransformers) {
  const std::string dir = FixturePath("modernbert/classifier");
  const testing::ServedCheckpoint loaded = Load(dir);
  ASSERT_NE(loaded.encoder, nullptr);
  absl::StatusOr<std::unique_ptr<ClassificationHead>> head =
      ClassificationHead::Load(dir, loaded.config);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ((*head)->pooling(), PoolingMode::kMean);
  const nlohmann::json expected = nlohmann::json::parse(testing::ReadFile(dir + "/expected.json"));
  c10::InferenceMode inference_mode;
  for (const nlohmann::json& c : expected["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    absl::StatusOr<EncoderOutput> out = loaded.encoder->Forward(SequencesOf(c), nullptr);
    ASSERT_TRUE(out.ok()) << out.status();
    const at::Tensor logits = (*head)->Logits(out->hidden, out->lengths);
    EXPECT_LE((logits - testing::JsonToTensor(c["logits"])).abs().max().item<double>(), kTolerance);
  }
}

// The budget's lever below the dense layers' share: full_layers 0 runs the
// window on every layer (density of the band alone), and the window knob
// narrows it.
TEST(ModernBertParityTest, KnobsMoveTheWindowAndTheFullLayers) {
  const testing::ServedCheckpoint loaded = Load(FixturePath("modernbert/model"));
  ASSERT_NE(loaded.encoder, nullptr);
  c10::InferenceMode inference_mode;
  EncoderBatch batch;
  batch.sequences = {std::vector<int32_t>(60, 7)};
  ItemAttentionOptions options;
  options.knobs = {{"window", 4}, {"full_layers", 0}};
  batch.attention_options = {options};
  CostAccount cost(loaded.encoder->shape());
  ASSERT_TRUE(loaded.encoder->Forward(batch, &cost).ok());
  EXPECT_NEAR(cost.MeanDensity(), ScheduleDensity(60, {false, false, false, false}, 2), 1e-12);
  const AttentionPlanner& planner = loaded.planners->native();
  const BudgetFit fit = planner.FitBudget(
      AttentionCap{0.2, std::nullopt}, StartingKnobs(planner, {}), {60}, loaded.encoder->shape());
  EXPECT_TRUE(fit.fits);
  EXPECT_EQ(fit.knobs.at("full_layers"), 0);
}

}  // namespace
}  // namespace docsparse
