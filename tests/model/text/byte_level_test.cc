#include "model/text/byte_level.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <fstream>
#include <set>
#include <string>
#include <vector>

#include "model/text/unicode_text.h"
#include "nlohmann/json.hpp"
#include "tests/common/fixture_paths.h"

namespace docsparse {
namespace {

using ::testing::ElementsAre;

std::vector<std::string> Split(std::string_view text) {
  std::vector<std::string_view> words;
  SplitGpt2Words(text, &words);
  return std::vector<std::string>(words.begin(), words.end());
}

// Every code point, classified as HF's regex engine (Oniguruma) classifies
// it for \p{L}, \p{N} and \s: tests/fixtures/bpe_spm/gpt2_regex_classes.json.
TEST(ByteLevelTest, CharClassesMatchHuggingFaceForEveryCodePoint) {
  std::ifstream in(::docsparse::testing::FixturePath("bpe_spm/gpt2_regex_classes.json"));
  const nlohmann::json classes = nlohmann::json::parse(in);
  const std::pair<const char*, Gpt2CharClass> kinds[] = {
      {"letter", Gpt2CharClass::kLetter},
      {"number", Gpt2CharClass::kNumber},
      {"whitespace", Gpt2CharClass::kWhitespace}};
  std::vector<Gpt2CharClass> expected(0x110000, Gpt2CharClass::kOther);
  for (const auto& [name, kind] : kinds) {
    ASSERT_FALSE(classes.at(name).empty()) << name;
    for (const auto& range : classes.at(name)) {
      for (char32_t c = range[0].get<char32_t>(); c <= range[1].get<char32_t>(); ++c) {
        expected[c] = kind;
      }
    }
  }
  int mismatches = 0;
  for (char32_t c = 0; c < 0x110000; ++c) {
    if (c >= 0xD800 && c <= 0xDFFF) continue;
    if (ClassifyForGpt2(c) != expected[c] && ++mismatches <= 10) {
      ADD_FAILURE() << "U+" << std::hex << static_cast<uint32_t>(c) << ": HF class "
                    << static_cast<int>(expected[c]) << ", ours "
                    << static_cast<int>(ClassifyForGpt2(c));
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(ByteLevelTest, SplitFollowsTheGpt2Pattern) {
  EXPECT_THAT(Split("Hello world"), ElementsAre("Hello", " world"));
  EXPECT_THAT(Split("I'm sure they'll've"), ElementsAre("I", "'m", " sure", " they", "'ll", "'ve"));
  EXPECT_THAT(Split("IT'S 'x ''s"), ElementsAre("IT", "'", "S", " '", "x", " ''", "s"));
  // A whitespace run gives its last space to the next word.
  EXPECT_THAT(Split("a   b"), ElementsAre("a", "  ", " b"));
  EXPECT_THAT(Split("a \t b"), ElementsAre("a", " \t", " b"));
  EXPECT_THAT(Split("a\tb"), ElementsAre("a", "\t", "b"));
  EXPECT_THAT(Split("end  "), ElementsAre("end", "  "));
  EXPECT_THAT(Split("x 42 3.14 ?!"), ElementsAre("x", " 42", " 3", ".", "14", " ?!"));
  EXPECT_THAT(Split("caf\xc3\xa9\xe4\xb8\xad"
                    "1"),
              ElementsAre("caf\xc3\xa9\xe4\xb8\xad", "1"));
  EXPECT_THAT(Split(""), ElementsAre());
  // Malformed UTF-8 reads as U+FFFD (not a letter), byte by byte.
  EXPECT_THAT(Split("a\xff\xfe b"), ElementsAre("a", "\xff\xfe", " b"));
}

TEST(ByteLevelTest, ByteTableIsGpt2s) {
  const auto& chars = ByteLevelChars();
  EXPECT_EQ(chars['a'], "a");
  EXPECT_EQ(chars[' '], "\xc4\xa0");   // U+0120 'Ġ'
  EXPECT_EQ(chars['\n'], "\xc4\x8a");  // U+010A 'Ċ'
  EXPECT_EQ(chars[0xAD], "\xc5\x83");  // U+0143
  std::set<std::string> distinct(chars.begin(), chars.end());
  EXPECT_EQ(distinct.size(), 256u);
  for (int b = 0; b < 256; ++b) {
    size_t pos = 0;
    EXPECT_EQ(ByteOfByteLevelChar(DecodeUtf8At(chars[b], &pos)), b);
  }
  EXPECT_EQ(ByteOfByteLevelChar(U' '), -1);
  EXPECT_EQ(ByteOfByteLevelChar(0x144), -1);
  EXPECT_EQ(ByteOfByteLevelChar(0x4E2D), -1);
}

// Expected values: Python's bytes.decode("utf-8", "replace"), which follows
// the same "maximal subpart" practice as Rust's from_utf8_lossy.
TEST(ByteLevelTest, Utf8LossyReplacesMaximalSubparts) {
  const std::string r = "\xef\xbf\xbd";
  EXPECT_EQ(Utf8Lossy("plain \xc3\xa9 \xf0\x9f\x98\x80"), "plain \xc3\xa9 \xf0\x9f\x98\x80");
  EXPECT_EQ(Utf8Lossy("\xff"), r);
  EXPECT_EQ(Utf8Lossy("a\x80"
                      "b"),
            "a" + r + "b");
  EXPECT_EQ(Utf8Lossy("\xe2\x82"), r);
  EXPECT_EQ(Utf8Lossy("\xe2\x82"
                      "a"),
            r + "a");
  EXPECT_EQ(Utf8Lossy("\xf0\x9f\x98"), r);
  EXPECT_EQ(Utf8Lossy("\xed\xa0\x80"), r + r + r);          // A surrogate.
  EXPECT_EQ(Utf8Lossy("\xc0\xaf"), r + r);                  // Overlong.
  EXPECT_EQ(Utf8Lossy("\xf4\x90\x80\x80"), r + r + r + r);  // Above U+10FFFF.
  EXPECT_EQ(Utf8Lossy("\xe0\x80\xaf"), r + r + r);
  EXPECT_EQ(Utf8Lossy("\xf8\x88\x80\x80\x80"), r + r + r + r + r);
  EXPECT_EQ(Utf8Lossy("\xc3\xa9\xc3"), "\xc3\xa9" + r);
  EXPECT_EQ(Utf8Lossy(""), "");
}

}  // namespace
}  // namespace docsparse
