#include "model/checkpoint/generation_config.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace docsparse {
namespace {

using json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const json kBartConfig = json::parse(R"({
  "model_type": "bart", "vocab_size": 100, "bos_token_id": 0, "pad_token_id": 1,
  "eos_token_id": 2, "decoder_start_token_id": 2, "forced_eos_token_id": 2,
  "max_length": 142, "min_length": 56, "num_beams": 4, "length_penalty": 2.0,
  "no_repeat_ngram_size": 3, "early_stopping": true, "forced_bos_token_id": 0,
  "d_model": 32
})");

TEST(GenerationConfigTest, GenerationConfigJsonWinsAndUsesGenerationConfigDefaults) {
  const json generation = json::parse(R"({
    "decoder_start_token_id": 0, "eos_token_id": 1, "forced_eos_token_id": 1,
    "length_penalty": 0.6, "max_length": 64, "num_beams": 8, "pad_token_id": 0,
    "early_stopping": "never"
  })");
  const auto config = ParseGenerationConfig(kBartConfig, &generation);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_length, 64);
  EXPECT_EQ(config->num_beams, 8);
  EXPECT_EQ(config->length_penalty, 0.6);
  EXPECT_EQ(config->early_stopping, EarlyStopping::kNever);
  // Not in the file: GenerationConfig defaults, not config.json's values.
  EXPECT_EQ(config->min_length, 0);
  EXPECT_EQ(config->no_repeat_ngram_size, 0);
  EXPECT_FALSE(config->forced_bos_token_id.has_value());
  EXPECT_FALSE(config->bos_token_id.has_value());
  EXPECT_EQ(config->decoder_start_token_id, 0);
  EXPECT_THAT(config->eos_token_ids, ElementsAre(1));
  EXPECT_THAT(config->forced_eos_token_ids, ElementsAre(1));
  EXPECT_EQ(config->pad_token_id, 0);
}

TEST(GenerationConfigTest, FallsBackToConfigJsonWithTheModelClassDefaults) {
  const auto config = ParseGenerationConfig(kBartConfig, nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_length, 142);
  EXPECT_EQ(config->min_length, 56);
  EXPECT_EQ(config->num_beams, 4);
  EXPECT_EQ(config->length_penalty, 2.0);
  EXPECT_EQ(config->no_repeat_ngram_size, 3);
  EXPECT_EQ(config->early_stopping, EarlyStopping::kWhenBeamsFinished);
  EXPECT_EQ(config->forced_bos_token_id, 0);
  EXPECT_EQ(config->decoder_start_token_id, 2);

  // A bare Pegasus config.json: PegasusConfig's token defaults apply.
  const json pegasus = json::parse(R"({"model_type": "pegasus", "vocab_size": 50})");
  const auto defaults = ParseGenerationConfig(pegasus, nullptr);
  ASSERT_TRUE(defaults.ok()) << defaults.status();
  EXPECT_EQ(defaults->decoder_start_token_id, 0);
  EXPECT_THAT(defaults->eos_token_ids, ElementsAre(1));
  EXPECT_THAT(defaults->forced_eos_token_ids, ElementsAre(1));
  EXPECT_EQ(defaults->pad_token_id, 0);
  EXPECT_EQ(defaults->max_length, 20);
  EXPECT_EQ(defaults->num_beams, 1);

  // An explicit null beats the class default, as in BartConfig(**config).
  const json no_forced_eos = json::parse(R"({"model_type": "bart", "forced_eos_token_id": null})");
  const auto without = ParseGenerationConfig(no_forced_eos, nullptr);
  ASSERT_TRUE(without.ok()) << without.status();
  EXPECT_TRUE(without->forced_eos_token_ids.empty());
  EXPECT_EQ(without->decoder_start_token_id, 2);
}

TEST(GenerationConfigTest, FromModelConfigFileDefersToConfigJson) {
  // save_pretrained writes such a file; generate() rebuilds it from config.json.
  const json generation =
      json::parse(R"({"_from_model_config": true, "max_length": 20, "decoder_start_token_id": 2})");
  const auto config = ParseGenerationConfig(kBartConfig, &generation);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_length, 142);
  EXPECT_EQ(config->num_beams, 4);
}

TEST(GenerationConfigTest, LegacyForceBosFlagOfBartCnn) {
  const json legacy = json::parse(
      R"({"model_type": "bart", "bos_token_id": 0, "force_bos_token_to_be_generated": true})");
  const auto config = ParseGenerationConfig(legacy, nullptr);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->forced_bos_token_id, 0);
}

