#include "model/text/sentencepiece_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "nlohmann/json.hpp"
#include "tests/common/fixture_paths.h"
#include "tests/common/tokenizer_cases.h"

namespace docsparse {
namespace {

using ::docsparse::testing::FixturePath;
using ::docsparse::testing::TokenizerCase;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kPegasusDir = FixturePath("bpe_spm/pegasus_tokenizer");

std::filesystem::path Scratch() {
  return ::docsparse::testing::ScratchDir("sentencepiece_tokenizer_test");
}

// A copy of the fixture folder with `config` as its tokenizer_config.json.
std::string FolderWithConfig(const std::string& name, const std::string& config) {
  const auto dir = Scratch() / name;
  std::filesystem::create_directories(dir);
  std::filesystem::copy_file(kPegasusDir + "/spiece.model", dir / "spiece.model",
                             std::filesystem::copy_options::overwrite_existing);
  std::ofstream(dir / "tokenizer_config.json") << config;
  return dir.string();
}

class SentencePieceTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = SentencePieceTokenizer::FromModelDir(kPegasusDir);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = std::move(loaded).value().release();
    cases_ = new std::vector<TokenizerCase>(
        ::docsparse::testing::ReadTokenizerCases(FixturePath("bpe_spm/pegasus_cases.jsonl")));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete cases_;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(Scratch(), ignored);
  }

  static const SentencePieceTokenizer* tokenizer_;
  static const std::vector<TokenizerCase>* cases_;
};
const SentencePieceTokenizer* SentencePieceTokenizerTest::tokenizer_ = nullptr;
const std::vector<TokenizerCase>* SentencePieceTokenizerTest::cases_ = nullptr;

// The reference is transformers 4's sentencepiece-backed PegasusTokenizer
// (see tests/fixtures/bpe_spm/README.md for where the tokenizers-backed
// ones differ).
TEST_F(SentencePieceTokenizerTest, EncodeMatchesPegasusTokenizerOnFixtures) {
  int strings = 0;
  for (const TokenizerCase& c : *cases_) strings += c.decode_only ? 0 : 1;
  ASSERT_GE(strings, 300) << "run tools/make_bpe_spm_tokenizer_fixtures.py";
  ::docsparse::testing::ExpectSameIds(*tokenizer_, *cases_);
}

TEST_F(SentencePieceTokenizerTest, DecodeMatchesPegasusTokenizerOnFixtures) {
  ::docsparse::testing::ExpectSameDecoded(*tokenizer_, *cases_);
}

TEST_F(SentencePieceTokenizerTest, FrameAppendsEndOfSequenceOnly) {
  int framed = 0;
  for (const TokenizerCase& c : *cases_) {
    if (!c.framed.has_value()) continue;
    ++framed;
    EXPECT_EQ(tokenizer_->Frame(c.ids, 1 << 20), *c.framed)
        << ::docsparse::testing::EscapeText(c.text);
  }
  EXPECT_GE(framed, 200);
  EXPECT_THAT(tokenizer_->Frame({200, 201, 202}, 3), ElementsAre(200, 201, 1));
  EXPECT_THAT(tokenizer_->Frame({200}, 0), ElementsAre(1));
}

TEST_F(SentencePieceTokenizerTest, CleanUpFlagOfTokenizerConfigIsHonoured) {
  auto tokenizer = SentencePieceTokenizer::FromModelDir(
      FolderWithConfig("cleanup", R"({"clean_up_tokenization_spaces": true})"));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  int with_cleanup = 0;
  for (const TokenizerCase& c : *cases_) {
    const std::string expected = c.decoded_cleanup.value_or(c.decoded);
    with_cleanup += c.decoded_cleanup.has_value() ? 1 : 0;
    EXPECT_EQ((*tokenizer)->Decode(c.ids), expected) << ::docsparse::testing::IdList(c.ids);
  }
  EXPECT_GE(with_cleanup, 10);  // The flag changes some of the fixture texts.
}

// One text of about 120k characters, through the paths short strings do not reach (SentencePiece
// re-bases its running score every 1e5).
TEST_F(SentencePieceTokenizerTest, LongTextMatchesHuggingFace) {
  std::ifstream in(FixturePath("bpe_spm/long_cases.json"));
  const nlohmann::json summary = nlohmann::json::parse(in).at("pegasus");
  ::docsparse::testing::ExpectSameLongCase(*tokenizer_, *cases_, summary);
}

