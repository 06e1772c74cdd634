#include "model/text/unicode_text.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdint>
#include <fstream>
#include <map>
#include <random>
#include <string>
#include <vector>

#include "nlohmann/json.hpp"

namespace docsparse {
namespace {

using Json = nlohmann::json;
using ::testing::HasSubstr;

constexpr char32_t kMaxCodePoint = 0x10FFFF;

bool IsSurrogate(char32_t c) { return c >= 0xD800 && c <= 0xDFFF; }

std::string Bytes(std::initializer_list<int> bytes) {
  std::string out;
  for (const int b : bytes) out.push_back(static_cast<char>(b));
  return out;
}

// An independent, slow decoder: decode any 1-4 byte pattern, then reject
// what RFC 3629 forbids (overlong, surrogates, > U+10FFFF). Returns the
// offset of the first bad sequence, or -1.
long ReferenceFirstError(const std::string& text) {
  size_t pos = 0;
  while (pos < text.size()) {
    const uint8_t lead = static_cast<uint8_t>(text[pos]);
    const size_t len = lead < 0x80       ? 1
                       : lead >> 5 == 6  ? 2
                       : lead >> 4 == 14 ? 3
                       : lead >> 3 == 30 ? 4
                                         : 0;
    if (len == 0 || pos + len > text.size()) return static_cast<long>(pos);
    uint32_t cp = len == 1 ? lead : lead & (0xFF >> (len + 1));
    for (size_t k = 1; k < len; ++k) {
      const uint8_t b = static_cast<uint8_t>(text[pos + k]);
      if ((b & 0xC0) != 0x80) return static_cast<long>(pos);
      cp = (cp << 6) | (b & 0x3F);
    }
    const uint32_t min_for_length[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < min_for_length[len] || cp > kMaxCodePoint || IsSurrogate(cp)) {
      return static_cast<long>(pos);
    }
    pos += len;
  }
  return -1;
}

TEST(ValidateUtf8Test, AcceptsWellFormedTextUpToTheBoundaries) {
  EXPECT_TRUE(ValidateUtf8("").ok());
  EXPECT_TRUE(ValidateUtf8("plain ASCII \x7f").ok());
  for (const char32_t c : {0x80, 0x7FF, 0x800, 0xD7FF, 0xE000, 0xFFFD, 0xFFFF, 0x10000, 0x10FFFF}) {
    std::string text;
    AppendUtf8(c, &text);
    EXPECT_TRUE(ValidateUtf8(text).ok()) << std::hex << static_cast<uint32_t>(c);
  }
  EXPECT_TRUE(ValidateUtf8("Straße İstanbul 中文 👍🏽").ok());
}

TEST(ValidateUtf8Test, RejectsMalformedSequencesWithTheirOffset) {
  const struct {
    std::string text;
    const char* message;
  } cases[] = {
      {Bytes({'a', 0xC0, 0x80}), "byte offset 1: overlong encoding"},
      {Bytes({0xC1, 0xBF}), "byte offset 0: overlong encoding"},
      {Bytes({'a', 'b', 0xE0, 0x80, 0x80}), "byte offset 2: overlong encoding"},
      {Bytes({0xE0, 0x9F, 0xBF}), "overlong encoding"},
      {Bytes({0xF0, 0x80, 0x80, 0x80}), "overlong encoding"},
      {Bytes({0xF0, 0x8F, 0xBF, 0xBF}), "overlong encoding"},
      {Bytes({'x', 0xED, 0xA0, 0x80}), "byte offset 1: surrogate code point"},
      {Bytes({0xED, 0xBF, 0xBF}), "surrogate code point"},
      {Bytes({0xF4, 0x90, 0x80, 0x80}), "code point above U+10FFFF"},
      {Bytes({0xF5, 0x80, 0x80, 0x80}), "invalid lead byte (byte 0xF5)"},
      {Bytes({0xFF}), "invalid lead byte"},
      {Bytes({'a', 0x80}), "byte offset 1: unexpected continuation byte"},
      {Bytes({0xE2, 0x82}), "byte offset 0: truncated sequence"},
      {Bytes({'o', 'k', 0xF0, 0x9F, 0x98}), "byte offset 2: truncated sequence"},
      {Bytes({0xE2, 0x28, 0xA1}), "truncated sequence"},
      {Bytes({0xC3}), "truncated sequence"},
  };
  for (const auto& c : cases) {
    const absl::Status status = ValidateUtf8(c.text);
    EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(status.message(), HasSubstr(c.message));
    EXPECT_EQ(DecodeUtf8(c.text).status(), status);
  }
}

TEST(DecodeUtf8Test, RoundTripsEveryScalarValue) {
  std::string all;
  std::u32string expected;
  for (char32_t c = 0; c <= kMaxCodePoint; ++c) {
    if (IsSurrogate(c)) continue;
    AppendUtf8(c, &all);
    expected.push_back(c);
  }
  const absl::StatusOr<std::u32string> decoded = DecodeUtf8(all);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(*decoded == expected);
  EXPECT_EQ(EncodeUtf8(expected), all);
}

TEST(DecodeUtf8Test, MalformedBytesDecodeAsReplacementOneByteAtATime) {
  const std::string text = Bytes({'a', 0xE2, 0x82, 'b', 0xED, 0xA0, 0x80});
  std::u32string decoded;
  for (size_t pos = 0; pos < text.size();) decoded.push_back(DecodeUtf8At(text, &pos));
  EXPECT_TRUE(decoded == U"a\uFFFD\uFFFDb\uFFFD\uFFFD\uFFFD");
}

// Random bytes, biased towards the interesting lead bytes: the validator
// never crashes and agrees with the reference decoder on the error offset.
TEST(ValidateUtf8Test, FuzzAgreesWithReferenceDecoder) {
  std::mt19937 rng(7);
  const int interesting[] = {0x00, 0x41, 0x7F, 0x80, 0xBF, 0xC0, 0xC1, 0xC2, 0xDF, 0xE0,
                             0xED, 0xEF, 0xF0, 0xF4, 0xF5, 0xFF, 0x8F, 0x90, 0x9F, 0xA0};
  int valid = 0;
  for (int round = 0; round < 50000; ++round) {
    std::string text(std::uniform_int_distribution<size_t>(0, 12)(rng), '\0');
    for (char& b : text) {
      b = static_cast<char>(rng() % 2 ? interesting[rng() % 20] : rng() % 256);
    }
    const absl::Status status = ValidateUtf8(text);
    const long reference = ReferenceFirstError(text);
    if (reference < 0) {
      ++valid;
      ASSERT_TRUE(status.ok()) << status;
      ASSERT_EQ(EncodeUtf8(*DecodeUtf8(text)), text);
    } else {
      ASSERT_THAT(status.message(), HasSubstr("byte offset " + std::to_string(reference) + ":"));
    }
    size_t pos = 0;  // The lenient decoder stays in bounds.
    while (pos < text.size()) ASSERT_LE(DecodeUtf8At(text, &pos), kMaxCodePoint);
  }
  EXPECT_GT(valid, 1000);
}

// HF's own view of every code point (tests/fixtures/tokenizer/
// unicode_properties.json, written by tools/make_tokenizer_fixtures.py).
class HfUnicodeTablesTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::ifstream in(std::string(DOCSPARSE_SOURCE_DIR) +
                     "/tests/fixtures/tokenizer/unicode_properties.json");
    ASSERT_TRUE(in) << "missing fixture: run tools/make_tokenizer_fixtures.py";
    tables_ = Json::parse(in);
  }