TEST(GenerationConfigTest, ResolvesStartAndPadTokensAsGenerateDoes) {
  const json model = json::parse(R"({"model_type": "custom", "vocab_size": 10})");
  const json generation = json::parse(R"({"bos_token_id": 3, "eos_token_id": [4, 7]})");
  const auto config = ParseGenerationConfig(model, &generation);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->decoder_start_token_id, 3);  // bos, for lack of a start id
  EXPECT_THAT(config->eos_token_ids, ElementsAre(4, 7));
  EXPECT_EQ(config->pad_token_id, 4);  // the first eos, for lack of a pad id

  const json nothing = json::parse(R"({"max_length": 30})");
  const auto missing = ParseGenerationConfig(model, &nothing);
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(missing.status().message(),
              HasSubstr("generation_config.json: field 'decoder_start_token_id'"));
}

TEST(GenerationConfigTest, ErrorsNameTheFileAndField) {
  const auto error = [](const char* generation_text) {
    const json generation = json::parse(generation_text);
    return std::string(ParseGenerationConfig(kBartConfig, &generation).status().message());
  };
  EXPECT_THAT(error(R"({"decoder_start_token_id": 2, "num_beams": 0})"),
              HasSubstr("generation_config.json: field 'num_beams': 0 is out of range [1, 16]"));
  EXPECT_THAT(error(R"({"decoder_start_token_id": 2, "num_beams": "4"})"),
              HasSubstr("field 'num_beams': expected integer, got string"));
  EXPECT_THAT(error(R"({"decoder_start_token_id": 2, "early_stopping": "sometimes"})"),
              HasSubstr("field 'early_stopping': expected true, false or \"never\""));
  EXPECT_THAT(error(R"({"decoder_start_token_id": 100})"),
              HasSubstr("field 'decoder_start_token_id': token id 100 is out of range [0, 100)"));
  EXPECT_THAT(error(R"({"decoder_start_token_id": 2, "eos_token_id": [2, -1]})"),
              HasSubstr("field 'eos_token_id'"));
  EXPECT_THAT(error(R"({"decoder_start_token_id": 2, "num_beams": 2, "num_return_sequences": 3})"),
              HasSubstr("field 'num_return_sequences': 3 is out of range [1, 2]"));
  EXPECT_THAT(error(R"({"decoder_start_token_id": 2, "length_penalty": 11})"),
              HasSubstr("field 'length_penalty'"));
  // Decoding we do not implement is refused, not silently changed.
  EXPECT_THAT(error(R"({"decoder_start_token_id": 2, "do_sample": true})"),
              HasSubstr("field 'do_sample': unsupported value true"));
  EXPECT_THAT(error(R"({"decoder_start_token_id": 2, "repetition_penalty": 1.2})"),
              HasSubstr("field 'repetition_penalty'"));
  EXPECT_THAT(error(R"({"decoder_start_token_id": 2, "forced_decoder_ids": [[1, 5]]})"),
              HasSubstr("field 'forced_decoder_ids'"));
}

TEST(GenerationConfigTest, NeutralValuesAndSamplingKnobsAreAccepted) {
  const json generation = json::parse(R"({
    "decoder_start_token_id": 2, "do_sample": false, "repetition_penalty": 1,
    "suppress_tokens": [], "temperature": 0.7, "top_k": 10, "transformers_version": "4.36.2"
  })");
  EXPECT_TRUE(ParseGenerationConfig(kBartConfig, &generation).ok());
}

TEST(GenerationConfigTest, LoadReadsBothFilesFromTheModelFolder) {
  char folder[] = "/tmp/generation_config_testXXXXXX";
  ASSERT_NE(::mkdtemp(folder), nullptr);
  const std::string dir = folder;
  EXPECT_EQ(LoadGenerationConfig(dir).status().code(), absl::StatusCode::kNotFound);
  std::ofstream(dir + "/config.json") << kBartConfig.dump();
  auto config = LoadGenerationConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_length, 142);
  std::ofstream(dir + "/generation_config.json")
      << R"({"decoder_start_token_id": 2, "max_length": 33})";
  config = LoadGenerationConfig(dir);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_length, 33);
  std::ofstream(dir + "/generation_config.json") << "{not json";
  EXPECT_EQ(LoadGenerationConfig(dir).status().code(), absl::StatusCode::kInvalidArgument);
  std::remove((dir + "/generation_config.json").c_str());
  std::remove((dir + "/config.json").c_str());
  ::rmdir(folder);
}

GenerationConfig Base() {
  GenerationConfig config;
  config.max_length = 100;
  config.min_length = 10;
  config.num_beams = 4;
  config.decoder_start_token_id = 2;
  config.eos_token_ids = {2};
  return config;
}

TEST(GenerationOverridesTest, UnsetFieldsKeepTheModelsValues) {
  const auto config = ApplyGenerationOverrides(Base(), GenerationOverrides{}, 1024);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_beams, 4);
  EXPECT_EQ(config->max_length, 100);
  EXPECT_EQ(config->min_length, 10);
}

