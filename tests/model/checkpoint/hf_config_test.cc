#include "model/checkpoint/hf_config.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <tuple>
#include <vector>

#include "nlohmann/json.hpp"

namespace docsparse {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using json = nlohmann::json;

// roberta-base's config.json as published (no position_embedding_type).
json RobertaBase() {
  return json::parse(R"({
    "architectures": ["RobertaForMaskedLM"],
    "attention_probs_dropout_prob": 0.1,
    "bos_token_id": 0,
    "eos_token_id": 2,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 768,
    "initializer_range": 0.02,
    "intermediate_size": 3072,
    "layer_norm_eps": 1e-05,
    "max_position_embeddings": 514,
    "model_type": "roberta",
    "num_attention_heads": 12,
    "num_hidden_layers": 12,
    "pad_token_id": 1,
    "type_vocab_size": 1,
    "vocab_size": 50265
  })");
}

// distilbert-base-uncased-finetuned-sst-2-english's config.json.
json DistilBertSst2() {
  return json::parse(R"({
    "activation": "gelu",
    "architectures": ["DistilBertForSequenceClassification"],
    "attention_dropout": 0.1,
    "dim": 768,
    "dropout": 0.1,
    "finetuning_task": "sst-2",
    "hidden_dim": 3072,
    "id2label": {"0": "NEGATIVE", "1": "POSITIVE"},
    "initializer_range": 0.02,
    "label2id": {"NEGATIVE": 0, "POSITIVE": 1},
    "max_position_embeddings": 512,
    "model_type": "distilbert",
    "n_heads": 12,
    "n_layers": 6,
    "output_past": true,
    "pad_token_id": 0,
    "qa_dropout": 0.1,
    "seq_classif_dropout": 0.2,
    "sinusoidal_pos_embds": false,
    "tie_weights_": true,
    "vocab_size": 30522
  })");
}

json MiniLm() {
  return json::parse(R"({
    "_name_or_path": "nreimers/MiniLM-L6-H384-uncased",
    "architectures": ["BertModel"],
    "attention_probs_dropout_prob": 0.1,
    "gradient_checkpointing": false,
    "hidden_act": "gelu",
    "hidden_dropout_prob": 0.1,
    "hidden_size": 384,
    "initializer_range": 0.02,
    "intermediate_size": 1536,
    "layer_norm_eps": 1e-12,
    "max_position_embeddings": 512,
    "model_type": "bert",
    "num_attention_heads": 12,
    "num_hidden_layers": 6,
    "pad_token_id": 0,
    "position_embedding_type": "absolute",
    "transformers_version": "4.8.2",
    "type_vocab_size": 2,
    "use_cache": true,
    "vocab_size": 30522
  })");
}

