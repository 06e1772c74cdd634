// Streamed text pieces against the tokenizer's one-shot Decode, with the real
// BART (byte-level BPE) and Pegasus (SentencePiece) tokenizers: the pieces
// concatenate to exactly Decode(all ids), every piece is whole UTF-8, and
// nothing is emitted that a later token changes.
#include "model/text/streaming_detokenizer.h"

#include <gtest/gtest.h>

#include <random>
#include <string>
#include <vector>

#include "model/text/tokenizer_loader.h"
#include "model/text/unicode_text.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/tokenizer_cases.h"

namespace docsparse {
namespace {

using ::docsparse::testing::EscapeText;
using ::docsparse::testing::FixturePath;

std::unique_ptr<Tokenizer> Load(const std::string& folder) {
  auto tokenizer = LoadTokenizer(FixturePath(folder));
  EXPECT_TRUE(tokenizer.ok()) << tokenizer.status();
  return tokenizer.ok() ? *std::move(tokenizer) : nullptr;
}

// Streams `ids` and checks the pieces; returns how many Append calls gave
// text (to show the stream was not one piece at the end).
int CheckStream(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  const std::string expected = tokenizer.Decode(ids);
  StreamingDetokenizer stream(tokenizer);
  std::string streamed;
  int pieces = 0;
  for (size_t i = 0; i < ids.size(); ++i) {
    const std::string piece = stream.Append(ids[i]);
    EXPECT_TRUE(ValidateUtf8(piece).ok()) << "piece after id " << i << ": " << EscapeText(piece);
    streamed += piece;
    pieces += piece.empty() ? 0 : 1;
    // What went out is final: a prefix of the whole text.
    EXPECT_EQ(expected.compare(0, streamed.size(), streamed), 0)
        << "after " << i + 1 << " ids: " << EscapeText(streamed) << " is not a prefix of "
        << EscapeText(expected);
  }
  streamed += stream.Finish();
  EXPECT_EQ(streamed, expected) << EscapeText(streamed) << " vs " << EscapeText(expected);
  return pieces;
}

TEST(StreamingDetokenizerTest, BartGoldenCasesConcatenateToDecode) {
  auto tokenizer = Load("bpe_spm/bart_tokenizer");
  ASSERT_NE(tokenizer, nullptr);
  const auto cases = testing::ReadTokenizerCases(FixturePath("bpe_spm/bart_cases.jsonl"));
  ASSERT_GT(cases.size(), 10u);
  for (const auto& c : cases) {
    // Framed ids include <s> and </s>, which decoding skips.
    CheckStream(*tokenizer, c.framed.value_or(c.ids));
  }
}

TEST(StreamingDetokenizerTest, PegasusGoldenCasesConcatenateToDecode) {
  auto tokenizer = Load("bpe_spm/pegasus_tokenizer");
  ASSERT_NE(tokenizer, nullptr);
  const auto cases = testing::ReadTokenizerCases(FixturePath("bpe_spm/pegasus_cases.jsonl"));
  ASSERT_GT(cases.size(), 10u);
  for (const auto& c : cases) CheckStream(*tokenizer, c.framed.value_or(c.ids));
}

// The cleanup rules delete a space before punctuation and contractions, and
// " ' " becomes "'": text that a later token rewrites must be held back.
TEST(StreamingDetokenizerTest, CleanupRewritesAreHeldBack) {
  for (const char* folder : {"bpe_spm/bart_tokenizer", "bpe_spm/pegasus_tokenizer"}) {
    auto tokenizer = Load(folder);
    ASSERT_NE(tokenizer, nullptr);
    for (const char* text :
         {"Hello , world . Is it ? Yes ! I do n't know , you 're right , he 's here .",
          "a ' b ' c and they 've gone , I 'm sure", "Plain words with spaces between them"}) {
      const std::vector<int32_t> ids = tokenizer->Encode(text);
      EXPECT_GT(CheckStream(*tokenizer, ids), 2) << folder << ": " << text;
    }
  }
}

// Byte-level tokens that split multi-byte characters (CJK, emoji, accents):
// no piece may carry half a character or a U+FFFD that later resolves.
TEST(StreamingDetokenizerTest, MultiByteCharactersAreNeverSplit) {
  auto tokenizer = Load("bpe_spm/bart_tokenizer");
  ASSERT_NE(tokenizer, nullptr);
  const std::string text = "Zürich café 東京タワー は 高い 🎉🎉 naïve résumé — “quotes” 𝔘𝔫𝔦𝔠𝔬𝔡𝔢 done";
  const std::vector<int32_t> ids = tokenizer->Encode(text);
  ASSERT_GT(ids.size(), 20u);
  EXPECT_GT(CheckStream(*tokenizer, ids), 5);
}

// What a random-weight model generates: arbitrary ids, special tokens and
// byte fragments mixed.
TEST(StreamingDetokenizerTest, RandomIdSequences) {
  for (const char* folder : {"bpe_spm/bart_tokenizer", "bpe_spm/pegasus_tokenizer"}) {
    auto tokenizer = Load(folder);
    ASSERT_NE(tokenizer, nullptr);
    std::mt19937 random(7);
    std::uniform_int_distribution<int32_t> id(0, tokenizer->vocab_size() - 1);
    for (int trial = 0; trial < 50; ++trial) {
      std::vector<int32_t> ids(1 + trial % 40);
      for (int32_t& value : ids) value = id(random);
      CheckStream(*tokenizer, ids);
    }
  }
}

}  // namespace
}  // namespace docsparse
