// Generate() over TableStepper with outputs derived by hand.
#include <cmath>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/seq2seq/generator.h"
#include "tests/model/seq2seq/generation_test_stepper.h"

namespace docsparse {
namespace {

using ::testing::ElementsAre;

// Vocabulary of the counting table: 0 start, 1..3 words, 4 eos, 5 pad.
constexpr int64_t kStart = 0;
constexpr int64_t kEos = 4;
constexpr int64_t kPad = 5;

// Counting table: the best next token is (last + 1) % 4, and document d
// prefers eos once it has produced d + 1 tokens (eos is second best before
// that, the count second best after). So document 0 says "1 eos",
// document 1 "1 2 eos", ...
std::vector<float> CountingLogits(int64_t document, const std::vector<int64_t>& prefix) {
  std::vector<float> logits(6, -5.0f);
  const int64_t generated = static_cast<int64_t>(prefix.size()) - 1;
  logits[static_cast<size_t>((prefix.back() + 1) % 4)] = 2.0f;
  logits[kEos] = generated >= document + 1 ? 3.0f : 0.5f;
  return logits;
}

GenerationConfig Greedy(int max_length) {
  GenerationConfig config;
  config.max_length = max_length;
  config.decoder_start_token_id = kStart;
  config.eos_token_ids = {kEos};
  config.pad_token_id = kPad;
  return config;
}

std::vector<int64_t> Tokens(const GeneratedSequence& sequence) {
  return sequence.hypotheses.empty() ? std::vector<int64_t>{} : sequence.hypotheses[0].token_ids;
}

TEST(GeneratorTest, GreedySequencesLeaveTheBatchAsTheyFinish) {
  TableStepper stepper({0, 1, 2}, CountingLogits);
  const std::vector<GenerationConfig> configs(3, Greedy(10));
  const auto result = Generate(stepper, configs, GenerationCallbacks{});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Tokens(result->sequences[0]), ElementsAre(1, kEos));
  EXPECT_THAT(Tokens(result->sequences[1]), ElementsAre(1, 2, kEos));
  EXPECT_THAT(Tokens(result->sequences[2]), ElementsAre(1, 2, 3, kEos));
  for (const GeneratedSequence& sequence : result->sequences) {
    EXPECT_EQ(sequence.finish_reason, FinishReason::kEos);
    EXPECT_FALSE(sequence.hypotheses[0].beam_score.has_value());
  }
  // Step 2 ends document 0, step 3 document 1.
  EXPECT_THAT(stepper.rows_per_step(), ElementsAre(3, 3, 2, 1));
  EXPECT_EQ(result->decoder_steps, 4);
  EXPECT_EQ(result->decoder_row_steps, 9);
  // What transformers would return for the batch: start token, pad to length.
  EXPECT_THAT(
      HfGenerateSequences(*result, configs),
      ElementsAre(ElementsAre(kStart, 1, kEos, kPad, kPad), ElementsAre(kStart, 1, 2, kEos, kPad),
                  ElementsAre(kStart, 1, 2, 3, kEos)));
}

TEST(GeneratorTest, GreedyStopsAtMaxLengthCountingTheStartToken) {
  TableStepper stepper({7}, CountingLogits);
  const auto result = Generate(stepper, {Greedy(4)}, GenerationCallbacks{});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Tokens(result->sequences[0]), ElementsAre(1, 2, 3));
  EXPECT_EQ(result->sequences[0].finish_reason, FinishReason::kMaxLength);

  // max_new_tokens counts generated tokens only.
  GenerationConfig config = Greedy(4);
  config.max_new_tokens = 5;
  TableStepper longer({7}, CountingLogits);
  const auto more = Generate(longer, {config}, GenerationCallbacks{});
  ASSERT_TRUE(more.ok()) << more.status();
  EXPECT_THAT(Tokens(more->sequences[0]), ElementsAre(1, 2, 3, 0, 1));
}

TEST(GeneratorTest, ProcessorsShapeGreedyOutput) {
  // Document 0 wants eos from its second token on; min_length 4 bans eos
  // until cur_len 4 (three tokens generated); forced BOS makes the first 3.
  GenerationConfig config = Greedy(10);
  config.min_length = 4;
  config.forced_bos_token_id = 3;
  TableStepper stepper({0}, CountingLogits);
  const auto result = Generate(stepper, {config}, GenerationCallbacks{});
  ASSERT_TRUE(result.ok()) << result.status();
  // 3 (forced), then the count 0, 1 while eos is banned, then eos.
  EXPECT_THAT(Tokens(result->sequences[0]), ElementsAre(3, 0, 1, kEos));

  // Forced EOS at max_length - 1 ends the text with eos.
  GenerationConfig forced = Greedy(4);
  forced.forced_eos_token_ids = {kEos};
  TableStepper long_document({9}, CountingLogits);
  const auto ended = Generate(long_document, {forced}, GenerationCallbacks{});
  ASSERT_TRUE(ended.ok()) << ended.status();
  EXPECT_THAT(Tokens(ended->sequences[0]), ElementsAre(1, 2, kEos));
  EXPECT_EQ(ended->sequences[0].finish_reason, FinishReason::kEos);
}

