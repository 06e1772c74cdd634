// BigBird checkpoints with their own attention on our executors, against
// Hugging Face transformers: tiny random BigBirdModel and
// BigBirdForSequenceClassification checkpoints (tests/fixtures/bigbird,
// tools/make_bigbird_fixtures.py). transformers is deterministic here (eval
// mode draws every random block as block 0), so no indices are supplied:
// the native plan must reproduce it, the copies of block 0 and the switch to
// full attention on short inputs included. Each reference row was computed
// alone (transformers lays its blocks over a batch's padded length); our
// padded batches must give the same rows.
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

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

testing::ServedCheckpoint Load(const std::string& dir) {
  testing::ServedCheckpoint loaded = testing::LoadAsServed(dir);
  if (loaded.planners != nullptr) {
    EXPECT_EQ(loaded.planners->native().kind(), AttentionKind::kBigBird);
  }
  return loaded;
}

// The case's sequences with its knobs as a request would set them.
EncoderBatch BatchOf(const nlohmann::json& c) {
  EncoderBatch batch = testing::SequencesOf(c);
  ItemAttentionOptions options;
  for (const auto& [name, value] : c["knobs"].items()) options.knobs[name] = value.get<double>();
  batch.attention_options.assign(batch.sequences.size(), options);
  return batch;
}

TEST(BigBirdParityTest, ConfigGivesTransformersLayout) {
  const testing::ServedCheckpoint loaded = Load(FixturePath("bigbird/model"));
  ASSERT_NE(loaded.encoder, nullptr);
  EXPECT_EQ(loaded.config.architecture, Architecture::kBigBird);
  const auto knobs = loaded.planners->native().Knobs();
  EXPECT_EQ(knobs.at("block_size").native, 8);
  EXPECT_EQ(knobs.at("random_blocks").native, 2);
  EXPECT_EQ(knobs.at("window_blocks").native, 3);
  EXPECT_EQ(knobs.at("global_blocks").native, 1);
  EXPECT_EQ(knobs.at("last_block_global").native, 1);
  EXPECT_EQ(knobs.at("random_at_first_block").native, 1);
  EXPECT_EQ(knobs.at("dense_up_to").native, (5 + 2 * 2) * 8);
  EXPECT_EQ(loaded.encoder->max_sequence_length(), 512);
}

TEST(BigBirdParityTest, OriginalFullIsDense) {
  BigBirdFields fields;
  fields.block_sparse = false;
  EXPECT_EQ(NativeBigBirdAttention(fields).kind, AttentionKind::kDense);
}

TEST(BigBirdParityTest, HiddenStatesMatchTransformers) {
  const testing::ServedCheckpoint loaded = Load(FixturePath("bigbird/model"));
  ASSERT_NE(loaded.encoder, nullptr);
  const nlohmann::json expected =
      nlohmann::json::parse(testing::ReadFile(FixturePath("bigbird/model/expected.json")));
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
    for (size_t i = 0; i < batch.sequences.size(); ++i) {
      const int64_t n = static_cast<int64_t>(batch.sequences[i].size());
      const at::Tensor error = (out->hidden[i].narrow(0, 0, n) - want[i].narrow(0, 0, n)).abs();
      EXPECT_LE(error.max().item<double>(), kTolerance) << "row " << i << " (" << n << " tokens)";
      // Full attention up to the threshold; above it, fewer pairs than n².
      const double threshold = c["knobs"].value("dense_up_to", 72.0);
      if (n <= threshold) {
        EXPECT_DOUBLE_EQ(costs[i].MeanDensity(), 1.0) << "row " << i;
      } else {
        EXPECT_LT(costs[i].MeanDensity(), 1.0) << "row " << i;
      }
    }
  }
}

TEST(BigBirdParityTest, ClassifierLogitsMatchTransformers) {
  const std::string dir = FixturePath("bigbird/classifier");
  const testing::ServedCheckpoint loaded = Load(dir);
  ASSERT_NE(loaded.encoder, nullptr);
  ASSERT_TRUE(loaded.config.bigbird.has_value());
  EXPECT_FALSE(loaded.config.bigbird->use_bias);
  EXPECT_TRUE(loaded.config.bigbird->rescale_embeddings);
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

// The copies of block 0 are what transformers computes: without them (the
// same pattern with drawn random blocks, none at all, or block 0 counted
// once) the rows above the threshold move well past the tolerance. So the
// parity above is not one that any BigBird-shaped plan would pass.
TEST(BigBirdParityTest, FirstBlockCopiesMatter) {
  const testing::ServedCheckpoint loaded = Load(FixturePath("bigbird/model"));
  ASSERT_NE(loaded.encoder, nullptr);
  const nlohmann::json expected =
      nlohmann::json::parse(testing::ReadFile(FixturePath("bigbird/model/expected.json")));
  const nlohmann::json& c = expected["cases"][3];
  ASSERT_EQ(c["name"], "odd");
  c10::InferenceMode inference_mode;
  EncoderBatch batch = BatchOf(c);
  batch.attention_options[0].knobs = {{"random_blocks", 0}};
  absl::StatusOr<EncoderOutput> out = loaded.encoder->Forward(batch, nullptr);
  ASSERT_TRUE(out.ok()) << out.status();
  const int64_t n = c["lengths"][0].get<int64_t>();
  const at::Tensor want = testing::JsonToTensor(c["last_hidden_state"])[0].narrow(0, 0, n);
  EXPECT_GT((out->hidden[0].narrow(0, 0, n) - want).abs().max().item<double>(), 100 * kTolerance);
}

}  // namespace
}  // namespace docsparse