  std::vector<bool> Members(const char* name) const {
    std::vector<bool> member(kMaxCodePoint + 1, false);
    for (const Json& range : tables_.at(name)) {
      for (uint32_t c = range[0]; c <= range[1].get<uint32_t>(); ++c) member[c] = true;
    }
    return member;
  }

  std::map<char32_t, std::u32string> Mapping(const char* name) const {
    std::map<char32_t, std::u32string> mapping;
    for (const Json& entry : tables_.at(name)) {
      std::u32string to;
      for (const Json& c : entry[1]) to.push_back(c.get<char32_t>());
      mapping[entry[0].get<char32_t>()] = to;
    }
    return mapping;
  }

  // Checks predicate(c) == expected[c] for every scalar value.
  template <typename Predicate>
  void ExpectSameClass(const char* name, const std::vector<bool>& expected, Predicate predicate) {
    int mismatches = 0;
    for (char32_t c = 0; c <= kMaxCodePoint; ++c) {
      if (IsSurrogate(c) || predicate(c) == expected[c]) continue;
      if (++mismatches <= 10) {
        ADD_FAILURE() << name << ": U+" << std::hex << std::uppercase << static_cast<uint32_t>(c)
                      << " HF says " << expected[c];
      }
    }
    EXPECT_EQ(mismatches, 0) << name;
  }

