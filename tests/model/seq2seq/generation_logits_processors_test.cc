#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/checkpoint/generation_config.h"
#include "model/seq2seq/logits_processors.h"

namespace docsparse {
namespace {

constexpr float kInf = std::numeric_limits<float>::infinity();

std::vector<float> Ramp(int vocab) {
  std::vector<float> scores(static_cast<size_t>(vocab));
  for (int i = 0; i < vocab; ++i) scores[static_cast<size_t>(i)] = 0.5f * static_cast<float>(i);
  return scores;
}

// Indices set to -inf.
std::vector<int> Banned(const std::vector<float>& scores) {
  std::vector<int> banned;
  for (size_t i = 0; i < scores.size(); ++i) {
    if (scores[i] == -kInf) banned.push_back(static_cast<int>(i));
  }
  return banned;
}

TEST(GenerationLogitsProcessorsTest, NoRepeatNGramBansTokensThatCompleteASeenNGram) {
  // Bigrams so far: (0,3) (3,4) (4,3) (3,4): the last token is 4, and 4 was
  // followed by 3 before, so 3 is banned; nothing else.
  std::vector<float> scores = Ramp(6);
  const std::vector<int64_t> row = {0, 3, 4, 3, 4};
  ApplyNoRepeatNGram(2, row, absl::MakeSpan(scores));
  EXPECT_THAT(Banned(scores), ::testing::ElementsAre(3));
  EXPECT_EQ(scores[5], 2.5f);  // untouched scores keep their value
}

TEST(GenerationLogitsProcessorsTest, NoRepeatNGramCountsTheStartTokenAndAllEarlierOccurrences) {
  // Trigrams whose first two tokens are (2, 2): (2,2,5) and (2,2,1); the
  // start token 2 opens the first one.
  std::vector<float> scores = Ramp(8);
  const std::vector<int64_t> row = {2, 2, 5, 2, 2, 1, 7, 2, 2};
  ApplyNoRepeatNGram(3, row, absl::MakeSpan(scores));
  EXPECT_THAT(Banned(scores), ::testing::ElementsAre(1, 5));
}

TEST(GenerationLogitsProcessorsTest, NoRepeatNGramWaitsUntilAnNGramFits) {
  // HF: nothing is banned while cur_len + 1 < n.
  std::vector<float> scores = Ramp(4);
  ApplyNoRepeatNGram(4, std::vector<int64_t>{1, 1}, absl::MakeSpan(scores));
  EXPECT_THAT(Banned(scores), ::testing::IsEmpty());
  // cur_len + 1 == n: the lookup runs, but (1,1,1) has no earlier prefix.
  ApplyNoRepeatNGram(4, std::vector<int64_t>{1, 1, 1}, absl::MakeSpan(scores));
  EXPECT_THAT(Banned(scores), ::testing::IsEmpty());
  ApplyNoRepeatNGram(4, std::vector<int64_t>{1, 1, 1, 2, 1, 1, 1}, absl::MakeSpan(scores));
  EXPECT_THAT(Banned(scores), ::testing::ElementsAre(2));
}

TEST(GenerationLogitsProcessorsTest, NoRepeatUnigramBansEveryTokenSeen) {
  std::vector<float> scores = Ramp(6);
  ApplyNoRepeatNGram(1, std::vector<int64_t>{0, 4, 2}, absl::MakeSpan(scores));
  EXPECT_THAT(Banned(scores), ::testing::ElementsAre(0, 2, 4));
}

TEST(GenerationLogitsProcessorsTest, MinLengthBansEveryEosIdBelowTheLength) {
  std::vector<float> scores = Ramp(6);
  const std::vector<int64_t> eos = {2, 5};
  ApplyMinLength(4, eos, /*cur_len=*/3, absl::MakeSpan(scores));
  EXPECT_THAT(Banned(scores), ::testing::ElementsAre(2, 5));

  std::vector<float> at_length = Ramp(6);
  ApplyMinLength(4, eos, /*cur_len=*/4, absl::MakeSpan(at_length));
  EXPECT_THAT(Banned(at_length), ::testing::IsEmpty());
}

TEST(GenerationLogitsProcessorsTest, ForcedBosOnlyAtTheFirstStep) {
  std::vector<float> scores = Ramp(5);
  ApplyForcedBos(3, /*cur_len=*/1, absl::MakeSpan(scores));
  EXPECT_THAT(scores, ::testing::ElementsAre(-kInf, -kInf, -kInf, 0.0f, -kInf));

  std::vector<float> later = Ramp(5);
  ApplyForcedBos(3, /*cur_len=*/2, absl::MakeSpan(later));
  EXPECT_EQ(later, Ramp(5));
}

TEST(GenerationLogitsProcessorsTest, ForcedEosOnlyAtTheLastAllowedStep) {
  const std::vector<int64_t> eos = {1, 4};
  std::vector<float> scores = Ramp(5);
  ApplyForcedEos(/*max_length=*/6, eos, /*cur_len=*/5, absl::MakeSpan(scores));
  EXPECT_THAT(scores, ::testing::ElementsAre(-kInf, 0.0f, -kInf, -kInf, 0.0f));

  std::vector<float> earlier = Ramp(5);
  ApplyForcedEos(6, eos, /*cur_len=*/4, absl::MakeSpan(earlier));
  EXPECT_EQ(earlier, Ramp(5));
}

TEST(GenerationLogitsProcessorsTest, ListAppliesHfOrderSoForcedEosWinsOverMinLength) {
  // min_length bans eos, then forced EOS (later in HF's list) overwrites
  // every score: eos ends up at 0, not -inf.
  GenerationConfig config;
  config.max_length = 5;
  config.min_length = 10;
  config.eos_token_ids = {2};
  config.forced_eos_token_ids = {2};
  config.no_repeat_ngram_size = 1;
  std::vector<float> scores = Ramp(4);
  ApplyLogitsProcessors(config, std::vector<int64_t>{0, 1, 3, 1}, absl::MakeSpan(scores));
  EXPECT_THAT(scores, ::testing::ElementsAre(-kInf, -kInf, 0.0f, -kInf));

  // One step earlier: the n-gram and min-length bans stand.
  std::vector<float> earlier = Ramp(4);
  ApplyLogitsProcessors(config, std::vector<int64_t>{0, 1, 3}, absl::MakeSpan(earlier));
  EXPECT_THAT(Banned(earlier), ::testing::ElementsAre(0, 1, 2, 3));
}

TEST(GenerationLogitsProcessorsTest, ForcedEosUsesMaxNewTokens) {
  GenerationConfig config;
  config.max_length = 100;
  config.max_new_tokens = 3;  // total length 4: the token at cur_len 3 is forced
  config.forced_eos_token_ids = {1};
  std::vector<float> scores = Ramp(3);
  ApplyLogitsProcessors(config, std::vector<int64_t>{0, 2, 2}, absl::MakeSpan(scores));
  EXPECT_THAT(scores, ::testing::ElementsAre(-kInf, 0.0f, -kInf));
}

TEST(GenerationLogitsProcessorsTest, MinLengthNeedsEosIds) {
  // HF adds MinLengthLogitsProcessor only when eos_token_id is set.
  GenerationConfig config;
  config.min_length = 10;
  std::vector<float> scores = Ramp(4);
  ApplyLogitsProcessors(config, std::vector<int64_t>{0}, absl::MakeSpan(scores));
  EXPECT_EQ(scores, Ramp(4));
}

}  // namespace
}  // namespace docsparse
