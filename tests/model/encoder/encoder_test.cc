// Encoder parity with Hugging Face transformers: tiny random-weight BERT,
// RoBERTa and DistilBERT checkpoints (tests/fixtures/tiny_encoders) and the
// real all-MiniLM-L6-v2 against sentence-transformers
// (tests/fixtures/minilm/embeddings.jsonl). See tests/fixtures/README.md.
#include "model/encoder/encoder.h"

#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <sstream>

#include "model/encoder/pooling.h"
#include "model/encoder/text_encoder.h"
#include "model/text/wordpiece_tokenizer.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/json_tensor.h"

namespace docsparse {
namespace {

EncoderBatch Batch(std::vector<std::vector<int32_t>> sequences) {
  EncoderBatch batch;
  batch.sequences = std::move(sequences);
  return batch;
}

using testing::FixturePath;
using testing::ReadFile;

constexpr double kTolerance = 1e-4;

std::unique_ptr<Encoder> LoadEncoder(const std::string& dir) {
  absl::StatusOr<EncoderConfig> config = LoadEncoderConfig(dir + "/config.json");
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<Encoder>> encoder =
      Encoder::Create(dir, *config, MakeDenseAttention());
  EXPECT_TRUE(encoder.ok()) << encoder.status();
  return encoder.ok() ? *std::move(encoder) : nullptr;
}

class TinyEncoderParityTest : public ::testing::TestWithParam<std::pair<const char*, const char*>> {
};

TEST_P(TinyEncoderParityTest, HiddenStatesAndPoolingMatchTransformers) {
  const auto [model, expected_from] = GetParam();
  std::unique_ptr<Encoder> encoder =
      LoadEncoder(FixturePath(std::string("tiny_encoders/") + model));
  ASSERT_NE(encoder, nullptr);
  const nlohmann::json expected = nlohmann::json::parse(
      ReadFile(FixturePath(std::string("tiny_encoders/") + expected_from + "/expected.json")));
  c10::InferenceMode inference_mode;
  for (const nlohmann::json& c : expected["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    EncoderBatch batch;
    const auto lengths = c["lengths"].get<std::vector<int64_t>>();
    for (size_t i = 0; i < lengths.size(); ++i) {
      auto ids = c["input_ids"][i].get<std::vector<int32_t>>();
      ids.resize(lengths[i]);
      batch.sequences.push_back(ids);
      if (c.contains("token_type_ids")) {
        auto types = c["token_type_ids"][i].get<std::vector<int32_t>>();
        types.resize(lengths[i]);
        batch.token_types.push_back(types);
      }
    }
    CostAccount cost(encoder->shape());
    absl::StatusOr<EncoderOutput> out = encoder->Forward(batch, &cost);
    ASSERT_TRUE(out.ok()) << out.status();
    const at::Tensor want = testing::JsonToTensor(c["last_hidden_state"]);
    for (size_t i = 0; i < lengths.size(); ++i) {
      const int64_t n = lengths[i];
      const at::Tensor got_row = out->hidden[i].slice(0, 0, n);
      const at::Tensor want_row = want[i].slice(0, 0, n);
      EXPECT_LE((got_row - want_row).abs().max().item<double>(), kTolerance) << "row " << i;
    }
    const at::Tensor mean = Pool(out->hidden, out->lengths, PoolingMode::kMean);
    const at::Tensor cls = Pool(out->hidden, out->lengths, PoolingMode::kCls);
    EXPECT_LE((mean - testing::JsonToTensor(c["mean_pooled"])).abs().max().item<double>(),
              kTolerance);
    EXPECT_LE((cls - testing::JsonToTensor(c["cls_pooled"])).abs().max().item<double>(),
              kTolerance);
    int64_t tokens = 0;
    for (int64_t n : lengths) tokens += n;
    EXPECT_EQ(cost.input_tokens(), tokens);
    EXPECT_DOUBLE_EQ(cost.MeanDensity(), 1.0);
  }
}

INSTANTIATE_TEST_SUITE_P(Architectures, TinyEncoderParityTest,
                         ::testing::Values(std::make_pair("bert", "bert"),
                                           std::make_pair("roberta", "roberta"),
                                           std::make_pair("distilbert", "distilbert"),
                                           std::make_pair("bert_sharded", "bert")),
                         [](const auto& info) { return std::string(info.param.first); });

TEST(EncoderTest, RejectsBadSequences) {
  std::unique_ptr<Encoder> encoder = LoadEncoder(FixturePath("tiny_encoders/bert"));
  ASSERT_NE(encoder, nullptr);
  EXPECT_FALSE(encoder->Forward(Batch({}), nullptr).ok());
  EXPECT_FALSE(encoder->Forward(Batch({{}}), nullptr).ok());
  EXPECT_FALSE(encoder->Forward(Batch({{2, 97, 3}}), nullptr).ok());
  EXPECT_FALSE(encoder->Forward(Batch({std::vector<int32_t>(65, 5)}), nullptr).ok());
  EXPECT_TRUE(encoder->Forward(Batch({std::vector<int32_t>(64, 5)}), nullptr).ok());
}

// A row whose request was abandoned leaves the batch before the next layer:
// its output is zeros and its cost stops growing; the other rows come out as
// they would have. With every row gone, the forward stops with CANCELLED.
TEST(EncoderTest, AbandonedRowsLeaveTheBatchBetweenLayers) {
  std::unique_ptr<Encoder> encoder = LoadEncoder(FixturePath("tiny_encoders/bert"));
  ASSERT_NE(encoder, nullptr);
  ASSERT_GE(encoder->config().num_layers, 2);
  c10::InferenceMode inference_mode;
  const EncoderBatch whole = Batch({{2, 10, 11, 12, 3}, {2, 20, 21, 3}, {2, 30, 31, 32, 33, 3}});
  const EncoderShape shape = encoder->shape();
  std::vector<CostAccount> whole_costs(3, CostAccount(shape));
  absl::StatusOr<EncoderOutput> expected =
      encoder->Forward(whole, {&whole_costs[0], &whole_costs[1], &whole_costs[2]});
  ASSERT_TRUE(expected.ok()) << expected.status();

  // Row 1's client leaves after the first layer.
  EncoderBatch batch = whole;
  std::vector<int> checks(3, 0);
  batch.abandoned = [&checks](size_t row) { return row == 1 && ++checks[row] > 1; };
  std::vector<CostAccount> costs(3, CostAccount(shape));
  absl::StatusOr<EncoderOutput> output = encoder->Forward(batch, {&costs[0], &costs[1], &costs[2]});
  ASSERT_TRUE(output.ok()) << output.status();
  ASSERT_EQ(output->hidden.sizes(), expected->hidden.sizes());
  EXPECT_EQ(output->lengths, expected->lengths);
  for (int64_t row : {0, 2}) {
    EXPECT_TRUE(at::allclose(output->hidden[row], expected->hidden[row], 1e-5, 1e-5)) << row;
    EXPECT_EQ(costs[row].TotalEdges(), whole_costs[row].TotalEdges()) << row;
    EXPECT_EQ(costs[row].input_tokens(), whole_costs[row].input_tokens()) << row;
  }
  EXPECT_EQ(output->hidden[1].abs().max().item<float>(), 0);
  EXPECT_EQ(costs[1].TotalEdges(), 4 * 4 * shape.num_heads) << "the first layer only";
  EXPECT_EQ(costs[1].input_tokens(), 0);

  batch.abandoned = [](size_t) { return true; };
  absl::StatusOr<EncoderOutput> stopped = encoder->Forward(batch, nullptr);
  EXPECT_EQ(stopped.status().code(), absl::StatusCode::kCancelled) << stopped.status();
}

TEST(EncoderTest, RobertaSequenceLimitExcludesPaddingPositions) {
  std::unique_ptr<Encoder> encoder = LoadEncoder(FixturePath("tiny_encoders/roberta"));
  ASSERT_NE(encoder, nullptr);
  EXPECT_EQ(encoder->max_sequence_length(), 66 - 1 - 1);
}

class MiniLmParityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(testing::MiniLmPresent());
    encoder_ = LoadEncoder(testing::MiniLmDir());
    ASSERT_NE(encoder_, nullptr);
    auto tokenizer = WordPieceTokenizer::FromModelDir(testing::MiniLmDir());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    tokenizer_ = *std::move(tokenizer);
    std::istringstream lines(ReadFile(FixturePath("minilm/embeddings.jsonl")));
    for (std::string line; std::getline(lines, line);) {
      if (!line.empty()) cases_.push_back(nlohmann::json::parse(line));
    }
    ASSERT_GE(cases_.size(), 50u);
  }