TEST_F(SentencePieceTokenizerTest, SpecialTokenIdsFollowPegasusTokenizer) {
  const SpecialTokenIds& special = tokenizer_->special_tokens();
  EXPECT_EQ(special.pad, 0);
  EXPECT_EQ(special.sep, 1);   // </s>
  EXPECT_EQ(special.mask, 3);  // <mask_2>; <mask_1> (mask_token_sent) is 2.
  EXPECT_EQ(special.unk, 105);
  EXPECT_EQ(special.cls, -1);
  EXPECT_EQ(tokenizer_->vocab_size(), 2500 + 103);
  EXPECT_EQ(tokenizer_->TokenToId("<mask_1>"), 2);
  EXPECT_EQ(tokenizer_->TokenToId("<unk_2>"), 4);
  EXPECT_EQ(tokenizer_->TokenToId("<unk_102>"), 104);
  EXPECT_EQ(tokenizer_->TokenToId("<unk>"), 105);
  EXPECT_EQ(tokenizer_->TokenToId("\xe2\x96\x81the"), 106);  // "▁the", the first piece.
  EXPECT_EQ(tokenizer_->TokenToId("no such piece"), -1);
  EXPECT_EQ(tokenizer_->IdToToken(106), "\xe2\x96\x81the");
  EXPECT_EQ(tokenizer_->IdToToken(3), "<mask_2>");
  EXPECT_EQ(tokenizer_->IdToToken(2603), std::nullopt);
}

TEST_F(SentencePieceTokenizerTest, EncodesSpecialTokensAndDecodesWithoutThem) {
  const std::vector<int32_t> ids = tokenizer_->Encode("the <mask_1> the</s>");
  EXPECT_THAT(ids, ElementsAre(106, 2, 106, 1));
  EXPECT_EQ(tokenizer_->Decode(ids), "the the");
  EXPECT_EQ(tokenizer_->Decode({-1, 5000, 0, 105}), "");
  EXPECT_THAT(tokenizer_->Encode(""), ElementsAre());
  EXPECT_THAT(tokenizer_->Encode(" \t\n "), ElementsAre());
}

TEST_F(SentencePieceTokenizerTest, ConcurrentEncodeGivesTheSameIds) {
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 2; ++round) {
        for (size_t i = 0; i < cases_->size(); ++i) {
          const TokenizerCase& c = (*cases_)[(i + t * 37) % cases_->size()];
          if (!c.decode_only && tokenizer_->Encode(c.text) != c.ids) ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(mismatches, ElementsAre(0, 0, 0, 0));
}

class SentencePieceTokenizerErrorsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(Scratch(), ignored);
  }
};

TEST_F(SentencePieceTokenizerErrorsTest, BadFilesAreNamed) {
  auto missing = SentencePieceTokenizer::FromSpieceModel("/nonexistent/spiece.model");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/spiece.model"));

  const auto dir = Scratch() / "garbage";
  std::filesystem::create_directories(dir);
  std::ofstream(dir / "spiece.model") << "this is not a protobuf";
  auto garbage = SentencePieceTokenizer::FromModelDir(dir.string());
  EXPECT_EQ(garbage.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(garbage.status().message(), HasSubstr("spiece.model: not a SentencePiece model"));

  const struct {
    const char* config;
    const char* message;
  } cases[] = {
      {R"({"offset": 1})", "tokenizer_config.json: offset 1 is outside [2, "},
      {R"({"offset": -5})", "tokenizer_config.json: offset is not an integer"},
      {R"({"mask_token_sent": null})", "tokenizer_config.json: mask_token_sent is null"},
      {R"({"eos_token": 3})", "tokenizer_config.json: eos_token is not a string"},
      {R"({"clean_up_tokenization_spaces": 1})",
       "tokenizer_config.json: clean_up_tokenization_spaces is not a boolean"},
      {"{", "tokenizer_config.json: not valid JSON"},
  };
  for (const auto& c : cases) {
    auto result = SentencePieceTokenizer::FromModelDir(FolderWithConfig("config", c.config));
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << c.config;
    EXPECT_THAT(result.status().message(), HasSubstr(c.message)) << c.config;
  }
}

TEST_F(SentencePieceTokenizerErrorsTest, OffsetAndTokenNamesComeFromTheConfig) {
  auto tokenizer = SentencePieceTokenizer::FromModelDir(FolderWithConfig(
      "custom", R"({"offset": 10, "eos_token": "<eos>", "mask_token": {"content": "<M>"}})"));
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  EXPECT_EQ((*tokenizer)->vocab_size(), 2510);
  EXPECT_EQ((*tokenizer)->special_tokens().sep, 1);
  EXPECT_EQ((*tokenizer)->TokenToId("<eos>"), 1);
  EXPECT_EQ((*tokenizer)->TokenToId("<M>"), 3);
  EXPECT_EQ((*tokenizer)->TokenToId("<unk_9>"), 11);
  EXPECT_EQ((*tokenizer)->TokenToId("<unk_10>"), -1);
  EXPECT_EQ((*tokenizer)->special_tokens().unk, 12);
  EXPECT_THAT((*tokenizer)->Encode("the<eos>"), ElementsAre(13, 1));
}

}  // namespace
}  // namespace docsparse
