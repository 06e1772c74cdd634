// The summarizer's batch runner and its metered stepper with the real tiny
// BART of tests/fixtures/seq2seq: a batch's requests decode together with
// their own settings, each gets its own tokens and FLOP share, and a request
// whose client leaves or whose deadline passes stops alone.
#include "server/summarizer_batch_runner.h"

#include <gtest/gtest.h>

#include <atomic>
#include <map>

#include "model/seq2seq/generator.h"
#include "model/text/tokenizer_loader.h"
#include "server/metered_decoder_stepper.h"
#include "tests/common/fixture_paths.h"

namespace docsparse {
namespace {

class SummarizerBatchRunnerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    const std::string dir = testing::FixturePath("seq2seq/bart");
    auto model = Seq2SeqModel::Create(dir);
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = *std::move(model);
    auto tokenizer = LoadTokenizer(dir);
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
    auto generation = LoadGenerationConfig(dir);
    ASSERT_TRUE(generation.ok()) << generation.status();
    generation_ = *generation;
  }

  GenerationConfig Config(int beams, int max_length, int min_length = 0) const {
    GenerationOverrides overrides;
    overrides.num_beams = beams;
    overrides.max_length = max_length;
    overrides.min_length = min_length;
    auto config = ApplyGenerationOverrides(generation_, overrides, 512);
    EXPECT_TRUE(config.ok()) << config.status();
    return *config;
  }

  // A job summarizing `text`; its outcome lands in `outcomes[name]`.
  std::unique_ptr<EncodeJob> Job(const std::string& name, const std::string& text,
                                 GenerationConfig config,
                                 std::map<std::string, absl::Status>* outcomes,
                                 std::map<std::string, std::vector<int32_t>>* tokens) {
    auto job = std::make_unique<EncodeJob>(model_->encoder().shape());
    job->pending.key = BatchKey{"bart", "summarize_abstractive", "dense"};
    job->sequences = {tokenizer_->Frame(tokenizer_->Encode(text), 512)};
    job->generation = std::make_unique<GenerationJob>();
    job->generation->config = std::move(config);
    job->generation->request_id = name;
    job->done = [name, outcomes, tokens](EncodeJob& job, absl::StatusOr<EncodeResult> result) {
      (*outcomes)[name] = result.status();
      (*tokens)[name] = job.generation->tokens;
      if (result.ok()) {
        EXPECT_GT(job.generation->decoder_flops, 0) << name;
        EXPECT_GT(job.cost.input_tokens(), 0) << name;
        EXPECT_GE(job.generation->first_token, result->started) << name;
        EXPECT_LE(job.generation->first_token, result->finished) << name;
      }
    };
    return job;
  }

  std::unique_ptr<Seq2SeqModel> model_;
  std::unique_ptr<Tokenizer> tokenizer_;
  GenerationConfig generation_;
};

