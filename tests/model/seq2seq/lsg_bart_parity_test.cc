// The LSG-BART encoder against the reference implementation
// (ccdv-ai/convert_checkpoint_to_lsg @ c56734b, LSGBartEncoder): a tiny
// random-weight LSGBartModel, every deterministic sparsity type, 1 to 3
// global tokens, lengths on and off the block grid, padded batches,
// pass_global_tokens_to_decoder on and off. Fixtures and their provenance:
// tests/fixtures/lsg/README.md.
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <nlohmann/json.hpp>

#include "model/attention/lsg_attention.h"
#include "model/checkpoint/bart_config.h"
#include "model/checkpoint/safetensors.h"
#include "model/checkpoint/safetensors_writer.h"
#include "model/seq2seq/bart_encoder.h"
#include "tests/common/fixture_paths.h"

namespace docsparse {
namespace {

using json = nlohmann::json;
using testing::FixturePath;
using testing::ReadFile;

constexpr double kTolerance = 1e-4;

at::Tensor ReadTensor(const SafetensorsFile& file, const std::string& name) {
  const TensorView* view = file.Find(name);
  EXPECT_NE(view, nullptr) << name;
  if (view == nullptr) return {};
  at::Tensor tensor = at::empty(view->shape, at::kFloat);
  std::memcpy(tensor.data_ptr<float>(), view->data, view->nbytes);
  return tensor;
}

// The case's LSG knobs as the config it was run with.
BartConfig CaseConfig(BartConfig config, const json& lsg) {
  LsgConfig native;
  native.block_size = lsg["block_size"];
  native.sparse_block_size = lsg["sparse_block_size"];
  native.sparsity_factor = lsg["sparsity_factor"];
  native.sparsity_type = *ParseLsgSparsity(lsg["sparsity_type"].get<std::string>());
  native.num_global_tokens = lsg["num_global_tokens"];
  native.adaptive = lsg["adaptive"];
  native.mask_first_token = lsg["mask_first_token"];
  native.pool_with_global = lsg["pool_with_global"];
  if (native.mask_first_token) native.pool_with_global = true;
  native.lsh_num_pre_rounds = lsg["lsh_num_pre_rounds"];
  config.lsg = native;
  config.pass_global_tokens_to_decoder = lsg["pass_global_tokens_to_decoder"];
  return config;
}

struct Fixture {
  BartConfig config;
  BartEncoderWeights weights;
  json cases;
  std::unique_ptr<SafetensorsFile> expected;
};

Fixture LoadFixture() {
  const std::string dir = FixturePath("lsg/bart");
  Fixture fixture;
  absl::StatusOr<BartConfig> config = LoadBartConfig(dir + "/config.json");
  EXPECT_TRUE(config.ok()) << config.status();
  if (config.ok()) fixture.config = *config;
  absl::StatusOr<BartEncoderWeights> weights = LoadBartEncoderWeights(dir, fixture.config);
  EXPECT_TRUE(weights.ok()) << weights.status();
  if (weights.ok()) fixture.weights = *weights;
  fixture.cases = json::parse(ReadFile(dir + "/cases.json"));
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> expected =
      SafetensorsFile::Open(dir + "/expected.safetensors");
  EXPECT_TRUE(expected.ok()) << expected.status();
  if (expected.ok()) fixture.expected = *std::move(expected);
  return fixture;
}

EncoderBatch CaseBatch(const json& c) {
  EncoderBatch batch;
  for (size_t i = 0; i < c["lengths"].size(); ++i) {
    std::vector<int32_t> ids = c["input_ids"][i];
    ids.resize(c["lengths"][i].get<size_t>());
    batch.sequences.push_back(ids);
  }
  return batch;
}

double MaxAbs(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

TEST(LsgBartConfigTest, ReadsTheFixtureConfig) {
  absl::StatusOr<BartConfig> config = LoadBartConfig(FixturePath("lsg/bart/config.json"));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->vocab_size, 128);
  EXPECT_EQ(config->hidden_size, 32);
  EXPECT_EQ(config->num_layers, 2);
  EXPECT_EQ(config->num_heads, 4);
  EXPECT_EQ(config->intermediate_size, 64);
  EXPECT_EQ(config->max_position_embeddings, 512);
  EXPECT_EQ(config->pad_token_id, 1);
  EXPECT_FALSE(config->scale_embedding);
  EXPECT_EQ(config->activation, Activation::kGelu);
  ASSERT_TRUE(config->lsg.has_value());
  EXPECT_EQ(config->lsg->block_size, 4);
  EXPECT_EQ(config->lsg->sparsity_type, LsgSparsity::kNorm);
  EXPECT_TRUE(config->pass_global_tokens_to_decoder);
}

TEST(LsgBartConfigTest, ErrorsNameTheField) {
  const json base = json::parse(ReadFile(FixturePath("lsg/bart/config.json")));
  struct Case {
    std::string key;
    json value;  // null: remove the key
    std::string message;
  };
  const std::vector<Case> cases = {
      {"d_model", nullptr, "missing field 'd_model'"},
      {"encoder_attention_heads", 5, "field 'encoder_attention_heads'"},
      {"activation_function", "swish", "field 'activation_function': unsupported value"},
      {"scale_embedding", 1, "field 'scale_embedding': expected boolean"},
      {"normalize_before", true, "field 'normalize_before'"},
      {"pass_global_tokens_to_decoder", "yes", "field 'pass_global_tokens_to_decoder'"},
      {"sparsity_type", "random", "field 'sparsity_type'"},
      {"frobnicate", 1, "unknown field 'frobnicate' for model_type bart"},
  };
  for (const Case& c : cases) {
    json config = base;
    if (c.value.is_null()) {
      config.erase(c.key);
    } else {
      config[c.key] = c.value;
    }
    const absl::StatusOr<BartConfig> parsed = ParseBartConfig(config, "config.json");
    ASSERT_FALSE(parsed.ok()) << c.key;
    EXPECT_NE(parsed.status().message().find(c.message), std::string::npos)
        << c.key << ": " << parsed.status();
  }
  // A plain BART config (no LSG fields) has no LSG settings.
  json plain = base;
  for (const char* key :
       {"adaptive", "auto_map", "base_model_prefix", "block_size", "lsh_num_pre_rounds",
        "mask_first_token", "num_global_tokens", "pass_global_tokens_to_decoder",
        "pool_with_global", "sparse_block_size", "sparsity_factor", "sparsity_type"}) {
    plain.erase(key);
  }
  plain["architectures"] = {"BartModel"};
  const absl::StatusOr<BartConfig> parsed = ParseBartConfig(plain, "config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_FALSE(parsed->lsg.has_value());
}

// Every "exact" case: each item against the reference run on that item
// alone, and against the padded reference batch wherever the reference
// itself gives the same answer batched and alone (not for bos_pooling, where
// padding reaches real tokens: model/attention/lsg_sparse_keys.h). With
// pass_global_tokens_to_decoder the reference returns the G global rows
// first, and they are compared too.
TEST(LsgBartParityTest, MatchesReference) {
  const Fixture fixture = LoadFixture();
  ASSERT_NE(fixture.expected, nullptr);
  int checked = 0;
  double worst = 0;
  for (const json& c : fixture.cases["cases"]) {
    if (c["kind"] != "exact") continue;
    const std::string name = c["name"];
    SCOPED_TRACE(name);
    const BartConfig config = CaseConfig(fixture.config, c["lsg"]);
    ASSERT_TRUE(ValidateLsgConfig(*config.lsg, name).ok());
    const BartEncoder encoder(config, fixture.weights, MakeLsgAttention(*config.lsg, 2));
    c10::InferenceMode inference_mode;
    const absl::StatusOr<EncoderOutput> output = encoder.Forward(CaseBatch(c), nullptr);
    ASSERT_TRUE(output.ok()) << output.status();
    const int64_t global_rows = encoder.global_rows();
    EXPECT_EQ(global_rows,
              config.pass_global_tokens_to_decoder ? config.lsg->num_global_tokens : 0);
    const at::Tensor batch = ReadTensor(*fixture.expected, c["output"]);
    ASSERT_EQ(output->hidden.size(1), batch.size(1));
    for (size_t i = 0; i < c["lengths"].size(); ++i) {
      const bool batch_dependent =
          c["lsg"]["sparsity_type"] == "bos_pooling" ||
          (c.contains("checks") && c["checks"].contains("batch_vs_single_max_abs") &&
           c["checks"]["batch_vs_single_max_abs"][i].get<double>() > kTolerance);
      const int64_t rows = global_rows + c["lengths"][i].get<int64_t>();
      EXPECT_EQ(output->lengths[i], c["lengths"][i].get<int64_t>());
      const at::Tensor mine = output->hidden[i].narrow(0, 0, rows);
      if (c.contains("single_outputs")) {
        const at::Tensor alone = ReadTensor(*fixture.expected, c["single_outputs"][i])[0];
        ASSERT_EQ(alone.size(0), rows);
        const double error = MaxAbs(mine, alone);
        worst = std::max(worst, error);
        EXPECT_LE(error, kTolerance) << "item " << i << " vs the reference alone";
      }
      if (!batch_dependent || !c.contains("single_outputs")) {
        const double error = MaxAbs(mine, batch[i].narrow(0, 0, rows));
        worst = std::max(worst, error);
        EXPECT_LE(error, kTolerance) << "item " << i << " vs the reference batch";
      }
    }
    ++checked;
  }
  EXPECT_EQ(checked, 32);
  RecordProperty("max_abs_error", std::to_string(worst));
  std::printf("LSG-BART: %d cases, max abs error %.3g\n", checked, worst);
}

// Costs count the global tokens as real rows, once per layer.
TEST(LsgBartParityTest, CountsCostsPerSequence) {
  const Fixture fixture = LoadFixture();
  const BartEncoder encoder(fixture.config, fixture.weights,
                            MakeLsgAttention(*fixture.config.lsg, 2));
  EncoderBatch batch;
  batch.sequences = {std::vector<int32_t>(19, 5), std::vector<int32_t>(6, 5)};
  CostAccount first(encoder.shape()), second(encoder.shape());
  const absl::StatusOr<EncoderOutput> output = encoder.Forward(batch, {&first, &second});
  ASSERT_TRUE(output.ok()) << output.status();
  EXPECT_EQ(output->hidden.size(1), 1 + 19);  // the global row first
  EXPECT_EQ(first.input_tokens(), 1 + 19);
  EXPECT_EQ(second.input_tokens(), 1 + 6);
  EXPECT_GT(first.TotalEdges(), second.TotalEdges());
  EXPECT_FALSE(encoder.Forward(EncoderBatch{}, nullptr).ok());
  batch.sequences = {std::vector<int32_t>(3, 128)};
  EXPECT_FALSE(encoder.Forward(batch, nullptr).ok()) << "id outside the vocabulary";
  batch.sequences = {std::vector<int32_t>(513, 5)};
  EXPECT_FALSE(encoder.Forward(batch, nullptr).ok()) << "longer than the position table";
}

// A task checkpoint (LSGBartForConditionalGeneration): everything under
// "model.", the token embeddings as encoder.embed_tokens (no "shared"), and
// decoder tensors we never read. Loads to the same weights; a plain BART
// config (no LSG fields) then runs dense attention, batch-independently.
TEST(LsgBartParityTest, LoadsTaskCheckpointsAndRunsPlainBart) {
  const std::string dir = FixturePath("lsg/bart");
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> base =
      SafetensorsFile::Open(dir + "/model.safetensors");
  ASSERT_TRUE(base.ok()) << base.status();
  std::vector<TensorBytes> tensors;
  for (const std::string& name : (*base)->names()) {
    TensorBytes bytes = TensorBytes::FromView(*(*base)->Find(name));
    bytes.name = "model." + (name == "shared.weight" ? "encoder.embed_tokens.weight" : name);
    tensors.push_back(bytes);
  }
  const std::filesystem::path task =
      std::filesystem::path(::testing::TempDir()) / ("bart-task." + std::to_string(getpid()));
  std::filesystem::create_directories(task);
  ASSERT_TRUE(
      WriteSafetensorsFile((task / "model.safetensors").string(), tensors, {{"format", "pt"}})
          .ok());
  const Fixture fixture = LoadFixture();
  const absl::StatusOr<BartEncoderWeights> loaded =
      LoadBartEncoderWeights(task.string(), fixture.config);
  std::filesystem::remove_all(task);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_TRUE(loaded->token_embeddings.equal(fixture.weights.token_embeddings));
  EXPECT_TRUE(loaded->global_embeddings.equal(fixture.weights.global_embeddings));
  EXPECT_TRUE(loaded->layers[1].fc2_weight.equal(fixture.weights.layers[1].fc2_weight));

  BartConfig plain = fixture.config;
  plain.lsg.reset();
  const BartEncoder encoder(plain, *loaded, MakeDenseAttention());
  EXPECT_EQ(encoder.global_rows(), 0);
  EncoderBatch batch;
  batch.sequences = {{0, 5, 9, 44, 17, 2}, {0, 7, 2}};
  const absl::StatusOr<EncoderOutput> both = encoder.Forward(batch, nullptr);
  ASSERT_TRUE(both.ok()) << both.status();
  ASSERT_EQ(both->hidden.size(1), 6);
  EncoderBatch second;
  second.sequences = {batch.sequences[1]};
  const absl::StatusOr<EncoderOutput> alone = encoder.Forward(second, nullptr);
  ASSERT_TRUE(alone.ok()) << alone.status();
  EXPECT_LE(MaxAbs(both->hidden[1].narrow(0, 0, 3), alone->hidden[0]), 1e-5);
  EXPECT_TRUE(both->hidden.isfinite().all().item<bool>());
}

}  // namespace
}  // namespace docsparse