  Json tables_;
};

TEST_F(HfUnicodeTablesTest, CleanTextRemovesAndSpacesTheSameCodePoints) {
  const std::vector<bool> removed = Members("removed");
  const std::vector<bool> to_space = Members("to_space");
  ExpectSameClass("removed", removed, IsBertRemovedControl);
  ExpectSameClass("to_space", to_space, [](char32_t c) {
    return c != ' ' && !IsBertRemovedControl(c) && IsBertWhitespace(c);
  });
}

TEST_F(HfUnicodeTablesTest, PreTokenizerSplitsOnTheSameCodePoints) {
  ExpectSameClass("whitespace", Members("whitespace"), IsBertWhitespace);
  ExpectSameClass("punctuation", Members("punctuation"), IsBertPunctuation);
  ExpectSameClass("cjk", Members("cjk"), IsBertChineseChar);
}

TEST_F(HfUnicodeTablesTest, StripAccentsAgreesOnEveryCodePoint) {
  const std::vector<bool> removed = Members("strip_removed");
  const std::vector<bool> hangul = Members("strip_hangul");
  const std::map<char32_t, std::u32string> mapped = Mapping("strip_accents");
  int mismatches = 0;
  for (char32_t c = 0; c <= kMaxCodePoint; ++c) {
    if (IsSurrogate(c)) continue;
    std::u32string nfd;
    AppendNfd(std::u32string(1, c), &nfd);
    std::u32string ours;
    for (const char32_t d : nfd) {
      if (!IsBertNonspacingMark(d)) ours.push_back(d);
    }
    std::u32string expected(1, c);
    if (removed[c]) {
      expected.clear();
    } else if (hangul[c]) {
      const char32_t s = c - 0xAC00;  // Unicode's algorithmic decomposition.
      expected.assign(1, 0x1100 + s / 588);
      expected.push_back(0x1161 + (s % 588) / 28);
      if (s % 28 != 0) expected.push_back(0x11A7 + s % 28);
    } else if (const auto it = mapped.find(c); it != mapped.end()) {
      expected = it->second;
    }
    if (ours != expected && ++mismatches <= 10) {
      ADD_FAILURE() << "strip_accents: U+" << std::hex << static_cast<uint32_t>(c);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST_F(HfUnicodeTablesTest, LowercaseAgreesOnEveryCodePoint) {
  const std::map<char32_t, std::u32string> mapped = Mapping("lowercase");
  int mismatches = 0;
  for (char32_t c = 0; c <= kMaxCodePoint; ++c) {
    if (IsSurrogate(c)) continue;
    std::u32string ours;
    AppendLowercase(c, &ours);
    const auto it = mapped.find(c);
    const std::u32string expected = it != mapped.end() ? it->second : std::u32string(1, c);
    if (ours != expected && ++mismatches <= 10) {
      ADD_FAILURE() << "lowercase: U+" << std::hex << static_cast<uint32_t>(c);
    }
  }
  EXPECT_EQ(mismatches, 0);
}

TEST(UnicodeTextTest, LowercaseIsFullAndContextFree) {
  std::u32string out;
  for (const char32_t c : std::u32string_view(U"İΣAß")) AppendLowercase(c, &out);
  EXPECT_TRUE(out == U"i\u0307σaß");
}

TEST(UnicodeTextTest, NfdDecomposesAndReordersMarks) {
  std::u32string out;
  AppendNfd(U"\u00e9a\u0315\u0300\u1e9b\u0323", &out);
  EXPECT_TRUE(out == U"e\u0301a\u0300\u0315\u017f\u0323\u0307");
}

TEST(UnicodeTextTest, BertNormalizeRunsEveryStepInHfOrder) {
  const std::string text = std::string("H\u00e9llo\t\u4e2d\u6587 \u0130\u200bx") + '\0' + "y";
  BertNormalizerOptions options;
  EXPECT_EQ(BertNormalize(text, options), "hello  \u4e2d  \u6587  ixy");
  options.strip_accents = false;  // Lowercasing alone keeps U+0307.
  EXPECT_EQ(BertNormalize(text, options), "h\u00e9llo  \u4e2d  \u6587  i\u0307xy");
  options = {false, false, false, false};
  EXPECT_EQ(BertNormalize(text, options), text);
}

}  // namespace
}  // namespace docsparse