TEST(GenerationOverridesTest, AppliesEveryField) {
  GenerationOverrides overrides;
  overrides.num_beams = 2;
  overrides.max_length = 50;
  overrides.min_length = 5;
  overrides.length_penalty = 0.5;
  overrides.early_stopping = true;
  overrides.no_repeat_ngram_size = 3;
  const auto config = ApplyGenerationOverrides(Base(), overrides, 1024);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_beams, 2);
  EXPECT_EQ(config->max_total_length(), 50);
  EXPECT_EQ(config->min_length, 5);
  EXPECT_EQ(config->length_penalty, 0.5);
  EXPECT_EQ(config->early_stopping, EarlyStopping::kWhenBeamsFinished);
  EXPECT_EQ(config->no_repeat_ngram_size, 3);
}

TEST(GenerationOverridesTest, MaxLengthAndMaxNewTokens) {
  GenerationConfig base = Base();
  base.max_new_tokens = 30;
  EXPECT_EQ(base.max_total_length(), 31);
  // A request's max_length replaces the model's max_new_tokens...
  GenerationOverrides length;
  length.max_length = 60;
  auto config = ApplyGenerationOverrides(base, length, 1024);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_total_length(), 60);
  // ...and the request's own max_new_tokens wins over both.
  length.max_new_tokens = 7;
  config = ApplyGenerationOverrides(base, length, 1024);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->max_total_length(), 8);
}

TEST(GenerationOverridesTest, ErrorsNameTheRequestField) {
  const auto error = [](GenerationOverrides overrides, int limit = 1024) {
    return std::string(ApplyGenerationOverrides(Base(), overrides, limit).status().message());
  };
  GenerationOverrides beams;
  beams.num_beams = 17;
  EXPECT_EQ(error(beams), "generation.num_beams: must be in [1, 16], got 17");
  beams.num_beams = 0;
  EXPECT_THAT(error(beams), HasSubstr("generation.num_beams: must be in [1, 16]"));
  GenerationOverrides length;
  length.max_length = 2000;
  EXPECT_EQ(error(length), "generation.max_length: must be in [2, 1024], got 2000");
  length.max_length = 1;
  EXPECT_THAT(error(length), HasSubstr("generation.max_length"));
  GenerationOverrides new_tokens;
  new_tokens.max_new_tokens = 1024;
  EXPECT_EQ(error(new_tokens), "generation.max_new_tokens: must be in [1, 1023], got 1024");
  GenerationOverrides min_length;
  min_length.min_length = 101;  // above the model's max_length of 100
  EXPECT_THAT(error(min_length), HasSubstr("generation.min_length: must be at most"));
  min_length.min_length = -1;
  EXPECT_THAT(error(min_length), HasSubstr("generation.min_length: must be in [0, 4096]"));
  GenerationOverrides penalty;
  penalty.length_penalty = std::nan("");
  EXPECT_THAT(error(penalty), HasSubstr("generation.length_penalty"));
  penalty.length_penalty = -10.5;
  EXPECT_THAT(error(penalty), HasSubstr("generation.length_penalty"));
  GenerationOverrides ngram;
  ngram.no_repeat_ngram_size = 65;
  EXPECT_EQ(error(ngram), "generation.no_repeat_ngram_size: must be in [0, 64], got 65");
}

TEST(GenerationOverridesTest, ModelDefaultsBeyondTheDecoderLimitAreReported) {
  // The model says 100; this decoder stops at 64 positions.
  const auto config = ApplyGenerationOverrides(Base(), GenerationOverrides{}, 64);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(config.status().message(), HasSubstr("generation.max_length: the model's default"));
  GenerationOverrides fix;
  fix.max_new_tokens = 20;
  EXPECT_TRUE(ApplyGenerationOverrides(Base(), fix, 64).ok());
}

TEST(GenerationOverridesTest, NumBeamsBelowTheModelsReturnCountIsAnError) {
  GenerationConfig base = Base();
  base.num_return_sequences = 3;
  GenerationOverrides beams;
  beams.num_beams = 2;
  EXPECT_THAT(ApplyGenerationOverrides(base, beams, 1024).status().message(),
              HasSubstr("generation.num_beams: must be at least"));
}

TEST(GenerationOverridesTest, ProtoFloatsReadAsTheirDecimal) {
  EXPECT_EQ(DecimalFloatToDouble(0.6f), 0.6);
  EXPECT_EQ(DecimalFloatToDouble(2.0f), 2.0);
  EXPECT_EQ(DecimalFloatToDouble(-1.1f), -1.1);
  EXPECT_NE(static_cast<double>(0.6f), 0.6);  // why the conversion exists
}

}  // namespace
}  // namespace docsparse
