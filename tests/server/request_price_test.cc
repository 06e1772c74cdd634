#include "server/request_price.h"

#include <c10/core/InferenceMode.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include "tests/common/fixture_paths.h"

namespace docsparse {
namespace {

using ::testing::HasSubstr;

TEST(RequestPriceTest, PartsAddUp) {
  RequestPrice a;
  a.tokens["document"] = 10;
  a.flops = 1e9;
  RequestPrice b;
  b.tokens["document"] = 5;
  b.tokens["label"] = 7;
  b.flops = 2e9;
  a += b;
  EXPECT_EQ(a.tokens["document"], 15);
  EXPECT_EQ(a.tokens["label"], 7);
  EXPECT_EQ(a.total_tokens(), 22);
  EXPECT_DOUBLE_EQ(a.flops, 3e9);
}

TEST(RequestPriceTest, AdmissionNamesThePriceItsPartsAndTheLimit) {
  ServerLimits limits;
  limits.max_request_tokens = 1000;
  limits.max_request_gflops = 10;
  RequestPrice price;
  price.tokens["document"] = 4;
  price.tokens["label"] = 996;
  price.flops = 10e9;
  EXPECT_TRUE(AdmitRequest(price, limits).ok()) << "at the limits is within them";

  price.tokens["label"] = 263522;
  absl::Status refused = AdmitRequest(price, limits);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(refused.message(),
            "request: priced at 263526 tokens to encode (4 document + 263522 label), over the "
            "limit of 1000 tokens per request (--max_request_tokens)");

  price.tokens["label"] = 6;
  price.flops = 12.5e9;
  refused = AdmitRequest(price, limits);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("priced at 12.5 GFLOP"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("limit of 10 GFLOP per request"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr("--max_request_gflops"));
}

// The decoder's price against the FLOPs the decoder itself counts when it
// runs (DecoderStepper::flops: cross-attention keys and values, then every
// step), on the tiny BART fixture: an upper estimate, not far above.
TEST(RequestPriceTest, DecoderFlopsBoundWhatTheDecoderCounts) {
  namespace fs = std::filesystem;
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("request-price-bart." + std::to_string(getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  for (const auto& entry : fs::directory_iterator(testing::FixturePath("seq2seq/bart"))) {
    fs::copy_file(entry.path(), dir / entry.path().filename());
  }
  std::ofstream(dir / "docsparse.json") << R"({"tasks": ["summarize"]})";
  absl::StatusOr<std::unique_ptr<ServedModel>> model = LoadServedModel("bart", dir.string());
  ASSERT_TRUE(model.ok()) << model.status();
  const Seq2SeqModel& seq2seq = *(*model)->seq2seq;

  c10::InferenceMode inference_mode;
  EncoderBatch batch;
  batch.sequences = {{0, 31, 32, 33, 34, 35, 36, 37, 38, 2}};
  absl::StatusOr<Seq2SeqEncoding> encoding = seq2seq.Encode(batch, {});
  ASSERT_TRUE(encoding.ok()) << encoding.status();
  for (const int beams : {1, 3}) {
    absl::StatusOr<std::unique_ptr<DecoderStepper>> stepper =
        seq2seq.StartDecoding(*encoding, beams);
    ASSERT_TRUE(stepper.ok()) << stepper.status();
    GenerationConfig generation;
    generation.num_beams = beams;
    generation.max_length = 12;
    // Generation feeds the start token, then one token a step: max_length - 1
    // steps at most.
    for (int step = 0; step + 1 < generation.max_length; ++step) {
      ASSERT_TRUE((*stepper)->Step(at::full({beams}, 2, at::kLong)).ok());
    }
    const double counted = (*stepper)->flops();
    const double priced = DecoderFlops(**model, generation, encoding->valid_rows[0]);
    SCOPED_TRACE(beams);
    EXPECT_GE(priced, counted);
    EXPECT_LE(priced, 1.5 * counted);
  }
  fs::remove_all(dir);
}

TEST(RequestPriceTest, GenerationCapsNameTheFieldAndTheFlag) {
  ServerLimits limits;
  limits.max_generated_tokens = 64;
  limits.max_beams = 4;
  GenerationConfig generation;
  generation.max_length = 65;  // 64 generated tokens: allowed
  generation.num_beams = 4;
  EXPECT_TRUE(CheckGenerationCaps(generation, limits).ok());
  generation.max_new_tokens = 65;  // replaces max_length
  absl::Status status = CheckGenerationCaps(generation, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(),
            "generation.max_new_tokens: up to 65 generated tokens (the request's max_length / "
            "max_new_tokens, else the model's); the server allows 64 (--max_generated_tokens)");
  generation.max_new_tokens.reset();
  generation.num_beams = 5;
  status = CheckGenerationCaps(generation, limits);
  EXPECT_EQ(status.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(status.message(),
            "generation.num_beams: 5 beams (the request's, else the model's); the server allows 4 "
            "(--max_beams)");
}

}  // namespace
}  // namespace docsparse
