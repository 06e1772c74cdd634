#include <ATen/ATen.h>

#include <cmath>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "model/checkpoint/generation_config.h"
#include "model/seq2seq/beam_search.h"

namespace docsparse {
namespace {

using ::testing::ElementsAre;

std::vector<std::vector<int64_t>> TokensOf(const std::vector<BeamHypothesis>& hypotheses) {
  std::vector<std::vector<int64_t>> tokens;
  for (const BeamHypothesis& hypothesis : hypotheses) tokens.push_back(hypothesis.tokens);
  return tokens;
}

TEST(BeamHypothesesTest, ScoresByGeneratedLengthCountingEosButNotTheStartToken) {
  BeamHypotheses hypotheses(/*num_beams=*/2, /*length_penalty=*/2.0, EarlyStopping::kHeuristic,
                            /*max_length=*/10);
  // [start, 5, 6] + eos: 3 generated tokens, -8 / 3^2.
  hypotheses.Add({0, 5, 6}, -8.0, /*ended_with_eos=*/true);
  // Stopped at max length without eos: 2 generated tokens, -8 / 2^2.
  hypotheses.Add({0, 5, 6}, -8.0, /*ended_with_eos=*/false);
  const std::vector<BeamHypothesis> best = hypotheses.Best(2);
  ASSERT_EQ(best.size(), 2u);
  EXPECT_DOUBLE_EQ(best[0].score, -8.0 / 9.0);
  EXPECT_TRUE(best[0].ended_with_eos);
  EXPECT_DOUBLE_EQ(best[1].score, -2.0);
}

TEST(BeamHypothesesTest, KeepsTheBestNumBeamsAndTracksTheWorst) {
  BeamHypotheses hypotheses(2, 1.0, EarlyStopping::kHeuristic, 10);
  hypotheses.Add({0, 5, 6}, -3.0, true);  // -1.0
  hypotheses.Add({0, 5}, -1.0, true);     // -0.5
  EXPECT_DOUBLE_EQ(hypotheses.worst_score(), -1.0);
  hypotheses.Add({0, 7, 7, 7}, -6.0, false);  // -2.0: worse than the worst, dropped
  EXPECT_EQ(hypotheses.size(), 2);
  hypotheses.Add({0, 1, 1, 1}, -2.4, true);  // -0.6 replaces -1.0
  EXPECT_EQ(hypotheses.size(), 2);
  EXPECT_DOUBLE_EQ(hypotheses.worst_score(), -0.6);
  EXPECT_THAT(TokensOf(hypotheses.Best(2)),
              ElementsAre(ElementsAre(0, 5), ElementsAre(0, 1, 1, 1)));
}

TEST(BeamHypothesesTest, TiesFollowHf) {
  // A full list takes a newcomer only when strictly better than the worst.
  BeamHypotheses full(1, 1.0, EarlyStopping::kHeuristic, 10);
  full.Add({0, 4}, -2.0, false);
  full.Add({0, 3}, -2.0, false);
  EXPECT_THAT(TokensOf(full.Best(1)), ElementsAre(ElementsAre(0, 4)));
  // Among kept equals, finalize's stable sort + pop() picks the last added.
  BeamHypotheses two(2, 1.0, EarlyStopping::kHeuristic, 10);
  two.Add({0, 4}, -2.0, false);
  two.Add({0, 3}, -2.0, false);
  EXPECT_THAT(TokensOf(two.Best(2)), ElementsAre(ElementsAre(0, 3), ElementsAre(0, 4)));
}

TEST(BeamHypothesesTest, IsDoneFollowsEachEarlyStoppingMode) {
  const auto filled = [](EarlyStopping mode, double length_penalty) {
    BeamHypotheses hypotheses(2, length_penalty, mode, /*max_length=*/10);
    hypotheses.Add({0, 5}, -1.2, true);  // generated length 2
    hypotheses.Add({0, 6}, -1.8, true);
    return hypotheses;
  };
  // Not full: never done.
  BeamHypotheses one(2, 1.0, EarlyStopping::kWhenBeamsFinished, 10);
  one.Add({0, 5}, -1.0, true);
  EXPECT_FALSE(one.IsDone(-100.0, 5));

  // true: done once full.
  EXPECT_TRUE(filled(EarlyStopping::kWhenBeamsFinished, 1.0).IsDone(0.0, 3));

  // false: worst (-0.9) against best / (cur_len - 1) ^ lp.
  const BeamHypotheses heuristic = filled(EarlyStopping::kHeuristic, 1.0);
  EXPECT_TRUE(heuristic.IsDone(-3.6, 5));   // -0.9: ties count as done
  EXPECT_FALSE(heuristic.IsDone(-3.5, 5));  // -0.875

  // "never", length_penalty > 0: judged at max_length (9 generated tokens).
  // worst is -1.8 / 2^2 = -0.45.
  const BeamHypotheses never = filled(EarlyStopping::kNever, 2.0);
  EXPECT_FALSE(never.IsDone(-36.0, 5));  // -36 / 81 = -0.444 > -0.45
  EXPECT_TRUE(never.IsDone(-36.5, 5));   // -0.4506
  // The heuristic would have judged at cur_len: -36 / 16 is far below.
  EXPECT_TRUE(filled(EarlyStopping::kHeuristic, 2.0).IsDone(-36.0, 5));

  // "never", length_penalty <= 0: judged at cur_len like the heuristic.
  const BeamHypotheses never_negative = filled(EarlyStopping::kNever, -1.0);
  // worst: -1.8 * 2 = -3.6; best -0.9 * 4 = -3.6 at cur_len 5.
  EXPECT_TRUE(never_negative.IsDone(-0.9, 5));
  EXPECT_FALSE(never_negative.IsDone(-0.8, 5));
}

GenerationConfig TwoBeams() {
  GenerationConfig config;
  config.num_beams = 2;
  config.max_length = 10;
  config.decoder_start_token_id = 0;
  config.eos_token_ids = {3};
  config.pad_token_id = 4;
  return config;
}

at::Tensor Rows(const std::vector<std::vector<float>>& rows) {
  std::vector<float> flat;
  for (const auto& row : rows) flat.insert(flat.end(), row.begin(), row.end());
  return at::tensor(flat, at::kFloat).reshape({static_cast<int64_t>(rows.size()), -1});
}

// The candidates against at::topk over the same (beams x vocab) scores, rows
// taken out of order and one row twice; then ties, which come in index
// order, and NaN, never taken.
TEST(TopCandidatesTest, MatchesTorchTopkOverTheBeamsScores) {
  at::Generator generator = at::detail::createCPUGenerator(7);
  const int64_t vocab = 5003;
  const at::Tensor scores = at::randn({5, vocab}, generator);
  const std::vector<int64_t> beam_rows = {3, 0, 4, 0};
  const std::vector<float> beam_scores = {-1.5f, 0.25f, -3.0f, -0.5f};
  for (const int64_t count : {1, 8, 12, 100}) {
    const std::vector<Candidate> top =
        TopCandidates(scores.data_ptr<float>(), vocab, beam_rows, beam_scores, count);
    const at::Tensor expanded = scores.index_select(0, at::tensor(beam_rows, at::kLong)) +
                                at::tensor(beam_scores, at::kFloat).unsqueeze(1);
    const auto [values, indices] = at::topk(expanded.reshape({-1}), count);
    ASSERT_EQ(static_cast<int64_t>(top.size()), count);
    for (int64_t i = 0; i < count; ++i) {
      EXPECT_EQ(top[i].score, values[i].item<float>()) << "rank " << i;
      EXPECT_EQ(top[i].index, indices[i].item<int64_t>()) << "rank " << i;
    }
  }
  const std::vector<float> tied = {1.0f, NAN, 3.0f, 3.0f, 1.0f, 3.0f, 2.0f};
  const std::vector<Candidate> top = TopCandidates(tied.data(), 7, {0}, {0.0f}, 5);
  std::vector<int64_t> order;
  for (const Candidate& c : top) order.push_back(c.index);
  EXPECT_EQ(order, (std::vector<int64_t>{2, 3, 5, 6, 0}));
  EXPECT_EQ(TopCandidates(tied.data(), 7, {0}, {0.0f}, 9).size(), 6u);
}

TEST(BeamSearchTest, FirstStepExpandsOneRowAndEosOnlyCountsInTheTopNumBeams) {
  BeamSearch search(TwoBeams());
  EXPECT_EQ(search.input_rows(), 1);
  // Step 1: candidates eos (-0.5), 1 (-1), 2 (-1.1) from the one real beam.
  auto sources = search.Advance(Rows({{-5.0f, -1.0f, -1.1f, -0.5f, -3.0f}}));
  ASSERT_TRUE(sources.ok()) << sources.status();
  EXPECT_THAT(*sources, ElementsAre(0, 0));
  EXPECT_EQ(search.input_rows(), 2);
  EXPECT_THAT(search.input_row_tokens(0), ElementsAre(0, 1));
  EXPECT_THAT(search.input_row_tokens(1), ElementsAre(0, 2));
  EXPECT_FALSE(search.done());  // one hypothesis ([0] + eos, -0.5) of two

  // Step 2, running scores -1 and -1.1. Totals, best first:
  //   beam 0 eos -1.0 (rank 0: a hypothesis), beam 0 token 1 -1.2,
  //   beam 1 eos -1.5 (rank 2 >= num_beams: ignored), beam 1 token 2 -2.1.
  sources = search.Advance(
      Rows({{-4.0f, -0.2f, -3.0f, 0.0f, -6.0f}, {-4.0f, -4.0f, -1.0f, -0.4f, -4.0f}}));
  ASSERT_TRUE(sources.ok()) << sources.status();
  EXPECT_THAT(*sources, ElementsAre(0, 1));
  EXPECT_THAT(search.input_row_tokens(0), ElementsAre(0, 1, 1));
  EXPECT_THAT(search.input_row_tokens(1), ElementsAre(0, 2, 2));
  EXPECT_EQ(search.cur_len(), 3);
  // Two hypotheses, worst -0.5 >= best candidate -1.0 / (3 - 1): done.
  EXPECT_TRUE(search.done());

  const std::vector<BeamHypothesis> best = search.Finalize();
  ASSERT_EQ(best.size(), 1u);
  // [0, 1] + eos (-1.0 / 2) ties [0] + eos (-0.5 / 1); the later one wins.
  EXPECT_THAT(best[0].tokens, ElementsAre(0, 1));
  EXPECT_TRUE(best[0].ended_with_eos);
  EXPECT_DOUBLE_EQ(best[0].score, -0.5);
}

TEST(BeamSearchTest, FinalizeAddsRunningBeamsWhenStoppedByLength) {
  GenerationConfig config = TwoBeams();
  config.num_return_sequences = 2;
  BeamSearch search(config);
  ASSERT_TRUE(search.Advance(Rows({{-9.0f, -1.0f, -2.0f, -9.0f, -9.0f}})).ok());
  ASSERT_TRUE(search
                  .Advance(Rows(
                      {{-9.0f, -0.5f, -3.0f, -9.0f, -9.0f}, {-9.0f, -9.0f, -0.25f, -9.0f, -9.0f}}))
                  .ok());
  // Beams: [0,1,1] at -1.5 and [0,2,2] at -2.25; 2 generated tokens each.
  const std::vector<BeamHypothesis> best = search.Finalize();
  ASSERT_EQ(best.size(), 2u);
  EXPECT_THAT(best[0].tokens, ElementsAre(0, 1, 1));
  EXPECT_DOUBLE_EQ(best[0].score, -0.75);
  EXPECT_FALSE(best[0].ended_with_eos);
  EXPECT_THAT(best[1].tokens, ElementsAre(0, 2, 2));
  EXPECT_DOUBLE_EQ(best[1].score, -1.125);
}

TEST(BeamSearchTest, TakesOneMoreCandidatePerBeamForEachExtraEosId) {
  // Two eos ids: 3 * num_beams candidates, so three eos ids among the top
  // four cannot starve the beams.
  GenerationConfig config = TwoBeams();
  config.eos_token_ids = {3, 4};
  BeamSearch search(config);
  ASSERT_TRUE(search.Advance(Rows({{-9.0f, -1.0f, -2.0f, -9.0f, -9.0f}})).ok());
  const auto sources = search.Advance(
      Rows({{-9.0f, -8.0f, -9.0f, -0.1f, -0.2f}, {-9.0f, -9.0f, -7.0f, -0.3f, -9.0f}}));
  ASSERT_TRUE(sources.ok()) << sources.status();
  // Best: eos 3 (beam 0), eos 4 (beam 0), eos 3 (beam 1, rank 2: ignored),
  // then beam 1 token 2 (-9) and beam 0 token 1 (-9) fill the beams.
  EXPECT_EQ(search.input_rows(), 2);
  // Hypotheses -1.1 / 2 and -1.2 / 2; the best candidate (-1.1) could still
  // reach -0.55 > -0.6, so the heuristic goes on.
  EXPECT_FALSE(search.done());
  const std::vector<BeamHypothesis> best = search.Finalize();
  ASSERT_EQ(best.size(), 1u);
  EXPECT_THAT(best[0].tokens, ElementsAre(0, 1));
  EXPECT_TRUE(best[0].ended_with_eos);
  EXPECT_NEAR(best[0].score, -0.55, 1e-6);
}

TEST(BeamSearchTest, RefusesAVocabularyTooSmallForTheCandidates) {
  BeamSearch search(TwoBeams());
  const auto sources = search.Advance(Rows({{-1.0f}}));
  EXPECT_EQ(sources.status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace docsparse
