// Loading BART-family checkpoints: the fixture configs, Pegasus' config
// rules, and broken checkpoints, whose errors must name the tensor or field.
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/attention/planner_registry.h"
#include "model/checkpoint/bart_config.h"
#include "model/checkpoint/safetensors_writer.h"
#include "model/seq2seq/seq2seq_embeddings.h"
#include "model/seq2seq/seq2seq_model.h"
#include "tests/model/seq2seq/seq2seq_fixture.h"

namespace docsparse {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;
using testing::FixturePath;
using testing::ReadFile;

json FixtureConfig(const std::string& model) {
  return json::parse(ReadFile(FixturePath("seq2seq/" + model + "/config.json")));
}

// A scratch checkpoint folder: `config` and the fixture's tensors after
// `edit` (which may drop, replace or add entries), removed on destruction.
class EditedCheckpoint {
 public:
  EditedCheckpoint(const std::string& model, const json& config,
                   const std::function<void(std::vector<TensorBytes>&)>& edit)
      : dir_(fs::path(::testing::TempDir()) /
             ("seq2seq-edit-" + std::to_string(getpid()) + "-" + std::to_string(counter_++))) {
    fs::create_directories(dir_);
    std::ofstream(dir_ / "config.json") << config.dump(2);
    absl::StatusOr<std::unique_ptr<SafetensorsFile>> source =
        SafetensorsFile::Open(FixturePath("seq2seq/" + model + "/model.safetensors"));
    EXPECT_TRUE(source.ok()) << source.status();
    if (!source.ok()) return;
    std::vector<TensorBytes> tensors;
    for (const std::string& name : (*source)->names()) {
      tensors.push_back(TensorBytes::FromView(*(*source)->Find(name)));
    }
    edit(tensors);
    const absl::Status written =
        WriteSafetensorsFile((dir_ / "model.safetensors").string(), tensors, {{"format", "pt"}});
    EXPECT_TRUE(written.ok()) << written;
  }
  ~EditedCheckpoint() { fs::remove_all(dir_); }

  std::string dir() const { return dir_.string(); }

