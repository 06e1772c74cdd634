// Longformer checkpoints with their own attention on our executors, against
// Hugging Face transformers: tiny random LongformerModel and
// LongformerForSequenceClassification checkpoints
// (tests/fixtures/longformer, tools/make_longformer_fixtures.py), each case
// run with its global tokens and window as a request's knobs would set them.
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <algorithm>
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

// The checkpoint as served; its native planner must be Longformer's.
testing::ServedCheckpoint Load(const std::string& dir) {
  testing::ServedCheckpoint loaded = testing::LoadAsServed(dir);
  if (loaded.planners != nullptr) {
    EXPECT_EQ(loaded.planners->native().kind(), AttentionKind::kLongformer);
  }
  return loaded;
}

// The case's sequences with its global tokens and window as request knobs.
EncoderBatch BatchOf(const nlohmann::json& c) {
  EncoderBatch batch = testing::SequencesOf(c);
  ItemAttentionOptions options;
  options.knobs = {{"global_tokens", c["global_tokens"].get<double>()},
                   {"window", c["window"].get<double>()}};
  batch.attention_options.assign(batch.sequences.size(), options);
  return batch;
}

// Pairs (i, j) of n tokens that Longformer's definition lets attend: i or j
// among the first g tokens, or |i - j| <= w/2.
int64_t LongformerPairs(int64_t n, int64_t g, int64_t w) {
  int64_t pairs = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      pairs += (i < g || j < g || std::abs(i - j) <= w / 2) ? 1 : 0;
    }
  }
  return pairs;
}

TEST(LongformerParityTest, ConfigGivesTheNativePattern) {
  const testing::ServedCheckpoint loaded = Load(FixturePath("longformer/model"));
  ASSERT_NE(loaded.encoder, nullptr);
  EXPECT_EQ(loaded.config.architecture, Architecture::kLongformer);
  EXPECT_EQ(loaded.config.attention_window, 8);
  EXPECT_EQ(loaded.planners->native().Knobs().at("window").native, 8);
  EXPECT_EQ(loaded.planners->native().Knobs().at("global_tokens").native, 1);
  // RoBERTa's positions: 258 rows from pad_token_id + 1 = 2.
  EXPECT_EQ(loaded.encoder->max_sequence_length(), 256);
}

TEST(LongformerParityTest, HiddenStatesMatchTransformers) {
  const testing::ServedCheckpoint loaded = Load(FixturePath("longformer/model"));
  ASSERT_NE(loaded.encoder, nullptr);
  const nlohmann::json expected =
      nlohmann::json::parse(testing::ReadFile(FixturePath("longformer/model/expected.json")));
  c10::InferenceMode inference_mode;
  ASSERT_GE(expected["cases"].size(), 7u);
  for (const nlohmann::json& c : expected["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    const EncoderBatch batch = BatchOf(c);
    std::vector<CostAccount> costs(batch.sequences.size(), CostAccount(loaded.encoder->shape()));
    std::vector<CostAccount*> cost_rows;
    for (CostAccount& cost : costs) cost_rows.push_back(&cost);
    absl::StatusOr<EncoderOutput> out = loaded.encoder->Forward(batch, cost_rows);
    ASSERT_TRUE(out.ok()) << out.status();
    const at::Tensor want = testing::JsonToTensor(c["last_hidden_state"]);
    const int64_t g = c["global_tokens"].get<int64_t>();
    const int64_t w = c["window"].get<int64_t>();
    for (size_t i = 0; i < batch.sequences.size(); ++i) {
      const int64_t n = static_cast<int64_t>(batch.sequences[i].size());
      const at::Tensor error = (out->hidden[i].narrow(0, 0, n) - want[i].narrow(0, 0, n)).abs();
      EXPECT_LE(error.max().item<double>(), kTolerance) << "row " << i;
      // Density counted once per pair, as the definition's mask has it.
      const double pairs = static_cast<double>(LongformerPairs(n, g, w));
      EXPECT_NEAR(costs[i].MeanDensity(), pairs / static_cast<double>(n * n), 1e-12) << "row " << i;
    }
  }
}

TEST(LongformerParityTest, ClassifierLogitsMatchTransformers) {
  const std::string dir = FixturePath("longformer/classifier");
  const testing::ServedCheckpoint loaded = Load(dir);
  ASSERT_NE(loaded.encoder, nullptr);
  ASSERT_TRUE(loaded.config.has_classification_head);
  absl::StatusOr<std::unique_ptr<ClassificationHead>> head =
      ClassificationHead::Load(dir, loaded.config);
  ASSERT_TRUE(head.ok()) << head.status();
  EXPECT_EQ((*head)->labels(), (std::vector<std::string>{"alpha", "beta", "gamma"}));
  const nlohmann::json expected = nlohmann::json::parse(testing::ReadFile(dir + "/expected.json"));
  c10::InferenceMode inference_mode;
  for (const nlohmann::json& c : expected["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    absl::StatusOr<EncoderOutput> out = loaded.encoder->Forward(BatchOf(c), nullptr);
    ASSERT_TRUE(out.ok()) << out.status();
    const at::Tensor logits = (*head)->Logits(out->hidden, out->lengths);
    EXPECT_LE((logits - testing::JsonToTensor(c["logits"])).abs().max().item<double>(), kTolerance);
  }
}

// Every planner runs behind one switching mechanism, as in the server: a
// batch mixing a Longformer row with a row asking for dense attention runs
// each group apart; the Longformer row still gets its global projections.
TEST(LongformerParityTest, MixedBatchKeepsTheGlobalProjections) {
  const std::string dir = FixturePath("longformer/model");
  const testing::ServedCheckpoint loaded = Load(dir);
  ASSERT_NE(loaded.encoder, nullptr);
  const nlohmann::json expected = nlohmann::json::parse(testing::ReadFile(dir + "/expected.json"));
  const nlohmann::json& c = expected["cases"][1];
  ASSERT_EQ(c["name"], "single_odd");
  c10::InferenceMode inference_mode;
  EncoderBatch batch = BatchOf(c);
  batch.sequences.push_back(std::vector<int32_t>(70, 7));
  ItemAttentionOptions dense;
  dense.kind = AttentionKind::kDense;
  batch.attention_options.push_back(dense);
  absl::StatusOr<EncoderOutput> out = loaded.encoder->Forward(batch, nullptr);
  ASSERT_TRUE(out.ok()) << out.status();
  const int64_t n = c["lengths"][0].get<int64_t>();
  const at::Tensor want = testing::JsonToTensor(c["last_hidden_state"])[0].narrow(0, 0, n);
  EXPECT_LE((out->hidden[0].narrow(0, 0, n) - want).abs().max().item<double>(), kTolerance);
}

}  // namespace
}  // namespace docsparse