TEST(GeneratorTest, NoRepeatNGramChangesGreedyChoice) {
  // The counting table cycles 1 2 3 0 1 2 ...; with 2-grams banned the
  // second "1 2" is impossible and eos (second best) is chosen instead.
  GenerationConfig config = Greedy(12);
  config.no_repeat_ngram_size = 2;
  TableStepper stepper({20}, CountingLogits);
  const auto result = Generate(stepper, {config}, GenerationCallbacks{});
  ASSERT_TRUE(result.ok()) << result.status();
  // 1 2 3 0 are new bigrams' ends; after that 0, the count says 1, but the
  // start token 0 was already followed by 1: banned, eos is next best.
  EXPECT_THAT(Tokens(result->sequences[0]), ElementsAre(1, 2, 3, 0, kEos));
}

TEST(GeneratorTest, StreamsGreedyTokensInOrderAsTheyAreChosen) {
  TableStepper stepper({0, 2}, CountingLogits);
  std::vector<std::pair<int, int64_t>> streamed;
  GenerationCallbacks callbacks;
  callbacks.on_token = [&](int sequence, int64_t token) { streamed.emplace_back(sequence, token); };
  const auto result = Generate(stepper, {Greedy(10), Greedy(10)}, callbacks);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(streamed,
              ElementsAre(std::make_pair(0, 1), std::make_pair(1, 1), std::make_pair(0, kEos),
                          std::make_pair(1, 2), std::make_pair(1, 3), std::make_pair(1, kEos)));
}

TEST(GeneratorTest, CancelledSequenceLeavesAndTheOthersGoOn) {
  TableStepper stepper({5, 5, 5}, CountingLogits);
  int streamed_to_middle = 0;
  GenerationCallbacks callbacks;
  callbacks.on_token = [&](int sequence, int64_t) { streamed_to_middle += sequence == 1; };
  // The middle client goes away after two tokens.
  callbacks.is_cancelled = [&](int sequence) { return sequence == 1 && streamed_to_middle >= 2; };
  const auto result = Generate(stepper, std::vector<GenerationConfig>(3, Greedy(6)), callbacks);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->sequences[1].finish_reason, FinishReason::kCancelled);
  EXPECT_THAT(Tokens(result->sequences[1]), ElementsAre(1, 2));
  EXPECT_THAT(Tokens(result->sequences[0]), ElementsAre(1, 2, 3, 0, 1));
  EXPECT_THAT(Tokens(result->sequences[2]), ElementsAre(1, 2, 3, 0, 1));
  EXPECT_THAT(stepper.rows_per_step(), ElementsAre(3, 3, 2, 2, 2));
}

TEST(GeneratorTest, CancelledBeforeTheFirstStepCostsNothing) {
  TableStepper stepper({0}, CountingLogits);
  GenerationCallbacks callbacks;
  callbacks.is_cancelled = [](int) { return true; };
  const auto result = Generate(stepper, {Greedy(10)}, callbacks);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->sequences[0].finish_reason, FinishReason::kCancelled);
  EXPECT_TRUE(Tokens(result->sequences[0]).empty());
  EXPECT_EQ(result->decoder_steps, 0);
}

// Beam table over 0 start, 1 A, 2 B, 3 eos (probabilities as logits, so
// log_softmax returns their logs):
//   after [0]:    A .5, B .4, start .06, eos .04
//   after [0 A]:  eos .35, A .32, B .28, start .05
//   after [0 B]:  eos .9, A .04, B .04, start .02
//   later:        eos .97, the rest .01
// Greedy says "A eos" (p .175); two beams find "B eos" (p .36).
std::vector<float> BeamLogits(int64_t, const std::vector<int64_t>& prefix) {
  std::vector<double> p;
  if (prefix == std::vector<int64_t>{0}) {
    p = {.06, .5, .4, .04};
  } else if (prefix == std::vector<int64_t>{0, 1}) {
    p = {.05, .32, .28, .35};
  } else if (prefix == std::vector<int64_t>{0, 2}) {
    p = {.02, .04, .04, .9};
  } else {
    p = {.01, .01, .01, .97};
  }
  std::vector<float> logits;
  for (const double value : p) logits.push_back(static_cast<float>(std::log(value)));
  return logits;
}