 private:
  static inline int counter_ = 0;
  fs::path dir_;
};

void Drop(std::vector<TensorBytes>& tensors, const std::string& name) {
  const size_t before = tensors.size();
  tensors.erase(std::remove_if(tensors.begin(), tensors.end(),
                               [&](const TensorBytes& t) { return t.name == name; }),
                tensors.end());
  EXPECT_EQ(tensors.size() + 1, before) << name;
}

TEST(Seq2SeqCheckpointTest, ReadsTheFixtureConfigs) {
  absl::StatusOr<BartConfig> bart = LoadBartConfig(FixturePath("seq2seq/bart/config.json"));
  ASSERT_TRUE(bart.ok()) << bart.status();
  EXPECT_EQ(bart->architecture, Seq2SeqArchitecture::kBart);
  EXPECT_EQ(bart->vocab_size, 4001);
  EXPECT_EQ(bart->decoder_layers, 2);
  EXPECT_EQ(bart->decoder_heads, 4);
  EXPECT_EQ(bart->decoder_ffn_size, 64);
  EXPECT_TRUE(bart->tie_word_embeddings);
  EXPECT_FALSE(bart->pre_layer_norm());
  EXPECT_EQ(bart->position_offset(), 2);
  EXPECT_FALSE(bart->lsg.has_value());

  absl::StatusOr<BartConfig> pegasus = LoadBartConfig(FixturePath("seq2seq/pegasus/config.json"));
  ASSERT_TRUE(pegasus.ok()) << pegasus.status();
  EXPECT_EQ(pegasus->architecture, Seq2SeqArchitecture::kPegasus);
  EXPECT_EQ(pegasus->vocab_size, 2603);
  EXPECT_EQ(pegasus->activation, Activation::kRelu);
  EXPECT_TRUE(pegasus->scale_embedding);
  EXPECT_TRUE(pegasus->pre_layer_norm());
  EXPECT_TRUE(pegasus->sinusoidal_positions());
  EXPECT_EQ(pegasus->position_offset(), 0);
  EXPECT_EQ(pegasus->pad_token_id, 0);

  absl::StatusOr<BartConfig> lsg = LoadBartConfig(FixturePath("seq2seq/lsg_bart/config.json"));
  ASSERT_TRUE(lsg.ok()) << lsg.status();
  ASSERT_TRUE(lsg->lsg.has_value());
  EXPECT_EQ(lsg->lsg->block_size, 16);
  EXPECT_EQ(lsg->lsg->num_global_tokens, 2);
  EXPECT_EQ(lsg->max_position_embeddings, 1024);
  EXPECT_TRUE(lsg->pass_global_tokens_to_decoder);

  absl::StatusOr<BartConfig> lsg_pegasus =
      LoadBartConfig(FixturePath("seq2seq/lsg_pegasus/config.json"));
  ASSERT_TRUE(lsg_pegasus.ok()) << lsg_pegasus.status();
  EXPECT_EQ(lsg_pegasus->architecture, Seq2SeqArchitecture::kPegasus);
  ASSERT_TRUE(lsg_pegasus->lsg.has_value());
  EXPECT_EQ(lsg_pegasus->lsg->block_size, 16);
  EXPECT_EQ(lsg_pegasus->lsg->num_global_tokens, 2);
  EXPECT_EQ(lsg_pegasus->max_position_embeddings, 1024);
  EXPECT_TRUE(lsg_pegasus->pass_global_tokens_to_decoder);
  EXPECT_TRUE(lsg_pegasus->pre_layer_norm());
}

// google/pegasus-xsum's config.json carries fairseq-era keys at Pegasus'
// values; they are accepted, and BART's values are not.
// A fixture's config.json with one key changed (a null value: removed).
struct ConfigCase {
  std::string key;
  json value;
  std::string message;  // in the parser's error
};

// Each case's config is refused with its message.
void ExpectEachCaseRefused(const std::string& fixture, const std::vector<ConfigCase>& cases) {
  for (const ConfigCase& c : cases) {
    json config = FixtureConfig(fixture);
    if (c.value.is_null()) {
      config.erase(c.key);
    } else {
      config[c.key] = c.value;
    }
    const absl::StatusOr<BartConfig> result = ParseBartConfig(config, "config.json");
    ASSERT_FALSE(result.ok()) << c.key;
    EXPECT_NE(result.status().message().find(c.message), std::string::npos)
        << c.key << ": " << result.status();
  }
}

TEST(Seq2SeqCheckpointTest, PegasusConfigRules) {
  json legacy = FixtureConfig("pegasus");
  legacy["normalize_before"] = true;
  legacy["add_final_layer_norm"] = true;
  legacy["normalize_embedding"] = false;
  legacy["static_position_embeddings"] = true;
  legacy["extra_pos_embeddings"] = 1;
  legacy["add_bias_logits"] = false;
  legacy["length_penalty"] = 0.6;
  legacy["num_beams"] = 8;
  const absl::StatusOr<BartConfig> parsed = ParseBartConfig(legacy, "config.json");
  EXPECT_TRUE(parsed.ok()) << parsed.status();

  const std::vector<ConfigCase> cases = {
      {"model_type", "t5",
       "field 'model_type': unsupported value \"t5\" (supported: bart, pegasus, led, "
       "bigbird_pegasus)"},
      {"normalize_before", false, "field 'normalize_before'"},
      {"static_position_embeddings", false, "field 'static_position_embeddings'"},
      {"extra_pos_embeddings", 2, "field 'extra_pos_embeddings'"},
      {"decoder_ffn_dim", nullptr, "missing field 'decoder_ffn_dim'"},
      {"decoder_attention_heads", 5, "field 'decoder_attention_heads'"},
      {"tie_word_embeddings", "yes", "field 'tie_word_embeddings': expected boolean"},
      {"sparsity_type", "banded", "field 'sparsity_type': unsupported value \"banded\""},
      {"frobnicate", 1, "unknown field 'frobnicate' for model_type pegasus"},
  };
  ExpectEachCaseRefused("pegasus", cases);
}

TEST(Seq2SeqCheckpointTest, LedConfigRules) {
  const absl::StatusOr<BartConfig> parsed = ParseBartConfig(FixtureConfig("led"), "config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->architecture, Seq2SeqArchitecture::kLed);
  EXPECT_EQ(parsed->max_position_embeddings, 256);
  EXPECT_EQ(parsed->decoder_max_position_embeddings, 64);
  EXPECT_EQ(parsed->attention_window, 8);
  EXPECT_EQ(parsed->position_offset(), 0);
  EXPECT_TRUE(parsed->embedding_layer_norm());
  EXPECT_FALSE(parsed->pre_layer_norm());
  EXPECT_FALSE(parsed->scale_embedding);

  const std::vector<ConfigCase> cases = {
      {"attention_window", nullptr, "missing field 'attention_window'"},
      {"attention_window", 7, "7 is odd"},
      {"attention_window", json({8, 16}), "layers differ (8 and 16)"},
      {"max_encoder_position_embeddings", nullptr,
       "missing field 'max_encoder_position_embeddings'"},
      {"max_decoder_position_embeddings", "64", "field 'max_decoder_position_embeddings'"},
      {"scale_embedding", true, "unknown field 'scale_embedding' for model_type led"},
      {"block_size", 16, "unknown field 'block_size' for model_type led"},
  };
  ExpectEachCaseRefused("led", cases);
}

TEST(Seq2SeqCheckpointTest, BigBirdPegasusConfigRules) {
  const absl::StatusOr<BartConfig> parsed =
      ParseBartConfig(FixtureConfig("bigbird_pegasus"), "config.json");
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->architecture, Seq2SeqArchitecture::kBigBirdPegasus);
  EXPECT_EQ(parsed->max_position_embeddings, 256);
  EXPECT_EQ(parsed->decoder_max_position_embeddings, 256);
  EXPECT_EQ(parsed->position_offset(), 0);
  EXPECT_FALSE(parsed->sinusoidal_positions());
  EXPECT_FALSE(parsed->embedding_layer_norm());
  EXPECT_TRUE(parsed->pre_layer_norm());
  EXPECT_EQ(parsed->final_norm_name(), "layernorm_embedding");
  EXPECT_TRUE(parsed->scale_embedding);
  EXPECT_FALSE(parsed->attention_bias());
  ASSERT_TRUE(parsed->bigbird.has_value());
  EXPECT_EQ(parsed->bigbird->block_size, 4);
  EXPECT_EQ(parsed->bigbird->num_random_blocks, 2);
  EXPECT_FALSE(parsed->lsg.has_value());
  const NativeAttention native = NativeAttentionOf(*parsed);
  EXPECT_EQ(native.kind, AttentionKind::kBigBird);
  EXPECT_EQ(native.knobs.at("dense_up_to"), (5 + 2 * 2) * 4);

  const std::vector<ConfigCase> cases = {
      {"attention_type", "dense", "field 'attention_type': unsupported value \"dense\""},
      {"block_size", 0, "field 'block_size'"},
      {"num_random_blocks", "3", "field 'num_random_blocks'"},
      {"use_bias", 1, "field 'use_bias'"},
      {"scale_embedding", nullptr, "missing field 'scale_embedding'"},
      {"sparsity_type", "norm", "unknown field 'sparsity_type' for model_type bigbird_pegasus"},
  };
  ExpectEachCaseRefused("bigbird_pegasus", cases);
  // use_bias true: the biases must then be in the checkpoint.
  json biased = FixtureConfig("bigbird_pegasus");
  biased["use_bias"] = true;
  EditedCheckpoint checkpoint("bigbird_pegasus", biased, [](std::vector<TensorBytes>&) {});
  const auto model = Seq2SeqModel::Create(checkpoint.dir());
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(model.status().message().find("self_attn.self.query.bias"), std::string::npos)
      << model.status();
}

TEST(Seq2SeqCheckpointTest, UnknownModelTypeIsNamed) {
  json config = FixtureConfig("bart");
  config["model_type"] = "mbart";
  EditedCheckpoint checkpoint("bart", config, [](std::vector<TensorBytes>&) {});
  const auto model = Seq2SeqModel::Create(checkpoint.dir());
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("field 'model_type': unsupported value \"mbart\""),
            std::string::npos)
      << model.status();
}

