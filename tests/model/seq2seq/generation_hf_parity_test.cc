// Generate() on the tiny BART, Pegasus, LSG-BART and LSG-Pegasus checkpoints
// against the token ids transformers 4.36 `model.generate()` produced for them
// (tests/fixtures/seq2seq/<model>/cases.json, "generate_cases": greedy, min
// length, no-repeat n-grams, beam search with length penalty in all three
// early-stopping modes, num_return_sequences; inputs alone and as a padded
// batch of different lengths). Token ids must be identical.
#include <c10/core/InferenceMode.h>

#include <cmath>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/checkpoint/generation_config.h"
#include "model/seq2seq/generator.h"
#include "model/seq2seq/seq2seq_model.h"
#include "nlohmann/json.hpp"
#include "tests/model/seq2seq/seq2seq_fixture.h"

namespace docsparse {
namespace {

using json = nlohmann::json;
using testing::BatchOf;
using testing::LoadSeq2SeqFixture;
using testing::ReadFile;
using testing::Seq2SeqFixture;

// Beam scores are sums of log-probabilities; the fixture's tolerance for
// logits (1e-4) bounds them per step.
constexpr double kScoreTolerance = 1e-4;

class GenerationHfParityTest : public ::testing::TestWithParam<std::string> {};

// Runs one fixture run (a batch of inputs) with `config` for every input.
absl::StatusOr<GenerationResult> GenerateForRun(const Seq2SeqModel& model, const json& run,
                                                const std::vector<GenerationConfig>& configs) {
  absl::StatusOr<Seq2SeqEncoding> encoding = model.Encode(BatchOf(run["input_ids"]), {});
  if (!encoding.ok()) return encoding.status();
  absl::StatusOr<std::unique_ptr<DecoderStepper>> stepper = model.StartDecoding(*encoding, 1);
  if (!stepper.ok()) return stepper.status();
  return Generate(**stepper, configs, GenerationCallbacks{});
}

void ExpectSameAsHf(const GenerationResult& result, const std::vector<GenerationConfig>& configs,
                    const json& run) {
  EXPECT_EQ(HfGenerateSequences(result, configs),
            run["sequences"].get<std::vector<std::vector<int64_t>>>());
  if (!run.contains("sequences_scores")) return;
  const std::vector<double> expected = run["sequences_scores"].get<std::vector<double>>();
  std::vector<double> scores;
  for (const GeneratedSequence& sequence : result.sequences) {
    for (const GeneratedHypothesis& hypothesis : sequence.hypotheses) {
      ASSERT_TRUE(hypothesis.beam_score.has_value());
      scores.push_back(*hypothesis.beam_score);
    }
  }
  ASSERT_EQ(scores.size(), expected.size());
  for (size_t i = 0; i < scores.size(); ++i) EXPECT_NEAR(scores[i], expected[i], kScoreTolerance);
}

TEST_P(GenerationHfParityTest, EveryGenerateCaseMatchesTransformers) {
  const Seq2SeqFixture fixture = LoadSeq2SeqFixture(GetParam());
  ASSERT_NE(fixture.model, nullptr);
  c10::InferenceMode inference_mode;
  const json model_config = json::parse(ReadFile(fixture.dir + "/config.json"));
  ASSERT_FALSE(fixture.cases["generate_cases"].empty());
  for (const json& hf_case : fixture.cases["generate_cases"]) {
    SCOPED_TRACE(hf_case["name"].get<std::string>());
    absl::StatusOr<GenerationConfig> config =
        testing::CaseGenerationConfig(model_config, hf_case, fixture.model->max_decoder_length());
    ASSERT_TRUE(config.ok()) << config.status();
    for (const json& run : hf_case["runs"]) {
      SCOPED_TRACE("batch of " + std::to_string(run["input_ids"].size()));
      const std::vector<GenerationConfig> configs(run["input_ids"].size(), *config);
      absl::StatusOr<GenerationResult> result = GenerateForRun(*fixture.model, run, configs);
      ASSERT_TRUE(result.ok()) << result.status();
      ExpectSameAsHf(*result, configs, run);
    }
  }
}

TEST_P(GenerationHfParityTest, CheckpointGenerationConfigIsTheEarlyStoppingBeamCase) {
  // The fixture checkpoint's generation_config.json holds the parameters of
  // "beam4_lp2_ngram3_early": serving with the model's defaults must give
  // HF's output for that case.
  const Seq2SeqFixture fixture = LoadSeq2SeqFixture(GetParam());
  ASSERT_NE(fixture.model, nullptr);
  c10::InferenceMode inference_mode;
  absl::StatusOr<GenerationConfig> loaded = LoadGenerationConfig(fixture.dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  absl::StatusOr<GenerationConfig> config = ApplyGenerationOverrides(
      *loaded, GenerationOverrides{}, static_cast<int>(fixture.model->max_decoder_length()));
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(config->num_beams, 4);
  EXPECT_EQ(config->early_stopping, EarlyStopping::kWhenBeamsFinished);
  const json* early = nullptr;
  for (const json& hf_case : fixture.cases["generate_cases"]) {
    if (hf_case["name"] == "beam4_lp2_ngram3_early") early = &hf_case;
  }
  ASSERT_NE(early, nullptr);
  const json& run = (*early)["runs"].back();  // the batch of different lengths
  const std::vector<GenerationConfig> configs(run["input_ids"].size(), *config);
  absl::StatusOr<GenerationResult> result = GenerateForRun(*fixture.model, run, configs);
  ASSERT_TRUE(result.ok()) << result.status();
  ExpectSameAsHf(*result, configs, run);
}

TEST_P(GenerationHfParityTest, RequestOverridesReachTheDecoder) {
  // A greedy request (num_beams 1) on the beam-search model defaults must
  // give HF's greedy case, whose other parameters it shares.
  const Seq2SeqFixture fixture = LoadSeq2SeqFixture(GetParam());
  ASSERT_NE(fixture.model, nullptr);
  c10::InferenceMode inference_mode;
  absl::StatusOr<GenerationConfig> loaded = LoadGenerationConfig(fixture.dir);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  GenerationOverrides overrides;
  overrides.num_beams = 1;
  overrides.no_repeat_ngram_size = 0;
  overrides.length_penalty = DecimalFloatToDouble(1.0f);
  overrides.early_stopping = false;
  absl::StatusOr<GenerationConfig> config = ApplyGenerationOverrides(
      *loaded, overrides, static_cast<int>(fixture.model->max_decoder_length()));
  ASSERT_TRUE(config.ok()) << config.status();
  const json* greedy = nullptr;
  for (const json& hf_case : fixture.cases["generate_cases"]) {
    if (hf_case["name"] == "greedy") greedy = &hf_case;
  }
  ASSERT_NE(greedy, nullptr);
  const json& run = (*greedy)["runs"].back();
  const std::vector<GenerationConfig> configs(run["input_ids"].size(), *config);
  absl::StatusOr<GenerationResult> result = GenerateForRun(*fixture.model, run, configs);
  ASSERT_TRUE(result.ok()) << result.status();
  ExpectSameAsHf(*result, configs, run);
}

INSTANTIATE_TEST_SUITE_P(Models, GenerationHfParityTest,
                         ::testing::Values("bart", "pegasus", "lsg_bart", "lsg_pegasus", "led",
                                           "bigbird_pegasus"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace docsparse