GenerationConfig Beams(int num_beams) {
  GenerationConfig config;
  config.max_length = 10;
  config.num_beams = num_beams;
  config.early_stopping = EarlyStopping::kWhenBeamsFinished;
  config.decoder_start_token_id = 0;
  config.eos_token_ids = {3};
  config.pad_token_id = 0;
  return config;
}

TEST(GeneratorTest, BeamSearchFindsTheMoreLikelyText) {
  TableStepper greedy_stepper({0}, BeamLogits);
  const auto greedy = Generate(greedy_stepper, {Beams(1)}, GenerationCallbacks{});
  ASSERT_TRUE(greedy.ok()) << greedy.status();
  EXPECT_THAT(Tokens(greedy->sequences[0]), ElementsAre(1, 3));

  TableStepper beam_stepper({0}, BeamLogits);
  const auto beam = Generate(beam_stepper, {Beams(2)}, GenerationCallbacks{});
  ASSERT_TRUE(beam.ok()) << beam.status();
  EXPECT_THAT(Tokens(beam->sequences[0]), ElementsAre(2, 3));
  EXPECT_EQ(beam->sequences[0].finish_reason, FinishReason::kEos);
  // Step 2 finishes "B eos" and "A eos": two hypotheses, early stopping.
  EXPECT_NEAR(*beam->sequences[0].hypotheses[0].beam_score, std::log(0.36) / 2, 1e-5);
  // One row on the first step, then the two beams.
  EXPECT_THAT(beam_stepper.rows_per_step(), ElementsAre(1, 2));
}

TEST(GeneratorTest, BeamAndGreedySequencesShareABatchAndLeaveItIndependently) {
  // Sequence 0: beams, done after step 2. Sequence 1: greedy on the counting
  // table, runs until max_length. Sequence 2: beams on a long document.
  const auto logits = [](int64_t document, const std::vector<int64_t>& prefix) {
    if (document == 100) return BeamLogits(document, prefix);
    std::vector<float> counting = CountingLogits(document, prefix);
    counting.resize(4);  // same vocabulary size: drop eos 4 and pad 5
    return counting;
  };
  GenerationConfig greedy = Greedy(6);
  greedy.eos_token_ids = {3};
  greedy.pad_token_id = 0;
  GenerationConfig beams_long = Beams(2);
  beams_long.max_length = 5;
  beams_long.eos_token_ids = {};  // nothing ends it but max_length
  TableStepper stepper({100, 50, 50}, logits);
  const auto result = Generate(stepper, {Beams(2), greedy, beams_long}, GenerationCallbacks{});
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT(Tokens(result->sequences[0]), ElementsAre(2, 3));
  EXPECT_THAT(Tokens(result->sequences[1]), ElementsAre(1, 2, 3));  // 3 is this config's eos
  EXPECT_EQ(result->sequences[1].finish_reason, FinishReason::kEos);
  EXPECT_EQ(result->sequences[2].finish_reason, FinishReason::kMaxLength);
  EXPECT_EQ(Tokens(result->sequences[2]).size(), 4u);
  // Rows: 1 + 1 + 1, then 2 + 1 + 2; sequence 0 and 1 leave after steps 2
  // and 3; sequence 2 runs to its length 5 (4 steps).
  EXPECT_THAT(stepper.rows_per_step(), ElementsAre(3, 5, 3, 2));
}

TEST(GeneratorTest, RefusesTokenIdsOutsideTheVocabulary) {
  GenerationConfig config = Greedy(10);
  config.forced_bos_token_id = 6;  // the counting table has 6 tokens
  TableStepper stepper({0}, CountingLogits);
  const auto result = Generate(stepper, {config}, GenerationCallbacks{});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(GeneratorTest, RefusesAConfigCountThatDoesNotMatchTheRows) {
  TableStepper stepper({0, 1}, CountingLogits);
  const auto result = Generate(stepper, {Greedy(10)}, GenerationCallbacks{});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
}

// A decoder that fails on its second step.
class FailingStepper : public TableStepper {
 public:
  FailingStepper() : TableStepper({0}, CountingLogits) {}
  absl::StatusOr<at::Tensor> Step(const at::Tensor& tokens) override {
    if (++steps_ == 2) return absl::ResourceExhaustedError("out of memory");
    return TableStepper::Step(tokens);
  }

 private:
  int steps_ = 0;
};

TEST(GeneratorTest, ReturnsDecoderErrors) {
  FailingStepper stepper;
  const auto result = Generate(stepper, {Greedy(10)}, GenerationCallbacks{});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kResourceExhausted);
}

}  // namespace
}  // namespace docsparse