TEST(Seq2SeqCheckpointTest, MissingTensorIsNamed) {
  for (const std::string name :
       {"model.decoder.layers.1.encoder_attn.k_proj.weight",
        "model.decoder.layernorm_embedding.bias", "model.encoder.layers.0.self_attn.v_proj.bias"}) {
    EditedCheckpoint checkpoint("bart", FixtureConfig("bart"),
                                [&](std::vector<TensorBytes>& tensors) { Drop(tensors, name); });
    const auto model = Seq2SeqModel::Create(checkpoint.dir());
    ASSERT_FALSE(model.ok()) << name;
    EXPECT_EQ(model.status().code(), absl::StatusCode::kNotFound) << model.status();
    EXPECT_NE(model.status().message().find(name), std::string::npos) << model.status();
  }
  // Pegasus' final decoder norm, which BART does not have.
  const std::string name = "model.decoder.layer_norm.weight";
  EditedCheckpoint checkpoint("pegasus", FixtureConfig("pegasus"),
                              [&](std::vector<TensorBytes>& tensors) { Drop(tensors, name); });
  const auto model = Seq2SeqModel::Create(checkpoint.dir());
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find(name), std::string::npos) << model.status();
}

TEST(Seq2SeqCheckpointTest, WrongShapeIsNamed) {
  const std::string name = "model.decoder.layers.0.fc1.weight";
  std::vector<float> wrong(64 * 31, 0.5f);
  EditedCheckpoint checkpoint("bart", FixtureConfig("bart"), [&](std::vector<TensorBytes>& t) {
    Drop(t, name);
    t.push_back({name,
                 DType::kF32,
                 {64, 31},
                 reinterpret_cast<const uint8_t*>(wrong.data()),
                 wrong.size() * sizeof(float)});
  });
  const auto model = Seq2SeqModel::Create(checkpoint.dir());
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("tensor '" + name + "' has shape [64,31]"),
            std::string::npos)
      << model.status();
}