TEST_F(SummarizerBatchRunnerTest, RequestsDecodeTogetherAndStopAlone) {
  std::atomic<int> steps{0};
  std::map<GenerationStop, int> stops;
  SummarizerHooks hooks;
  hooks.on_decode_step = [&steps](double seconds) {
    EXPECT_GE(seconds, 0);
    ++steps;
  };
  hooks.on_generation_stopped = [&stops](GenerationStop stop) { ++stops[stop]; };
  SummarizerBatchRunner runner(*model_, hooks);

  std::map<std::string, absl::Status> outcomes;
  std::map<std::string, std::vector<int32_t>> tokens;
  std::vector<std::unique_ptr<EncodeJob>> batch;
  batch.push_back(
      Job("greedy", "The committee met on Tuesday.", Config(1, 30, 30), &outcomes, &tokens));
  batch.push_back(
      Job("beams", "Roads and parks were discussed at length.", Config(4, 20), &outcomes, &tokens));
  // Leaves after its fifth token, as a client that went away mid-stream.
  auto cancelled =
      Job("cancelled", "A vote is planned for March.", Config(1, 60, 60), &outcomes, &tokens);
  auto chosen = std::make_shared<int>(0);
  cancelled->generation->on_token = [chosen](int32_t) { ++*chosen; };
  cancelled->is_cancelled = [chosen] { return *chosen >= 5; };
  batch.push_back(std::move(cancelled));
  auto late = Job("late", "Nobody waits for this one.", Config(1, 60, 60), &outcomes, &tokens);
  late->pending.deadline = BatchClock::now();  // already passed
  batch.push_back(std::move(late));
  runner.Run(std::move(batch));

  ASSERT_EQ(outcomes.size(), 4u);
  EXPECT_TRUE(outcomes["greedy"].ok()) << outcomes["greedy"];
  EXPECT_EQ(tokens["greedy"].size(), 29u);  // min_length = max_length: no early eos
  EXPECT_TRUE(outcomes["beams"].ok()) << outcomes["beams"];
  EXPECT_FALSE(tokens["beams"].empty());
  EXPECT_EQ(outcomes["cancelled"].code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(tokens["cancelled"].size(), 5u);
  EXPECT_EQ(outcomes["late"].code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(stops[GenerationStop::kClientCancelled], 1);
  EXPECT_EQ(stops[GenerationStop::kDeadline], 1);
  // Decoding ran as long as the longest request, once for all of them.
  EXPECT_EQ(steps.load(), 29);
}

// A batch nobody waits for any more stops in the encoder, before a single
// decoding step, and each request hears its own reason.
TEST_F(SummarizerBatchRunnerTest, ABatchWhoseClientsAllLeftStopsInTheEncoder) {
  int steps = 0;
  std::map<GenerationStop, int> stops;
  SummarizerHooks hooks;
  hooks.on_decode_step = [&steps](double) { ++steps; };
  hooks.on_generation_stopped = [&stops](GenerationStop stop) { ++stops[stop]; };
  SummarizerBatchRunner runner(*model_, hooks);
  std::map<std::string, absl::Status> outcomes;
  std::map<std::string, std::vector<int32_t>> tokens;
  std::vector<std::unique_ptr<EncodeJob>> batch;
  auto gone = Job("gone", "The committee met on Tuesday.", Config(1, 30), &outcomes, &tokens);
  gone->is_cancelled = [] { return true; };
  batch.push_back(std::move(gone));
  auto late = Job("late", "Nobody waits for this one.", Config(1, 30), &outcomes, &tokens);
  late->pending.deadline = BatchClock::now();
  batch.push_back(std::move(late));
  runner.Run(std::move(batch));

  EXPECT_EQ(outcomes["gone"].code(), absl::StatusCode::kCancelled) << outcomes["gone"];
  EXPECT_EQ(outcomes["late"].code(), absl::StatusCode::kDeadlineExceeded) << outcomes["late"];
  EXPECT_TRUE(tokens["gone"].empty());
  EXPECT_EQ(steps, 0);
  EXPECT_EQ(stops[GenerationStop::kClientCancelled], 1);
  EXPECT_EQ(stops[GenerationStop::kDeadline], 1);
}

TEST_F(SummarizerBatchRunnerTest, AloneOrBatchedTheTokensAreTheSame) {
  const std::vector<std::string> texts = {"The committee met on Tuesday to review the budget.",
                                          "Roads", "A vote on the new park is planned for March."};
  std::map<std::string, absl::Status> outcomes;
  std::map<std::string, std::vector<int32_t>> alone, together;
  SummarizerBatchRunner runner(*model_, {});
  std::vector<std::unique_ptr<EncodeJob>> batch;
  for (size_t i = 0; i < texts.size(); ++i) {
    const int beams = i == 1 ? 1 : 3;
    std::vector<std::unique_ptr<EncodeJob>> single;
    single.push_back(Job(std::to_string(i), texts[i], Config(beams, 24), &outcomes, &alone));
    runner.Run(std::move(single));
    batch.push_back(Job(std::to_string(i), texts[i], Config(beams, 24), &outcomes, &together));
  }
  runner.Run(std::move(batch));
  for (const auto& [name, status] : outcomes) EXPECT_TRUE(status.ok()) << name << ": " << status;
  EXPECT_EQ(alone, together);
}

TEST_F(SummarizerBatchRunnerTest, JobWithoutGenerationIsAnInternalError) {
  SummarizerBatchRunner runner(*model_, {});
  auto job = std::make_unique<EncodeJob>(model_->encoder().shape());
  job->sequences = {{0, 100, 2}};
  absl::Status outcome;
  job->done = [&outcome](EncodeJob&, absl::StatusOr<EncodeResult> result) {
    outcome = result.status();
  };
  std::vector<std::unique_ptr<EncodeJob>> batch;
  batch.push_back(std::move(job));
  runner.Run(std::move(batch));
  EXPECT_EQ(outcome.code(), absl::StatusCode::kInternal);
}

// Rows follow Reorder; each step's FLOPs are split over the rows it ran,
// so the requests' shares add up to the stepper's total.
TEST_F(SummarizerBatchRunnerTest, MeteredStepperSplitsFlopsByRowOwner) {
  EncoderBatch encoder_batch;
  encoder_batch.sequences = {tokenizer_->Frame(tokenizer_->Encode("one document"), 512),
                             tokenizer_->Frame(tokenizer_->Encode("and another one"), 512)};
  auto encoding = model_->Encode(encoder_batch, {});
  ASSERT_TRUE(encoding.ok()) << encoding.status();
  auto stepper = model_->StartDecoding(*encoding, 1);
  ASSERT_TRUE(stepper.ok()) << stepper.status();
  int steps = 0;
  const std::vector<double> rows = {static_cast<double>(encoding->valid_rows[0]),
                                    static_cast<double>(encoding->valid_rows[1])};
  ASSERT_NE(rows[0], rows[1]);
  MeteredDecoderStepper metered(
      **stepper, {0, 1}, 2, [&steps](double) { ++steps; }, rows);
  // Before any step: the cross-attention projections, by encoder rows.
  EXPECT_NEAR(metered.request_flops(0) + metered.request_flops(1), metered.flops(),
              1e-9 * metered.flops());
  EXPECT_NEAR(metered.request_flops(0) / metered.request_flops(1), rows[0] / rows[1], 1e-9);
  const double setup = metered.flops();
  const at::Tensor start = at::full({2}, generation_.decoder_start_token_id, at::kLong);
  ASSERT_TRUE(metered.Step(start).ok());
  // The rows of a step share its FLOPs evenly.
  EXPECT_NEAR(metered.request_flops(0) - setup * rows[0] / (rows[0] + rows[1]),
              metered.request_flops(1) - setup * rows[1] / (rows[0] + rows[1]),
              1e-9 * metered.flops());
  ASSERT_TRUE(metered.first_step(0).has_value());
  // Request 0 leaves; request 1 goes on as two beams.
  ASSERT_TRUE(metered.Reorder(at::tensor({int64_t{1}, int64_t{1}})).ok());
  const double first_share = metered.request_flops(0);
  ASSERT_TRUE(metered.Step(at::full({2}, int64_t{100}, at::kLong)).ok());
  EXPECT_DOUBLE_EQ(metered.request_flops(0), first_share);
  EXPECT_GT(metered.request_flops(1), first_share);
  EXPECT_NEAR(metered.request_flops(0) + metered.request_flops(1), metered.flops(),
              1e-9 * metered.flops());
  EXPECT_EQ(steps, 2);
  EXPECT_FALSE(metered.Reorder(at::tensor({int64_t{5}})).ok());
}

}  // namespace
}  // namespace docsparse
