// Golden tokenizer cases (tests/fixtures/bpe_spm/*_cases.jsonl) and the
// helpers that compare a Tokenizer with them, reporting the first few
// mismatches with every non-ASCII code point escaped.
#ifndef DOCSPARSE_TESTS_COMMON_TOKENIZER_CASES_H_
#define DOCSPARSE_TESTS_COMMON_TOKENIZER_CASES_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "model/text/tokenizer.h"
#include "model/text/unicode_text.h"
#include "nlohmann/json.hpp"

namespace docsparse::testing {

// One line of a *_cases.jsonl file: a string with the ids and decoded text
// HF gives, or (decode_only) ids with the text HF decodes them to.
struct TokenizerCase {
  std::string text;
  std::vector<int32_t> ids;
  std::string decoded;
  std::optional<std::vector<int32_t>> framed;  // With the special tokens HF adds.
  std::optional<std::string> decoded_cleanup;  // With clean_up_tokenization_spaces.
  bool decode_only = false;
};

inline std::vector<TokenizerCase> ReadTokenizerCases(const std::string& path) {
  std::ifstream in(path);
  std::vector<TokenizerCase> cases;
  for (std::string line; std::getline(in, line);) {
    const nlohmann::json row = nlohmann::json::parse(line);
    TokenizerCase c;
    c.decode_only = row.contains("decode_ids");
    c.ids = row.at(c.decode_only ? "decode_ids" : "ids").get<std::vector<int32_t>>();
    if (!c.decode_only) c.text = row.at("text");
    c.decoded = row.at("decoded");
    if (row.contains("framed")) c.framed = row.at("framed").get<std::vector<int32_t>>();
    if (row.contains("decoded_cleanup")) c.decoded_cleanup = row.at("decoded_cleanup");
    cases.push_back(std::move(c));
  }
  return cases;
}

// The text with everything outside printable ASCII as \u{...}, cut at 300.
inline std::string EscapeText(std::string_view text) {
  std::string out;
  for (size_t pos = 0; pos < text.size();) {
    const char32_t c = DecodeUtf8At(text, &pos);
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      std::ostringstream hex;
      hex << "\\u{" << std::hex << std::uppercase << static_cast<uint32_t>(c) << "}";
      out += hex.str();
    }
  }
  return out.size() > 300 ? out.substr(0, 300) + "...(" + std::to_string(out.size()) + ")" : out;
}

// ids[from, from + 40) as "[...]" ("..." marks what is left out).
inline std::string IdList(const std::vector<int32_t>& ids, size_t from = 0) {
  std::string out = from > 0 ? "[..., " : "[";
  for (size_t i = from; i < ids.size() && i < from + 40; ++i) {
    out += (i > from ? ", " : "") + std::to_string(ids[i]);
  }
  return out + (ids.size() > from + 40 ? ", ...]" : "]");
}

// Where two id lists start to differ, less a few ids of context.
inline size_t ContextStart(const std::vector<int32_t>& a, const std::vector<int32_t>& b) {
  size_t i = 0;
  while (i < a.size() && i < b.size() && a[i] == b[i]) ++i;
  return i > 5 ? i - 5 : 0;
}

// Encodes every (not decode-only) case; fails with the first 5 mismatches.
inline void ExpectSameIds(const Tokenizer& tokenizer, const std::vector<TokenizerCase>& cases) {
  int mismatches = 0, compared = 0;
  for (const TokenizerCase& c : cases) {
    if (c.decode_only) continue;
    ++compared;
    const std::vector<int32_t> ids = tokenizer.Encode(c.text);
    if (ids == c.ids) continue;
    if (++mismatches <= 5) {
      const size_t from = ContextStart(c.ids, ids);
      ADD_FAILURE() << "text: \"" << EscapeText(c.text) << "\"\n  HF:   " << IdList(c.ids, from)
                    << "\n  ours: " << IdList(ids, from) << " (" << c.ids.size() << " vs "
                    << ids.size() << " ids)";
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << compared << " fixture strings";
}

// Decodes the ids of every case; fails with the first 5 mismatches.
inline void ExpectSameDecoded(const Tokenizer& tokenizer, const std::vector<TokenizerCase>& cases) {
  int mismatches = 0;
  for (const TokenizerCase& c : cases) {
    const std::string decoded = tokenizer.Decode(c.ids);
    if (decoded == c.decoded) continue;
    if (++mismatches <= 5) {
      ADD_FAILURE() << "ids " << IdList(c.ids) << "\n  HF:   \"" << EscapeText(c.decoded)
                    << "\"\n  ours: \"" << EscapeText(decoded) << "\"";
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << cases.size() << " fixture id lists";
}

// FNV-1a (64 bit), as tools/make_bpe_spm_tokenizer_fixtures.py computes it.
inline std::string Fnv1a64(std::string_view bytes) {
  uint64_t h = 0xCBF29CE484222325ULL;
  for (const char b : bytes) h = (h ^ static_cast<uint8_t>(b)) * 0x100000001B3ULL;
  std::ostringstream hex;
  hex << std::hex << std::setw(16) << std::setfill('0') << h;
  return hex.str();
}

// The long text of long_cases.json: the texts of the string cases in file
// order, that list 3 times, joined by "\n".
inline std::string LongText(const std::vector<TokenizerCase>& cases) {
  std::string text;
  size_t joined = 0;
  for (int round = 0; round < 3; ++round) {
    for (const TokenizerCase& c : cases) {
      if (c.decode_only) continue;
      if (joined++ > 0) text += '\n';
      text += c.text;
    }
  }
  return text;
}

// Encodes and decodes LongText(cases) and compares with `summary` (an entry
// of long_cases.json: n_ids, ids_fnv1a64 over little-endian uint32 ids,
// first_ids, last_ids, decoded_bytes, decoded_fnv1a64).
inline void ExpectSameLongCase(const Tokenizer& tokenizer, const std::vector<TokenizerCase>& cases,
                               const nlohmann::json& summary) {
  const std::vector<int32_t> ids = tokenizer.Encode(LongText(cases));
  std::string id_bytes;
  for (const int32_t id : ids) {
    for (int k = 0; k < 4; ++k) id_bytes.push_back(static_cast<char>((id >> (8 * k)) & 0xFF));
  }
  ASSERT_EQ(ids.size(), summary.at("n_ids").get<size_t>());
  const auto first = summary.at("first_ids").get<std::vector<int32_t>>();
  const auto last = summary.at("last_ids").get<std::vector<int32_t>>();
  EXPECT_EQ(std::vector<int32_t>(ids.begin(), ids.begin() + first.size()), first);
  EXPECT_EQ(std::vector<int32_t>(ids.end() - last.size(), ids.end()), last);
  EXPECT_EQ(Fnv1a64(id_bytes), summary.at("ids_fnv1a64"));
  const std::string decoded = tokenizer.Decode(ids);
  EXPECT_EQ(decoded.size(), summary.at("decoded_bytes").get<size_t>());
  EXPECT_EQ(Fnv1a64(decoded), summary.at("decoded_fnv1a64"));
}

// A scratch folder of this process (tests run in parallel on one machine).
inline std::filesystem::path ScratchDir(const std::string& name) {
  return std::filesystem::path(::testing::TempDir()) / (name + "." + std::to_string(getpid()));
}

}  // namespace docsparse::testing

#endif  // DOCSPARSE_TESTS_COMMON_TOKENIZER_CASES_H_