  std::unique_ptr<Encoder> encoder_;
  std::unique_ptr<WordPieceTokenizer> tokenizer_;
  std::vector<nlohmann::json> cases_;
};

TEST_F(MiniLmParityTest, SentenceEmbeddingsMatchSentenceTransformers) {
  TextEncoder text(*tokenizer_, *encoder_, /*max_batch_size=*/8);
  std::vector<std::string> texts;
  for (const nlohmann::json& c : cases_) texts.push_back(c["text"].get<std::string>());
  CostAccount cost(encoder_->shape());
  absl::StatusOr<at::Tensor> embeddings =
      text.EmbedTexts(texts, PoolingMode::kMean, /*normalize=*/true, &cost);
  ASSERT_TRUE(embeddings.ok()) << embeddings.status();
  double worst = 0;
  for (size_t i = 0; i < cases_.size(); ++i) {
    const at::Tensor want = testing::JsonToTensor(cases_[i]["mean_normalized"]);
    const double error = ((*embeddings)[static_cast<int64_t>(i)] - want).abs().max().item<double>();
    EXPECT_LE(error, kTolerance) << "text " << i << ": " << texts[i].substr(0, 60);
    worst = std::max(worst, error);
  }
  std::cout << "max abs error over " << cases_.size() << " texts: " << worst << "\n";
}

TEST_F(MiniLmParityTest, TokenIdsAndClsStatesMatchTransformers) {
  c10::InferenceMode inference_mode;
  for (size_t i = 0; i < cases_.size(); i += 7) {
    const nlohmann::json& c = cases_[i];
    const std::vector<int32_t> ids =
        tokenizer_->Frame(tokenizer_->Encode(c["text"].get<std::string>()), 512);
    ASSERT_EQ(ids, c["input_ids"].get<std::vector<int32_t>>()) << "text " << i;
    absl::StatusOr<EncoderOutput> out = encoder_->Forward(Batch({ids}), nullptr);
    ASSERT_TRUE(out.ok()) << out.status();
    const at::Tensor cls = Pool(out->hidden, out->lengths, PoolingMode::kCls)[0];
    EXPECT_LE((cls - testing::JsonToTensor(c["cls"])).abs().max().item<double>(), kTolerance)
        << "text " << i;
  }
}

}  // namespace
}  // namespace docsparse