TEST(HfConfigTest, DefaultModelConfigFileParses) {
  const std::string dir = std::string(DOCSPARSE_SOURCE_DIR) + "/models/minilm";
  ASSERT_TRUE(std::filesystem::exists(dir + "/config.json"))
      << dir << " is missing: run scripts/setup to install the default model";
  auto config = LoadEncoderConfig(dir + "/config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, Architecture::kBert);
  EXPECT_EQ(config->vocab_size, 30522);
  EXPECT_EQ(config->hidden_size, 384);
  EXPECT_EQ(config->num_layers, 6);
  EXPECT_EQ(config->num_heads, 12);
  EXPECT_EQ(config->head_dim(), 32);
  EXPECT_EQ(config->intermediate_size, 1536);
  EXPECT_EQ(config->max_position_embeddings, 512);
  EXPECT_EQ(config->type_vocab_size, 2);
  EXPECT_EQ(config->pad_token_id, 0);
  EXPECT_DOUBLE_EQ(config->layer_norm_eps, 1e-12);
  EXPECT_EQ(config->activation, Activation::kGelu);
  EXPECT_THAT(config->architectures, ElementsAre("BertModel"));
  EXPECT_FALSE(config->has_classification_head);
  EXPECT_TRUE(config->id2label.empty());
}

TEST(HfConfigTest, RobertaParses) {
  auto config = ParseEncoderConfig(RobertaBase(), "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, Architecture::kRoberta);
  EXPECT_EQ(config->vocab_size, 50265);
  EXPECT_EQ(config->max_position_embeddings, 514);
  EXPECT_EQ(config->type_vocab_size, 1);
  EXPECT_EQ(config->pad_token_id, 1);
  EXPECT_DOUBLE_EQ(config->layer_norm_eps, 1e-5);
}

// allenai/longformer-base-4096's config.json: RoBERTa's fields plus
// Longformer's window per layer.
json LongformerBase() {
  json config = RobertaBase();
  config["architectures"] = {"LongformerForMaskedLM"};
  config["model_type"] = "longformer";
  config["max_position_embeddings"] = 4098;
  config["attention_window"] = std::vector<int>(12, 512);
  config["sep_token_id"] = 2;
  config["onnx_export"] = false;
  return config;
}

TEST(HfConfigTest, LongformerParsesWithItsWindow) {
  auto config = ParseEncoderConfig(LongformerBase(), "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, Architecture::kLongformer);
  EXPECT_EQ(config->attention_window, 512);
  EXPECT_TRUE(NumbersPositionsAfterPadding(config->architecture));
  json single = LongformerBase();
  single["attention_window"] = 256;
  config = ParseEncoderConfig(single, "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->attention_window, 256);
  // Only Longformer has the field.
  json roberta = RobertaBase();
  roberta["attention_window"] = 512;
  EXPECT_THAT(std::string(ParseEncoderConfig(roberta, "config.json").status().message()),
              HasSubstr("unknown field 'attention_window'"));
}

TEST(HfConfigTest, LongformerWindowsWeCannotRunAreNamed) {
  const std::vector<std::pair<json, std::string>> cases = {
      {json(), "missing field 'attention_window'"},
      {json(511), "511 is odd"},
      {json(0), "attention_window"},
      {json("512"), "attention_window"},
      {json(std::vector<int>(11, 512)), "11 entries for 12 layers"},
      {json({512, 512, 512, 512, 512, 512, 256, 256, 256, 256, 256, 256}),
       "layers differ (512 and 256)"},
  };
  for (const auto& [window, message] : cases) {
    json raw = LongformerBase();
    if (window.is_null()) {
      raw.erase("attention_window");
    } else {
      raw["attention_window"] = window;
    }
    auto config = ParseEncoderConfig(raw, "config.json");
    ASSERT_FALSE(config.ok()) << window;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(message)) << window;
  }
}

// google/bigbird-roberta-base's config.json.
json BigBirdBase() {
  return json::parse(R"({
    "architectures": ["BigBirdForPreTraining"], "attention_probs_dropout_prob": 0.1,
    "attention_type": "block_sparse", "block_size": 64, "bos_token_id": 1, "eos_token_id": 2,
    "gradient_checkpointing": false, "hidden_act": "gelu_new", "hidden_dropout_prob": 0.1,
    "hidden_size": 768, "initializer_range": 0.02, "intermediate_size": 3072,
    "layer_norm_eps": 1e-12, "max_position_embeddings": 4096, "model_type": "big_bird",
    "num_attention_heads": 12, "num_hidden_layers": 12, "num_random_blocks": 3,
    "pad_token_id": 0, "rescale_embeddings": false, "sep_token_id": 66, "type_vocab_size": 2,
    "use_bias": true, "use_cache": true, "vocab_size": 50358
  })");
}

TEST(HfConfigTest, BigBirdParsesWithItsBlocks) {
  auto config = ParseEncoderConfig(BigBirdBase(), "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, Architecture::kBigBird);
  ASSERT_TRUE(config->bigbird.has_value());
  EXPECT_TRUE(config->bigbird->block_sparse);
  EXPECT_EQ(config->bigbird->block_size, 64);
  EXPECT_EQ(config->bigbird->num_random_blocks, 3);
  EXPECT_TRUE(config->bigbird->use_bias);
  EXPECT_FALSE(config->bigbird->rescale_embeddings);
  EXPECT_FALSE(config->lsg.has_value());
  EXPECT_EQ(config->activation, Activation::kGeluNew);
  EXPECT_FALSE(NumbersPositionsAfterPadding(config->architecture));
  // transformers' defaults where keys are absent.
  json bare = BigBirdBase();
  for (const char* key :
       {"attention_type", "block_size", "num_random_blocks", "use_bias", "rescale_embeddings"}) {
    bare.erase(key);
  }
  config = ParseEncoderConfig(bare, "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->bigbird->block_size, 64);
  EXPECT_EQ(config->bigbird->num_random_blocks, 3);
  json full = BigBirdBase();
  full["attention_type"] = "original_full";
  config = ParseEncoderConfig(full, "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_FALSE(config->bigbird->block_sparse);
}

TEST(HfConfigTest, BigBirdFieldsWeCannotRunAreNamed) {
  const std::vector<std::tuple<std::string, json, std::string>> cases = {
      {"attention_type", "sliding", "field 'attention_type': unsupported value \"sliding\""},
      {"block_size", 0, "block_size"},
      {"block_size", "64", "block_size"},
      {"num_random_blocks", -1, "num_random_blocks"},
      {"use_bias", "yes", "use_bias"},
      {"sparsity_type", "norm", "unknown field 'sparsity_type' for model_type big_bird"},
  };
  for (const auto& [key, value, message] : cases) {
    json raw = BigBirdBase();
    raw[key] = value;
    auto config = ParseEncoderConfig(raw, "config.json");
    ASSERT_FALSE(config.ok()) << key;
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(message)) << key;
  }
  // Only BigBird has the fields.
  json roberta = RobertaBase();
  roberta["num_random_blocks"] = 3;
  EXPECT_THAT(std::string(ParseEncoderConfig(roberta, "config.json").status().message()),
              HasSubstr("unknown field 'num_random_blocks'"));
}

// answerdotai/ModernBERT-base's config.json as published.
json ModernBertBase() {
  return json::parse(R"({
    "architectures": ["ModernBertForMaskedLM"], "attention_bias": false,
    "attention_dropout": 0.0, "bos_token_id": 50281, "classifier_activation": "gelu",
    "classifier_bias": false, "classifier_dropout": 0.0, "classifier_pooling": "mean",
    "cls_token_id": 50281, "decoder_bias": true, "deterministic_flash_attn": false,
    "embedding_dropout": 0.0, "eos_token_id": 50282, "global_attn_every_n_layers": 3,
    "global_rope_theta": 160000.0, "gradient_checkpointing": false,
    "hidden_activation": "gelu", "hidden_size": 768, "initializer_cutoff_factor": 2.0,
    "initializer_range": 0.02, "intermediate_size": 1152, "layer_norm_eps": 1e-05,
    "local_attention": 128, "local_rope_theta": 10000.0, "max_position_embeddings": 8192,
    "mlp_bias": false, "mlp_dropout": 0.0, "model_type": "modernbert", "norm_bias": false,
    "norm_eps": 1e-05, "num_attention_heads": 12, "num_hidden_layers": 22,
    "pad_token_id": 50283, "position_embedding_type": "absolute", "reference_compile": true,
    "sep_token_id": 50282, "sparse_pred_ignore_index": -100, "sparse_prediction": false,
    "torch_dtype": "float32", "transformers_version": "4.47.0.dev0", "vocab_size": 50368
  })");
}

TEST(HfConfigTest, ModernBertParsesInBothFormats) {
  auto config = ParseEncoderConfig(ModernBertBase(), "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  ASSERT_TRUE(config->modernbert.has_value());
  EXPECT_EQ(config->architecture, Architecture::kModernBert);
  EXPECT_EQ(config->modernbert->local_attention, 128);
  ASSERT_EQ(config->modernbert->global_layers.size(), 22u);
  EXPECT_TRUE(config->modernbert->global_layers[0]);
  EXPECT_FALSE(config->modernbert->global_layers[1]);
  EXPECT_TRUE(config->modernbert->global_layers[21]);
  EXPECT_EQ(config->modernbert->global_rope_theta, 160000.0);
  EXPECT_TRUE(config->modernbert->mean_pooling);
  EXPECT_EQ(config->max_position_embeddings, 8192);
  // transformers 5 writes the schedule and the rotary bases this way.
  json v5 = ModernBertBase();
  for (const char* key : {"global_attn_every_n_layers", "global_rope_theta", "local_rope_theta"}) {
    v5.erase(key);
  }
  std::vector<std::string> types(22, "sliding_attention");
  types[0] = types[5] = "full_attention";
  v5["layer_types"] = types;
  v5["rope_parameters"] = {{"full_attention", {{"rope_type", "default"}, {"rope_theta", 80000}}},
                           {"sliding_attention", {{"rope_type", "default"}, {"rope_theta", 500}}}};
  config = ParseEncoderConfig(v5, "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->modernbert->global_layers[5]);
  EXPECT_FALSE(config->modernbert->global_layers[3]);
  EXPECT_EQ(config->modernbert->global_rope_theta, 80000);
  EXPECT_EQ(config->modernbert->local_rope_theta, 500);
}

TEST(HfConfigTest, ModernBertFieldsWeCannotRunAreNamed) {
  const std::vector<std::tuple<std::string, json, std::string>> cases = {
      {"local_attention", 127, "127 is odd"},
      {"layer_types", json({"full_attention"}), "expected 22 entries"},
      {"rope_parameters", json({{"full_attention", {{"rope_type", "yarn"}, {"rope_theta", 1}}}}),
       "rope_type"},
      {"rope_scaling", json({{"type", "linear"}}), "rope_scaling"},
      {"classifier_pooling", "max", "classifier_pooling"},
      {"hidden_activation", "silu", "hidden_activation"},
      {"norm_eps", nullptr, "missing field 'norm_eps'"},
  };
  for (const auto& [key, value, message] : cases) {
    json raw = ModernBertBase();
    if (value.is_null()) {
      raw.erase(key);
    } else {
      raw[key] = value;
    }
    auto config = ParseEncoderConfig(raw, "config.json");
    ASSERT_FALSE(config.ok()) << key;
    EXPECT_THAT(std::string(config.status().message()), HasSubstr(message)) << key;
  }
}

TEST(HfConfigTest, DistilBertParsesWithLabelsInIdOrder) {
  json raw = DistilBertSst2();
  // Out-of-order keys must still come back ordered by id.
  raw["id2label"] = {{"2", "neutral"}, {"0", "NEGATIVE"}, {"1", "POSITIVE"}};
  raw.erase("label2id");
  auto config = ParseEncoderConfig(raw, "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->architecture, Architecture::kDistilBert);
  EXPECT_EQ(config->hidden_size, 768);
  EXPECT_EQ(config->num_layers, 6);
  EXPECT_EQ(config->num_heads, 12);
  EXPECT_EQ(config->intermediate_size, 3072);
  EXPECT_EQ(config->type_vocab_size, 0);
  EXPECT_DOUBLE_EQ(config->layer_norm_eps, 1e-12);
  EXPECT_TRUE(config->has_classification_head);
  EXPECT_THAT(config->id2label, ElementsAre("NEGATIVE", "POSITIVE", "neutral"));
}

TEST(HfConfigTest, ActivationsAndClassificationDefaults) {
  const std::vector<std::pair<std::string, Activation>> activations = {
      {"gelu", Activation::kGelu},
      {"gelu_new", Activation::kGeluNew},
      {"gelu_pytorch_tanh", Activation::kGeluNew},
      {"gelu_fast", Activation::kGeluNew},
      {"relu", Activation::kRelu}};
  for (const auto& [name, activation] : activations) {
    json raw = MiniLm();
    raw["hidden_act"] = name;
    auto config = ParseEncoderConfig(raw, "config.json");
    ASSERT_TRUE(config.ok()) << config.status();
    EXPECT_EQ(config->activation, activation);
  }

  // A classifier saved without id2label gets Hugging Face's LABEL_<i> names.
  json raw = MiniLm();
  raw["architectures"] = {"BertForSequenceClassification"};
  auto config = ParseEncoderConfig(raw, "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_TRUE(config->has_classification_head);
  EXPECT_THAT(config->id2label, ElementsAre("LABEL_0", "LABEL_1"));

  raw["num_labels"] = 3;
  raw["problem_type"] = "multi_label_classification";
  config = ParseEncoderConfig(raw, "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->id2label, ElementsAre("LABEL_0", "LABEL_1", "LABEL_2"));
  EXPECT_EQ(config->problem_type, ProblemType::kMultiLabel);
}

TEST(HfConfigTest, HarmlessAndNeutralKeysAreAccepted) {
  json raw = MiniLm();
  raw["torch_dtype"] = "float32";
  raw["classifier_dropout"] = nullptr;
  raw["max_length"] = 20;
  raw["is_decoder"] = false;
  raw["add_cross_attention"] = false;
  raw["pruned_heads"] = json::object();
  raw["pad_token_id"] = nullptr;  // allowed for BERT, not RoBERTa
  auto config = ParseEncoderConfig(raw, "config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->pad_token_id, -1);
}

json Without(json raw, const std::string& key) {
  raw.erase(key);
  return raw;
}

TEST(HfConfigTest, EachMissingRequiredFieldIsNamed) {
  const std::vector<std::pair<json, std::vector<std::string>>> models = {
      {MiniLm(),
       {"model_type", "vocab_size", "hidden_size", "num_hidden_layers", "num_attention_heads",
        "intermediate_size", "hidden_act", "max_position_embeddings", "type_vocab_size",
        "layer_norm_eps", "pad_token_id"}},
      {RobertaBase(), {"pad_token_id", "layer_norm_eps", "type_vocab_size"}},
      {DistilBertSst2(),
       {"model_type", "vocab_size", "dim", "n_layers", "n_heads", "hidden_dim", "activation",
        "max_position_embeddings", "pad_token_id"}},
  };
  for (const auto& [model, fields] : models) {
    for (const std::string& field : fields) {
      SCOPED_TRACE(field);
      auto config = ParseEncoderConfig(Without(model, field), "config.json");
      ASSERT_FALSE(config.ok());
      EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
      EXPECT_EQ(config.status().message(), "config.json: missing field '" + field + "'");
    }
  }
}

struct BadValue {
  std::string field;
  json value;
  std::string message_part;
};

TEST(HfConfigTest, WrongTypesAndUnsupportedValuesAreNamed) {
  const std::vector<BadValue> bert_cases = {
      {"hidden_size", "384", "expected integer, got string"},
      {"hidden_size", 384.5, "expected integer, got number"},
      {"hidden_size", 0, "out of range"},
      {"hidden_size", -384, "out of range"},
      {"num_hidden_layers", true, "expected integer, got boolean"},
      {"vocab_size", 18446744073709551615ull, "out of range"},
      {"num_attention_heads", 7, "do not divide the hidden size 384"},
      {"intermediate_size", json::array(), "expected integer, got array"},
      {"hidden_act", "swish", "unsupported value \"swish\""},
      {"hidden_act", 1, "expected string"},
      {"layer_norm_eps", "1e-12", "expected number"},
      {"layer_norm_eps", 0, "positive"},
      {"pad_token_id", 30522, "out of range"},
      {"pad_token_id", "0", "expected integer"},
      {"model_type", "gpt2", "unsupported value \"gpt2\""},
      {"model_type", 3, "expected string"},
      {"position_embedding_type", "relative_key", "unsupported value \"relative_key\""},
      {"position_embedding_type", 1, "expected string"},
      {"architectures", "BertModel", "expected array"},
      {"architectures", json::array({1}), "expected string"},
      {"id2label", json::array({"a"}), "expected object"},
      {"id2label", {{"1", "a"}}, "key \"1\" is not an id in [0, 1)"},
      {"id2label", {{"x", "a"}}, "key \"x\""},
      {"id2label", {{"0", 1}}, "expected string"},
      {"label2id", 3, "expected object"},
      {"num_labels", 0, "out of range"},
      {"problem_type", "ranking", "unsupported value \"ranking\""},
      {"is_decoder", true, "not supported"},
      {"is_decoder", "no", "expected boolean"},
      {"add_cross_attention", true, "not supported"},
      {"is_encoder_decoder", true, "not supported"},
      {"pruned_heads", {{"0", {1}}}, "not supported"},
  };
  for (const BadValue& c : bert_cases) {
    SCOPED_TRACE(c.field + " = " + c.value.dump());
    json raw = MiniLm();
    raw[c.field] = c.value;
    auto config = ParseEncoderConfig(raw, "config.json");
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(
        std::string(config.status().message()),
        AllOf(HasSubstr("config.json: field '" + c.field + "'"), HasSubstr(c.message_part)));
  }

  const std::vector<BadValue> other_cases = {
      {"pad_token_id", nullptr, "expected integer, got null"},  // RoBERTa
      {"sinusoidal_pos_embds", true, "not supported"},          // DistilBERT
      {"n_heads", 5, "do not divide"},
      {"activation", "tanh", "unsupported value \"tanh\""},
      {"num_labels", 3, "disagrees with the 2 id2label entries"},
  };
  for (const BadValue& c : other_cases) {
    SCOPED_TRACE(c.field);
    json raw = c.field == "pad_token_id" ? RobertaBase() : DistilBertSst2();
    raw[c.field] = c.value;
    auto config = ParseEncoderConfig(raw, "config.json");
    ASSERT_FALSE(config.ok());
    EXPECT_THAT(std::string(config.status().message()),
                AllOf(HasSubstr("field '" + c.field + "'"), HasSubstr(c.message_part)));
  }
}

TEST(HfConfigTest, UnknownKeysAreNamed) {
  const std::vector<std::pair<json, std::string>> cases = {
      {MiniLm(), "rotary_dim"},
      {MiniLm(), "auto_map"},             // remote code: not the stock architecture
      {MiniLm(), "dim"},                  // DistilBERT's name, wrong for BERT
      {DistilBertSst2(), "hidden_size"},  // BERT's name, wrong for DistilBERT
      {DistilBertSst2(), "layer_norm_eps"},
      {RobertaBase(), "n_layers"},
  };
  for (auto [raw, key] : cases) {
    SCOPED_TRACE(key);
    raw[key] = 1;
    auto config = ParseEncoderConfig(raw, "config.json");
    ASSERT_FALSE(config.ok());
    EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(config.status().message()),
                HasSubstr("config.json: unknown field '" + key + "'"));
  }
}

TEST(HfConfigTest, LoadReportsMissingFileAndBadJson) {
  auto missing = LoadEncoderConfig("/nonexistent/config.json");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/nonexistent/config.json"));

  const std::filesystem::path path =
      std::filesystem::path(::testing::TempDir()) / "hf_config_bad.json";
  { std::ofstream(path) << "{\"model_type\": "; }
  auto bad = LoadEncoderConfig(path.string());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("not valid JSON"));
  std::filesystem::remove(path);

  auto not_object = ParseEncoderConfig(json::array(), "config.json");
  EXPECT_THAT(std::string(not_object.status().message()), HasSubstr("expected a JSON object"));
}

TEST(HfConfigTest, NamesOfEnums) {
  EXPECT_EQ(ArchitectureName(Architecture::kRoberta), "roberta");
  EXPECT_EQ(ArchitectureName(Architecture::kDistilBert), "distilbert");
  EXPECT_EQ(ArchitectureName(Architecture::kLongformer), "longformer");
  EXPECT_EQ(ActivationName(Activation::kGeluNew), "gelu_new");
}

}  // namespace
}  // namespace docsparse
