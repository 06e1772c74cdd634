// Generate() against transformers 4.36.2 `model.generate()` itself, on a
// decoder whose logits are a fixed function of (document, decoder prefix)
// (TableLogits below). Real checkpoints rarely emit eos within a short test;
// this table ends texts early and often, so eos hypotheses, early stopping
// in all three modes, multiple eos ids, min_length, forced BOS/EOS,
// no-repeat n-grams, max_new_tokens and num_return_sequences are all
// exercised against HF's own code.
//
// How the expectations were made: a PreTrainedModel subclass
// (config.is_encoder_decoder, vocab 8) whose forward returns TableLogits for
// every row of decoder_input_ids (document id passed as
// encoder_outputs.last_hidden_state[:, 0, 0]), called as
//   model.generate(zeros(6, 1), encoder_outputs=..., use_cache=False,
//                  decoder_start_token_id=0, bos_token_id=0, eos_token_id=2,
//                  pad_token_id=1, return_dict_in_generate=True,
//                  output_scores=True, **case_params)
// for documents 0..5 in one batch; sequences and sequences_scores copied
// below. (transformers 4.36.2, torch 2.15.)
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/seq2seq/generator.h"
#include "tests/model/seq2seq/generation_test_stepper.h"

namespace docsparse {
namespace {

constexpr int kVocab = 8;
const std::vector<int64_t> kDocuments = {0, 1, 2, 3, 4, 5};

// Integer hashing, then values on a 1/4096 grid: exact in float32 and in
// Python, and almost never tied within a row.
std::vector<float> TableLogits(int64_t document, const std::vector<int64_t>& prefix) {
  constexpr uint64_t kModulus = 2147483647;
  uint64_t h = (2166136261u + static_cast<uint64_t>(document) * 7919u) % kModulus;
  for (const int64_t token : prefix)
    h = (h * 1000003u + static_cast<uint64_t>(token) + 1) % kModulus;
  std::vector<float> logits;
  for (uint64_t v = 0; v < kVocab; ++v) {
    const uint64_t x = (h * (2 * v + 3) + (v + 1) * 2654435761u) % 100003u;
    logits.push_back(static_cast<float>(static_cast<double>(x) / 4096.0 - 12.0));
  }
  return logits;
}

struct HfCase {
  const char* name;
  std::function<void(GenerationConfig&)> set_params;
  std::vector<std::vector<int64_t>> sequences;  // HF rows, num_return_sequences per document
  std::vector<double> scores;                   // sequences_scores (beam search)
};

const std::vector<HfCase>& Cases() {
  static const std::vector<HfCase> cases = {
    {"greedy",
     [](GenerationConfig& c) { c.num_beams = 1; c.max_length = 12; },
     {{0, 3, 0, 2, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 6, 5, 0, 7, 3, 4, 4, 4, 0, 3, 6},
       {0, 7, 7, 6, 6, 0, 7, 0, 2, 1, 1, 1},
       {0, 1, 6, 2, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 6, 4, 6, 4, 3, 6, 1, 3, 0, 0, 0},
       {0, 1, 0, 0, 5, 7, 2, 1, 1, 1, 1, 1}},
     {}},
    {"greedy_min_length",
     [](GenerationConfig& c) { c.num_beams = 1; c.max_length = 12; c.min_length = 6; },
     {{0, 3, 0, 6, 7, 7, 3, 0, 0, 0, 3, 2},
       {0, 6, 5, 0, 7, 3, 4, 4, 4, 0, 3, 6},
       {0, 7, 7, 6, 6, 0, 7, 0, 2, 1, 1, 1},
       {0, 1, 6, 7, 4, 7, 6, 1, 4, 1, 3, 0},
       {0, 6, 4, 6, 4, 3, 6, 1, 3, 0, 0, 0},
       {0, 1, 0, 0, 5, 7, 2, 1, 1, 1, 1, 1}},
     {}},
    {"greedy_no_repeat_2",
     [](GenerationConfig& c) { c.num_beams = 1; c.max_length = 14; c.no_repeat_ngram_size = 2; },
     {{0, 3, 0, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 6, 5, 0, 7, 3, 4, 4, 7, 0, 4, 6, 0, 1},
       {0, 7, 7, 6, 6, 0, 6, 2, 1, 1, 1, 1, 1, 1},
       {0, 1, 6, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 6, 4, 6, 1, 3, 6, 6, 2, 1, 1, 1, 1, 1},
       {0, 1, 0, 0, 5, 7, 2, 1, 1, 1, 1, 1, 1, 1}},
     {}},
    {"greedy_forced_bos_eos",
     [](GenerationConfig& c) { c.num_beams = 1; c.max_length = 7; c.forced_bos_token_id = 4; c.forced_eos_token_ids = {2}; },
     {{0, 4, 0, 2, 1, 1, 1},
       {0, 4, 5, 0, 2, 1, 1},
       {0, 4, 7, 6, 7, 6, 2},
       {0, 4, 6, 2, 1, 1, 1},
       {0, 4, 4, 6, 3, 4, 2},
       {0, 4, 0, 0, 2, 1, 1}},
     {}},
    {"greedy_max_new_tokens",
     [](GenerationConfig& c) { c.num_beams = 1; c.max_length = 40; c.max_new_tokens = 5; },
     {{0, 3, 0, 2, 1, 1},
       {0, 6, 5, 0, 7, 3},
       {0, 7, 7, 6, 6, 0},
       {0, 1, 6, 2, 1, 1},
       {0, 6, 4, 6, 4, 3},
       {0, 1, 0, 0, 5, 7}},
     {}},
    {"greedy_two_eos",
     [](GenerationConfig& c) { c.num_beams = 1; c.max_length = 12; c.eos_token_ids = {2, 5}; },
     {{0, 3, 0, 2, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 6, 5, 1, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 7, 7, 6, 6, 0, 7, 0, 2, 1, 1, 1},
       {0, 1, 6, 2, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 6, 4, 6, 4, 3, 6, 1, 3, 0, 0, 0},
       {0, 1, 0, 0, 5, 1, 1, 1, 1, 1, 1, 1}},
     {}},
    {"beam2_heuristic",
     [](GenerationConfig& c) { c.num_beams = 2; c.max_length = 12; c.early_stopping = EarlyStopping::kHeuristic; },
     {{0, 3, 0, 2, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 6, 5, 0, 7, 3, 4, 4, 4, 0, 3, 6},
       {0, 7, 7, 6, 6, 0, 7, 0, 5, 4, 0, 6},
       {0, 1, 6, 2, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 6, 4, 6, 4, 3, 6, 1, 3, 0, 0, 0},
       {0, 1, 0, 0, 5, 7, 2, 1, 1, 1, 1, 1}},
     {-0.2740465998649597, -0.1990339607000351, -0.2864653170108795, -0.08568906038999557, -0.08555925637483597, -0.5927720665931702}},
    {"beam3_early",
     [](GenerationConfig& c) { c.num_beams = 3; c.max_length = 12; c.early_stopping = EarlyStopping::kWhenBeamsFinished; },
     {{0, 3, 0, 2, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 6, 5, 0, 7, 3, 4, 4, 4, 0, 3, 6},
       {0, 7, 1, 6, 2, 1, 1, 1, 1, 1, 1, 1},
       {0, 1, 6, 2, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 6, 4, 6, 4, 3, 6, 1, 3, 0, 0, 0},
       {0, 3, 0, 0, 5, 3, 7, 6, 7, 5, 2, 1}},
     {-0.2740465998649597, -0.1990339607000351, -0.4122503101825714, -0.08568906038999557, -0.08555925637483597, -0.5211063623428345}},
    {"beam3_never_lp2",
     [](GenerationConfig& c) { c.num_beams = 3; c.max_length = 12; c.early_stopping = EarlyStopping::kNever; c.length_penalty = 2.0; },
     {{0, 3, 0, 6, 7, 7, 3, 0, 0, 0, 3, 2},
       {0, 6, 5, 0, 7, 3, 4, 4, 4, 0, 3, 6},
       {0, 7, 7, 6, 6, 0, 7, 0, 5, 4, 0, 6},
       {0, 1, 6, 2, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 6, 4, 6, 4, 3, 6, 1, 3, 0, 0, 0},
       {0, 3, 0, 0, 5, 3, 7, 6, 7, 5, 3, 4}},
     {-0.042850155383348465, -0.01809399574995041, -0.026042301207780838, -0.028563018888235092, -0.007778114173561335, -0.03305760771036148}},
    {"beam3_heuristic_lp2",
     [](GenerationConfig& c) { c.num_beams = 3; c.max_length = 12; c.early_stopping = EarlyStopping::kHeuristic; c.length_penalty = 2.0; },
     {{0, 3, 0, 6, 7, 7, 3, 0, 0, 0, 3, 2},
       {0, 6, 5, 0, 7, 3, 4, 4, 4, 0, 3, 6},
       {0, 7, 7, 6, 6, 0, 7, 0, 5, 4, 0, 6},
       {0, 1, 6, 2, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 6, 4, 6, 4, 3, 6, 1, 3, 0, 0, 0},
       {0, 3, 0, 0, 5, 3, 7, 6, 7, 5, 3, 4}},
     {-0.042850155383348465, -0.01809399574995041, -0.026042301207780838, -0.028563018888235092, -0.007778114173561335, -0.03305760771036148}},
    {"beam4_never_lp_negative",
     [](GenerationConfig& c) { c.num_beams = 4; c.max_length = 10; c.early_stopping = EarlyStopping::kNever; c.length_penalty = -0.5; },
     {{0, 3, 0, 2, 1, 1, 1, 1, 1, 1},
       {0, 3, 5, 0, 1, 2, 1, 1, 1, 1},
       {0, 7, 1, 6, 2, 1, 1, 1, 1, 1},
       {0, 1, 6, 2, 1, 1, 1, 1, 1, 1},
       {0, 6, 4, 6, 4, 3, 6, 1, 3, 0},
       {0, 1, 0, 0, 5, 7, 2, 1, 1, 1}},
     {-1.423987865447998, -5.6057281494140625, -3.2980024814605713, -0.4452534019947052, -2.822570323944092, -8.711935043334961}},
    {"beam3_lp06_min_length",
     [](GenerationConfig& c) { c.num_beams = 3; c.max_length = 14; c.min_length = 6; c.length_penalty = 0.6; },
     {{0, 3, 0, 6, 7, 7, 3, 0, 0, 0, 3, 2, 1, 1},
       {0, 6, 5, 0, 7, 3, 4, 4, 4, 0, 3, 6, 3, 5},
       {0, 7, 7, 6, 6, 0, 7, 0, 2, 1, 1, 1, 1, 1},
       {0, 1, 6, 7, 4, 7, 6, 1, 4, 1, 3, 0, 4, 6},
       {0, 6, 4, 6, 4, 3, 6, 1, 3, 0, 0, 0, 0, 1},
       {0, 3, 0, 0, 5, 3, 7, 6, 7, 5, 3, 4, 0, 4}},
     {-1.2299916744232178, -0.5171579718589783, -0.7003287672996521, -1.8229475021362305, -0.2707367539405823, -0.9547863602638245}},
    {"beam3_no_repeat_2",
     [](GenerationConfig& c) { c.num_beams = 3; c.max_length = 14; c.no_repeat_ngram_size = 2; },
     {{0, 3, 0, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 6, 5, 0, 7, 3, 4, 4, 7, 0, 4, 6, 0, 1},
       {0, 7, 1, 6, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 1, 6, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 6, 4, 0, 4, 3, 7, 6, 7, 1, 3, 0, 7, 4},
       {0, 1, 1, 0, 5, 4, 0, 3, 5, 3, 4, 6, 7, 4}},
     {-0.2740465998649597, -0.3151291608810425, -0.4122503101825714, -0.08568906038999557, -0.520050585269928, -0.38048791885375977}},
    {"beam3_forced_bos_eos",
     [](GenerationConfig& c) { c.num_beams = 3; c.max_length = 8; c.forced_bos_token_id = 4; c.forced_eos_token_ids = {2}; },
     {{0, 4, 0, 2, 1, 1, 1, 1},
       {0, 4, 5, 0, 2, 1, 1, 1},
       {0, 4, 7, 6, 7, 6, 7, 2},
       {0, 4, 6, 2, 1, 1, 1, 1},
       {0, 4, 4, 6, 3, 4, 2, 1},
       {0, 4, 0, 0, 2, 1, 1, 1}},
     {-0.2619776427745819, -0.1666940599679947, -0.21333035826683044, -0.06382876634597778, -0.09238869696855545, -0.30443939566612244}},
    {"beam2_two_eos",
     [](GenerationConfig& c) { c.num_beams = 2; c.max_length = 12; c.eos_token_ids = {2, 5}; },
     {{0, 3, 0, 2, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 6, 2, 1, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 7, 7, 6, 6, 0, 7, 0, 2, 1, 1, 1},
       {0, 1, 6, 2, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 6, 4, 6, 4, 3, 6, 1, 3, 0, 0, 0},
       {0, 1, 0, 0, 2, 1, 1, 1, 1, 1, 1, 1}},
     {-0.2740465998649597, -0.12161501497030258, -0.30483579635620117, -0.08568906038999557, -0.08555925637483597, -0.43665188550949097}},
    {"beam4_return3",
     [](GenerationConfig& c) { c.num_beams = 4; c.max_length = 12; c.num_return_sequences = 3; },
     {{0, 3, 0, 2, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 3, 0, 6, 2, 1, 1, 1, 1, 1, 1, 1},
       {0, 3, 0, 6, 7, 7, 3, 0, 0, 0, 3, 2},
       {0, 6, 5, 0, 7, 3, 4, 4, 4, 0, 3, 6},
       {0, 6, 5, 4, 7, 4, 0, 1, 1, 1, 0, 0},
       {0, 6, 5, 4, 7, 4, 6, 1, 1, 7, 0, 1},
       {0, 7, 7, 6, 6, 0, 7, 0, 5, 4, 0, 6},
       {0, 7, 7, 6, 6, 0, 7, 0, 2, 1, 1, 1},
       {0, 7, 1, 6, 2, 1, 1, 1, 1, 1, 1, 1},
       {0, 1, 6, 2, 1, 1, 1, 1, 1, 1, 1, 1},
       {0, 1, 6, 7, 4, 7, 6, 1, 4, 1, 3, 0},
       {0, 1, 6, 7, 4, 7, 6, 4, 4, 1, 3, 2},
       {0, 6, 4, 6, 4, 3, 6, 1, 3, 0, 0, 0},
       {0, 6, 4, 3, 4, 3, 0, 7, 7, 0, 3, 6},
       {0, 6, 4, 6, 4, 3, 6, 4, 3, 0, 6, 6},
       {0, 1, 1, 0, 5, 4, 0, 1, 5, 3, 0, 4},
       {0, 3, 0, 0, 5, 3, 7, 6, 7, 5, 3, 4},
       {0, 1, 1, 0, 5, 4, 0, 3, 5, 3, 4, 6}},
     {-0.2740465998649597, -0.34719118475914, -0.4713517129421234, -0.1990339607000351, -0.3296210765838623, -0.36052897572517395, -0.2864653170108795, -0.30483579635620117, -0.4122503101825714, -0.08568906038999557, -0.7212895750999451, -0.7581514120101929, -0.08555925637483597, -0.2281351089477539, -0.24131174385547638, -0.30862653255462646, -0.3636336922645569, -0.4239278733730316}},
    {"beam3_max_new_tokens",
     [](GenerationConfig& c) { c.num_beams = 3; c.max_length = 40; c.max_new_tokens = 6; c.length_penalty = 1.5; },
     {{0, 3, 0, 2, 1, 1, 1},
       {0, 6, 5, 0, 7, 3, 4},
       {0, 7, 7, 6, 6, 0, 7},
       {0, 1, 6, 2, 1, 1, 1},
       {0, 6, 4, 6, 4, 3, 6},
       {0, 3, 0, 0, 5, 3, 7}},
     {-0.15822087228298187, -0.06533500552177429, -0.11780896037817001, -0.04947260022163391, -0.023051394149661064, -0.22652192413806915}},

  };
  return cases;
}

GenerationConfig ConfigFor(const HfCase& hf_case) {
  GenerationConfig config;
  config.decoder_start_token_id = 0;
  config.bos_token_id = 0;
  config.eos_token_ids = {2};
  config.pad_token_id = 1;
  hf_case.set_params(config);
  return config;
}

// Our row for one sequence, as HF would write it before batch padding.
std::vector<int64_t> Unpadded(const GeneratedHypothesis& hypothesis,
                              const GenerationConfig& config) {
  std::vector<int64_t> row = {config.decoder_start_token_id};
  row.insert(row.end(), hypothesis.token_ids.begin(), hypothesis.token_ids.end());
  return row;
}

TEST(GenerationHfTableTest, BatchOutputEqualsTransformersGenerate) {
  for (const HfCase& hf_case : Cases()) {
    SCOPED_TRACE(hf_case.name);
    const std::vector<GenerationConfig> configs(kDocuments.size(), ConfigFor(hf_case));
    TableStepper stepper(kDocuments, TableLogits);
    const auto result = Generate(stepper, configs, GenerationCallbacks{});
    ASSERT_TRUE(result.ok()) << result.status();
    EXPECT_EQ(HfGenerateSequences(*result, configs), hf_case.sequences);
    std::vector<double> scores;
    for (const GeneratedSequence& sequence : result->sequences) {
      for (const GeneratedHypothesis& hypothesis : sequence.hypotheses) {
        if (hypothesis.beam_score) scores.push_back(*hypothesis.beam_score);
      }
    }
    ASSERT_EQ(scores.size(), hf_case.scores.size());
    for (size_t i = 0; i < scores.size(); ++i) {
      // HF returns the score as float32.
      EXPECT_NEAR(scores[i], hf_case.scores[i], 1e-6 * (1.0 + std::abs(hf_case.scores[i])));
    }
  }
}

TEST(GenerationHfTableTest, FinishedSequencesLeaveTheBatch) {
  // The "greedy" case: document 0 ends at step 3, so later steps have fewer rows.
  const HfCase& greedy = Cases()[0];
  const std::vector<GenerationConfig> configs(kDocuments.size(), ConfigFor(greedy));
  TableStepper stepper(kDocuments, TableLogits);
  ASSERT_TRUE(Generate(stepper, configs, GenerationCallbacks{}).ok());
  ASSERT_FALSE(stepper.rows_per_step().empty());
  EXPECT_EQ(stepper.rows_per_step().front(), 6);
  EXPECT_LT(stepper.rows_per_step().back(), 6);
  EXPECT_TRUE(std::is_sorted(stepper.rows_per_step().rbegin(), stepper.rows_per_step().rend()));
}

TEST(GenerationHfTableTest, EachSequenceDecodesAsIfAlone) {
  // Every case's configuration in one batch, one document each: a request's
  // text must not depend on what it is batched with.
  std::vector<GenerationConfig> configs;
  std::vector<int64_t> documents;
  for (size_t c = 0; c < Cases().size(); ++c) {
    configs.push_back(ConfigFor(Cases()[c]));
    documents.push_back(kDocuments[c % kDocuments.size()]);
  }
  TableStepper stepper(documents, TableLogits);
  const auto result = Generate(stepper, configs, GenerationCallbacks{});
  ASSERT_TRUE(result.ok()) << result.status();
  for (size_t c = 0; c < Cases().size(); ++c) {
    const HfCase& hf_case = Cases()[c];
    SCOPED_TRACE(hf_case.name);
    const GenerationConfig& config = configs[c];
    const size_t returned = static_cast<size_t>(config.num_return_sequences);
    const std::vector<GeneratedHypothesis>& hypotheses = result->sequences[c].hypotheses;
    ASSERT_EQ(hypotheses.size(), returned);
    for (size_t h = 0; h < returned; ++h) {
      const std::vector<int64_t> ours = Unpadded(hypotheses[h], config);
      const std::vector<int64_t>& expected =
          hf_case.sequences[(c % kDocuments.size()) * returned + h];
      ASSERT_LE(ours.size(), expected.size());
      EXPECT_EQ(ours, std::vector<int64_t>(expected.begin(), expected.begin() + ours.size()));
      for (size_t i = ours.size(); i < expected.size(); ++i)
        EXPECT_EQ(expected[i], 1);  // HF padding
    }
  }
}

}  // namespace
}  // namespace docsparse
