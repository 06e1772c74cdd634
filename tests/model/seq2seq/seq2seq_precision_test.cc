// Seq2SeqModel's precision: fp32 (the server's on the CPU), bf16 (the GPU's
// automatic choice, here on LibTorch's CPU ops, the reference the GPU test
// compares with) and what is refused.
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <memory>
#include <string>

#include "model/checkpoint/bart_config.h"
#include "model/seq2seq/seq2seq_model.h"
#include "tests/model/seq2seq/seq2seq_fixture.h"

namespace docsparse {
namespace {

using testing::BatchOf;

absl::StatusOr<std::unique_ptr<Seq2SeqModel>> Load(const std::string& dir, Precision precision) {
  absl::StatusOr<BartConfig> config = LoadBartConfig(dir + "/config.json");
  if (!config.ok()) return config.status();
  return Seq2SeqModel::Create(dir, *config, nullptr, at::kCPU, precision);
}

TEST(Seq2SeqPrecisionTest, Int8IsRefusedNamingThePrecision) {
  absl::StatusOr<std::unique_ptr<Seq2SeqModel>> model =
      Load(testing::FixturePath("seq2seq/bart"), Precision::kInt8);
  ASSERT_FALSE(model.ok());
  EXPECT_EQ(model.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(model.status().message().find("precision: \"int8\""), std::string::npos)
      << model.status();
}

TEST(Seq2SeqPrecisionTest, AutoIsFp32OnTheCpu) {
  absl::StatusOr<std::unique_ptr<Seq2SeqModel>> model =
      Load(testing::FixturePath("seq2seq/bart"), Precision::kAuto);
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_EQ((*model)->precision(), Precision::kFp32);
}

TEST(Seq2SeqPrecisionTest, Bf16LogitsStayNearFp32) {
  for (const char* name : {"bart", "lsg_bart"}) {
    SCOPED_TRACE(name);
    const testing::Seq2SeqFixture fp32 = testing::LoadSeq2SeqFixture(name);
    ASSERT_NE(fp32.model, nullptr);
    absl::StatusOr<std::unique_ptr<Seq2SeqModel>> bf16 = Load(fp32.dir, Precision::kBf16);
    ASSERT_TRUE(bf16.ok()) << bf16.status();
    EXPECT_EQ((*bf16)->precision(), Precision::kBf16);
    c10::InferenceMode inference_mode;
    at::manual_seed(11);
    const EncoderBatch batch = BatchOf(fp32.cases["generate_cases"][0]["runs"].back()["input_ids"]);
    const at::Tensor ids =
        at::randint(4, 50, {static_cast<int64_t>(batch.sequences.size()), 5}, at::kLong);
    const auto logits = [&](const Seq2SeqModel& model) {
      absl::StatusOr<Seq2SeqEncoding> encoding = model.Encode(batch, {});
      EXPECT_TRUE(encoding.ok()) << encoding.status();
      absl::StatusOr<at::Tensor> out = model.DecoderLogits(*encoding, ids);
      EXPECT_TRUE(out.ok()) << out.status();
      return out.ok() ? out->to(at::kFloat) : at::Tensor();
    };
    const at::Tensor want = logits(*fp32.model);
    const at::Tensor got = logits(**bf16);
    ASSERT_TRUE(want.defined() && got.defined());
    EXPECT_EQ(got.sizes(), want.sizes());
    // bf16 keeps 8 bits, and these tiny random models amplify it. Measured
    // as the largest total variation between the fp32 and bf16 next-token
    // distributions: 0.13 (bart) and 0.20 (lsg_bart) here, where
    // transformers' own bf16 of the bart fixture reaches 0.14 with eager
    // attention and 0.07 with SDPA (random decoder inputs, 5 trials). A wrong
    // layer moves the distributions apart entirely (towards 1).
    const double variation =
        (0.5 * (at::softmax(got, -1) - at::softmax(want, -1)).abs().sum(-1)).max().item<double>();
    EXPECT_LE(variation, 0.3);
    EXPECT_GT((got - want).abs().max().item<double>(), 0.0);  // bf16 really ran
  }
}

}  // namespace
}  // namespace docsparse