TEST(Seq2SeqCheckpointTest, UntiedHeadNeedsLmHead) {
  json config = FixtureConfig("bart");
  config["tie_word_embeddings"] = false;
  EditedCheckpoint checkpoint("bart", config, [](std::vector<TensorBytes>&) {});
  const auto model = Seq2SeqModel::Create(checkpoint.dir());
  ASSERT_FALSE(model.ok());
  EXPECT_NE(model.status().message().find("lm_head.weight"), std::string::npos) << model.status();
}

// Decoder logits of the fixture's "single" case through `model`.
at::Tensor SingleCaseLogits(const Seq2SeqModel& model, const json& cases) {
  const json& c = cases["encoder_cases"][0];
  absl::StatusOr<Seq2SeqEncoding> encoding = model.Encode(testing::BatchOf(c["input_ids"]), {});
  EXPECT_TRUE(encoding.ok()) << encoding.status();
  if (!encoding.ok()) return {};
  absl::StatusOr<at::Tensor> logits =
      model.DecoderLogits(*encoding, testing::IdsTensor(c["decoder_input_ids"]));
  EXPECT_TRUE(logits.ok()) << logits.status();
  return logits.ok() ? *logits : at::Tensor();
}

// HF saves Pegasus' sinusoidal tables; without them they are computed, with
// the same values.
TEST(Seq2SeqCheckpointTest, PegasusPositionsAreComputedWhenAbsent) {
  c10::InferenceMode inference_mode;
  const testing::Seq2SeqFixture fixture = testing::LoadSeq2SeqFixture("pegasus");
  ASSERT_NE(fixture.model, nullptr);
  absl::StatusOr<std::unique_ptr<Checkpoint>> stored = Checkpoint::Open(fixture.dir);
  ASSERT_TRUE(stored.ok()) << stored.status();
  absl::StatusOr<TensorView> table = (*stored)->Get("model.encoder.embed_positions.weight");
  ASSERT_TRUE(table.ok()) << table.status();
  at::Tensor expected = at::empty(table->shape, at::kFloat);
  std::memcpy(expected.data_ptr<float>(), table->data, table->nbytes);
  EXPECT_LE(testing::MaxAbsDiff(SinusoidalPositions(512, 32), expected), 1e-6);

  EditedCheckpoint checkpoint("pegasus", FixtureConfig("pegasus"), [](std::vector<TensorBytes>& t) {
    Drop(t, "model.encoder.embed_positions.weight");
    Drop(t, "model.decoder.embed_positions.weight");
  });
  const auto model = Seq2SeqModel::Create(checkpoint.dir());
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_LE(testing::MaxAbsDiff(SingleCaseLogits(**model, fixture.cases),
                                SingleCaseLogits(*fixture.model, fixture.cases)),
            1e-5);
}

// HF initialises a missing final_logits_bias to zeros.
TEST(Seq2SeqCheckpointTest, MissingFinalLogitsBiasIsZero) {
  c10::InferenceMode inference_mode;
  const testing::Seq2SeqFixture fixture = testing::LoadSeq2SeqFixture("bart");
  ASSERT_NE(fixture.model, nullptr);
  EditedCheckpoint checkpoint("bart", FixtureConfig("bart"),
                              [](std::vector<TensorBytes>& t) { Drop(t, "final_logits_bias"); });
  const auto model = Seq2SeqModel::Create(checkpoint.dir());
  ASSERT_TRUE(model.ok()) << model.status();
  absl::StatusOr<std::unique_ptr<Checkpoint>> stored = Checkpoint::Open(fixture.dir);
  ASSERT_TRUE(stored.ok());
  absl::StatusOr<TensorView> bias = (*stored)->Get("final_logits_bias");
  ASSERT_TRUE(bias.ok());
  at::Tensor expected_bias = at::empty({bias->shape[1]}, at::kFloat);
  std::memcpy(expected_bias.data_ptr<float>(), bias->data, bias->nbytes);
  const at::Tensor difference =
      SingleCaseLogits(*fixture.model, fixture.cases) - SingleCaseLogits(**model, fixture.cases);
  EXPECT_LE(testing::MaxAbsDiff(difference, expected_bias.view({1, 1, -1}).expand_as(difference)),
            1e-5);
}

}  // namespace
}  // namespace docsparse
