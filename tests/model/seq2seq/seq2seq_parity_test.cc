// BART, Pegasus, LSG-BART and LSG-Pegasus encoder-decoders against Hugging
// Face transformers 4.36 (and, for the LSG models, the reference
// modeling_lsg_bart.py / modeling_lsg_pegasus.py):
// encoder states, teacher-forced logits, and greedy decoding through the
// DecoderStepper. Fixtures: tests/fixtures/seq2seq/README.md.
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/seq2seq/seq2seq_model.h"
#include "tests/model/seq2seq/seq2seq_fixture.h"

namespace docsparse {
namespace {

using json = nlohmann::json;
using testing::BatchOf;
using testing::IdsTensor;
using testing::LoadSeq2SeqFixture;
using testing::MaxAbsDiff;
using testing::Seq2SeqFixture;

constexpr double kTolerance = 1e-4;

class Seq2SeqParityTest : public ::testing::TestWithParam<std::string> {};

// Every real row of every sequence (LSG: the global rows too) against HF's
// padded batch; the LSG models also against each item run alone.
TEST_P(Seq2SeqParityTest, EncoderStatesMatchHuggingFace) {
  const Seq2SeqFixture fixture = LoadSeq2SeqFixture(GetParam());
  ASSERT_NE(fixture.model, nullptr);
  c10::InferenceMode inference_mode;
  double worst = 0;
  for (const json& c : fixture.cases["encoder_cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    absl::StatusOr<Seq2SeqEncoding> encoding = fixture.model->Encode(BatchOf(c["input_ids"]), {});
    ASSERT_TRUE(encoding.ok()) << encoding.status();
    const at::Tensor expected = fixture.Expected(c["encoder"]);
    ASSERT_EQ(encoding->hidden.size(0), expected.size(0));
    for (int64_t b = 0; b < expected.size(0); ++b) {
      const int64_t rows = encoding->valid_rows[b];
      ASSERT_EQ(rows, fixture.model->encoder().global_rows() +
                          static_cast<int64_t>(c["input_ids"][b].size()));
      const double diff =
          MaxAbsDiff(encoding->hidden[b].narrow(0, 0, rows), expected[b].narrow(0, 0, rows));
      EXPECT_LE(diff, kTolerance) << "item " << b;
      worst = std::max(worst, diff);
      if (c.contains("singles")) {
        const at::Tensor alone = fixture.Expected(c["singles"][b]["encoder"]);
        EXPECT_LE(MaxAbsDiff(encoding->hidden[b].narrow(0, 0, rows), alone[0]), kTolerance)
            << "item " << b << " alone";
      }
    }
  }
  RecordProperty("max_abs_diff", std::to_string(worst));
}

TEST_P(Seq2SeqParityTest, TeacherForcedLogitsMatchHuggingFace) {
  const Seq2SeqFixture fixture = LoadSeq2SeqFixture(GetParam());
  ASSERT_NE(fixture.model, nullptr);
  c10::InferenceMode inference_mode;
  for (const json& c : fixture.cases["encoder_cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    absl::StatusOr<Seq2SeqEncoding> encoding = fixture.model->Encode(BatchOf(c["input_ids"]), {});
    ASSERT_TRUE(encoding.ok()) << encoding.status();
    absl::StatusOr<at::Tensor> logits =
        fixture.model->DecoderLogits(*encoding, IdsTensor(c["decoder_input_ids"]));
    ASSERT_TRUE(logits.ok()) << logits.status();
    const at::Tensor expected = fixture.Expected(c["logits"]);
    ASSERT_EQ(logits->sizes(), expected.sizes());
    // The fixture's own hint: 1e-4, or more where transformers' fp32
    // logits are themselves further from fp64 (led: see its README).
    EXPECT_LE(MaxAbsDiff(*logits, expected), fixture.cases["tolerance_hint"].get<double>());
  }
}

// HF's "greedy" generate case, replayed through the stepper with the only
// processors it applies (forced BOS after the start token, forced EOS at
// max_length - 1, and the finished-row padding): every input alone and the
// padded batch must give HF's token ids. Beam search and the other
// processors are model/seq2seq/generator.h's, tested there.
TEST_P(Seq2SeqParityTest, GreedyDecodingMatchesHuggingFace) {
  const Seq2SeqFixture fixture = LoadSeq2SeqFixture(GetParam());
  ASSERT_NE(fixture.model, nullptr);
  c10::InferenceMode inference_mode;
  const json* greedy = nullptr;
  for (const json& c : fixture.cases["generate_cases"]) {
    if (c["name"] == "greedy") greedy = &c;
  }
  ASSERT_NE(greedy, nullptr);
  const json& params = (*greedy)["params"];
  const int64_t max_length = params["max_length"];
  const int64_t eos = params["eos_token_id"];
  const int64_t pad = params["pad_token_id"];
  for (const json& run : (*greedy)["runs"]) {
    const int64_t batch = static_cast<int64_t>(run["input_ids"].size());
    SCOPED_TRACE("batch of " + std::to_string(batch));
    absl::StatusOr<Seq2SeqEncoding> encoding = fixture.model->Encode(BatchOf(run["input_ids"]), {});
    ASSERT_TRUE(encoding.ok()) << encoding.status();
    absl::StatusOr<std::unique_ptr<DecoderStepper>> stepper =
        fixture.model->StartDecoding(*encoding, 1);
    ASSERT_TRUE(stepper.ok()) << stepper.status();
    std::vector<std::vector<int64_t>> sequences(
        batch, std::vector<int64_t>{params["decoder_start_token_id"].get<int64_t>()});
    std::vector<bool> done(batch, false);
    for (int64_t length = 1; length < max_length; ++length) {
      std::vector<int64_t> last;
      for (const auto& s : sequences) last.push_back(s.back());
      absl::StatusOr<at::Tensor> logits = (*stepper)->Step(at::tensor(last, at::kLong));
      ASSERT_TRUE(logits.ok()) << logits.status();
      for (int64_t b = 0; b < batch; ++b) {
        int64_t next = (*logits)[b].argmax().item<int64_t>();
        if (length == 1 && !params["forced_bos_token_id"].is_null()) {
          next = params["forced_bos_token_id"];
        }
        if (length == max_length - 1 && !params["forced_eos_token_id"].is_null()) {
          next = params["forced_eos_token_id"];
        }
        if (done[b]) next = pad;
        sequences[b].push_back(next);
        done[b] = done[b] || next == eos;
      }
      if (std::all_of(done.begin(), done.end(), [](bool d) { return d; })) break;
    }
    for (int64_t b = 0; b < batch; ++b) {
      EXPECT_EQ(sequences[b], run["sequences"][b].get<std::vector<int64_t>>()) << "item " << b;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Models, Seq2SeqParityTest,
                         ::testing::Values("bart", "pegasus", "lsg_bart", "lsg_pegasus", "led",
                                           "bigbird_pegasus"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace docsparse
