// The KV-cached decoder behind DecoderStepper: stepping one token at a time
// gives the teacher-forced (uncached, all positions at once) logits; Reorder
// carries each row's cache to its new place; misuse is an error, not a crash.
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/seq2seq/seq2seq_model.h"
#include "tests/model/seq2seq/seq2seq_fixture.h"

namespace docsparse {
namespace {

using testing::LoadSeq2SeqFixture;
using testing::MaxAbsDiff;
using testing::Seq2SeqFixture;

constexpr double kTolerance = 1e-4;

// Two documents of different lengths (the second padded in the batch).
EncoderBatch TwoDocuments(const Seq2SeqFixture& fixture) {
  EncoderBatch batch;
  for (int i : {2, 1}) {
    batch.sequences.push_back(fixture.cases["inputs"][i]["input_ids"].get<std::vector<int32_t>>());
  }
  return batch;
}

// [rows, steps] decoder inputs: the start token, then seeded random ids.
at::Tensor DecoderInputs(const Seq2SeqFixture& fixture, int64_t rows, int64_t steps,
                         uint64_t seed) {
  at::Generator generator = at::detail::createCPUGenerator(seed);
  at::Tensor ids = at::randint(4, fixture.model->config().vocab_size, {rows, steps}, generator,
                               at::TensorOptions().dtype(at::kLong));
  ids.select(1, 0).fill_(fixture.cases["special_tokens"]["decoder_start"].get<int64_t>());
  return ids;
}

class Seq2SeqDecoderTest : public ::testing::TestWithParam<std::string> {};

TEST_P(Seq2SeqDecoderTest, CachedStepsEqualTheUncachedForward) {
  const Seq2SeqFixture fixture = LoadSeq2SeqFixture(GetParam());
  ASSERT_NE(fixture.model, nullptr);
  c10::InferenceMode inference_mode;
  absl::StatusOr<Seq2SeqEncoding> encoding = fixture.model->Encode(TwoDocuments(fixture), {});
  ASSERT_TRUE(encoding.ok()) << encoding.status();
  const at::Tensor ids = DecoderInputs(fixture, 2, 12, 7);
  absl::StatusOr<at::Tensor> full = fixture.model->DecoderLogits(*encoding, ids);
  ASSERT_TRUE(full.ok()) << full.status();

  absl::StatusOr<std::unique_ptr<DecoderStepper>> stepper =
      fixture.model->StartDecoding(*encoding, 1);
  ASSERT_TRUE(stepper.ok()) << stepper.status();
  ASSERT_EQ((*stepper)->rows(), 2);
  double flops = (*stepper)->flops();
  EXPECT_GT(flops, 0);  // the cross-attention projections
  for (int64_t t = 0; t < ids.size(1); ++t) {
    absl::StatusOr<at::Tensor> logits = (*stepper)->Step(ids.select(1, t));
    ASSERT_TRUE(logits.ok()) << logits.status();
    ASSERT_EQ(logits->sizes(), (std::vector<int64_t>{2, fixture.model->config().vocab_size}));
    EXPECT_EQ(logits->scalar_type(), at::kFloat);
    EXPECT_LE(MaxAbsDiff(*logits, full->select(1, t)), kTolerance) << "step " << t;
    EXPECT_GT((*stepper)->flops(), flops);
    flops = (*stepper)->flops();
  }
}

// Rows are sequence-major: with 3 rows per sequence, rows 0-2 decode
// document 0 and rows 3-5 document 1. Each row gets its own token history of
// `before` steps; after Reorder(source), every new row must continue for
// `after` steps exactly as its source row's history would, checked against
// fresh teacher-forced forwards.
void ExpectReorderedRowsContinueTheirSources(const std::string& model, int64_t before,
                                             int64_t after, const std::vector<int64_t>& source,
                                             uint64_t seed) {
  const Seq2SeqFixture fixture = LoadSeq2SeqFixture(model);
  ASSERT_NE(fixture.model, nullptr);
  c10::InferenceMode inference_mode;
  absl::StatusOr<Seq2SeqEncoding> encoding = fixture.model->Encode(TwoDocuments(fixture), {});
  ASSERT_TRUE(encoding.ok()) << encoding.status();
  constexpr int kRowsPerSequence = 3;
  const at::Tensor history = DecoderInputs(fixture, 6, before, seed);
  absl::StatusOr<std::unique_ptr<DecoderStepper>> stepper =
      fixture.model->StartDecoding(*encoding, kRowsPerSequence);
  ASSERT_TRUE(stepper.ok()) << stepper.status();
  ASSERT_EQ((*stepper)->rows(), 6);
  for (int64_t t = 0; t < before; ++t) {
    ASSERT_TRUE((*stepper)->Step(history.select(1, t)).ok());
  }
  ASSERT_TRUE((*stepper)->Reorder(at::tensor(source, at::kLong)).ok());
  const auto rows = static_cast<int64_t>(source.size());
  ASSERT_EQ((*stepper)->rows(), rows);
  const at::Tensor continuation = DecoderInputs(fixture, rows, after, seed + 1);
  std::vector<at::Tensor> stepped;
  for (int64_t t = 0; t < after; ++t) {
    absl::StatusOr<at::Tensor> logits = (*stepper)->Step(continuation.select(1, t));
    ASSERT_TRUE(logits.ok()) << logits.status();
    stepped.push_back(*logits);
  }
  for (int64_t r = 0; r < rows; ++r) {
    SCOPED_TRACE("new row " + std::to_string(r));
    const int64_t document = source[r] / kRowsPerSequence;
    Seq2SeqEncoding one;
    one.hidden = encoding->hidden.narrow(0, document, 1);
    one.valid_rows = {encoding->valid_rows[document]};
    one.lengths = {encoding->lengths[document]};
    const at::Tensor ids = at::cat({history[source[r]], continuation[r]}).unsqueeze(0);
    absl::StatusOr<at::Tensor> full = fixture.model->DecoderLogits(one, ids);
    ASSERT_TRUE(full.ok()) << full.status();
    for (int64_t t = 0; t < after; ++t) {
      EXPECT_LE(MaxAbsDiff(stepped[t][r], (*full)[0][before + t]), kTolerance) << "step " << t;
    }
  }
}

// New rows: document 0 keeps rows 2, 2, 0; document 1 keeps row 5 then row
// 3; rows 1 and 4 leave (the cache is rebuilt: the row count changes).
TEST_P(Seq2SeqDecoderTest, ReorderMovesEachRowsCache) {
  ExpectReorderedRowsContinueTheirSources(GetParam(), 5, 4, {2, 2, 0, 5, 3}, 11);
}

// A Reorder that keeps the row count moves the cache rows in place: a
// cycle (rows 0, 1, 2 take rows 1, 2, 0), a repeat (row 4 takes row 3) and
// rows that stay. The history is long enough that the cache's buffers have
// regrown (they start at 32 positions) before the reorder, and again after.
TEST_P(Seq2SeqDecoderTest, ReorderInPlaceAcrossCacheRegrowth) {
  ExpectReorderedRowsContinueTheirSources(GetParam(), 40, 30, {1, 2, 0, 3, 3, 5}, 17);
}

TEST_P(Seq2SeqDecoderTest, MisuseIsAnError) {
  const Seq2SeqFixture fixture = LoadSeq2SeqFixture(GetParam());
  ASSERT_NE(fixture.model, nullptr);
  c10::InferenceMode inference_mode;
  absl::StatusOr<Seq2SeqEncoding> encoding = fixture.model->Encode(TwoDocuments(fixture), {});
  ASSERT_TRUE(encoding.ok()) << encoding.status();
  EXPECT_EQ(fixture.model->StartDecoding(*encoding, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  absl::StatusOr<std::unique_ptr<DecoderStepper>> stepper =
      fixture.model->StartDecoding(*encoding, 2);
  ASSERT_TRUE(stepper.ok()) << stepper.status();
  DecoderStepper& s = **stepper;
  // Wrong row count, ids outside the vocabulary, rows out of range.
  EXPECT_EQ(s.Step(at::zeros({3}, at::kLong)).status().code(), absl::StatusCode::kInvalidArgument);
  const absl::Status vocab =
      s.Step(at::full({4}, fixture.model->config().vocab_size, at::kLong)).status();
  EXPECT_EQ(vocab.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(vocab.message().find("outside the vocabulary"), std::string::npos) << vocab;
  const absl::Status reorder = s.Reorder(at::tensor(std::vector<int64_t>{0, 4}, at::kLong));
  EXPECT_EQ(reorder.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(reorder.message().find("source[1]"), std::string::npos) << reorder;
  // The failed calls changed nothing: stepping still works.
  for (int64_t t = 0; t < 3; ++t) {
    ASSERT_TRUE(s.Step(at::full({4}, 5, at::kLong)).ok()) << "step " << t;
  }
  // Positions end with the position table: max_decoder_length() tokens
  // decode, one more is refused (the same check guards every Step).
  const int64_t limit = fixture.model->max_decoder_length();
  Seq2SeqEncoding first;
  first.hidden = encoding->hidden.narrow(0, 0, 1);
  first.valid_rows = {encoding->valid_rows[0]};
  first.lengths = {encoding->lengths[0]};
  EXPECT_TRUE(fixture.model->DecoderLogits(first, at::full({1, limit}, 5, at::kLong)).ok());
  const absl::Status beyond =
      fixture.model->DecoderLogits(first, at::full({1, limit + 1}, 5, at::kLong)).status();
  EXPECT_EQ(beyond.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(beyond.message().find("limit"), std::string::npos) << beyond;
  // Every row may leave.
  EXPECT_TRUE(s.Reorder(at::empty({0}, at::kLong)).ok());
  EXPECT_EQ(s.rows(), 0);
}

INSTANTIATE_TEST_SUITE_P(Models, Seq2SeqDecoderTest,
                         ::testing::Values("bart", "pegasus", "lsg_bart", "lsg_pegasus"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace docsparse
