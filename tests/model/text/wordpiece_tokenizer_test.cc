#include "model/text/wordpiece_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "model/text/unicode_text.h"
#include "nlohmann/json.hpp"

namespace docsparse {
namespace {

using Json = nlohmann::json;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kSourceDir = DOCSPARSE_SOURCE_DIR;
const std::string kModelDir = kSourceDir + "/models/minilm";
const std::string kFixtureDir = kSourceDir + "/tests/fixtures/tokenizer";

// The text with everything outside printable ASCII as \u{...}, so that a
// failure message shows exactly which code points were involved.
std::string Escape(std::string_view text) {
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

std::string Ids(const std::vector<int32_t>& ids) {
  std::string out = "[";
  for (size_t i = 0; i < ids.size() && i < 40; ++i) out += (i ? ", " : "") + std::to_string(ids[i]);
  return out + (ids.size() > 40 ? ", ...]" : "]");
}

struct Case {
  std::string text;
  std::vector<int32_t> ids;
  std::vector<int32_t> vocab_ids;  // What a vocab.txt-only BertTokenizer gives.
  std::string decoded;
};

std::vector<Case> ReadCases(const std::string& path) {
  std::ifstream in(path);
  std::vector<Case> cases;
  for (std::string line; std::getline(in, line);) {
    const Json row = Json::parse(line);
    Case c{row.at("text"), row.at("ids"), row.at("ids"), row.at("decoded")};
    if (row.contains("vocab_ids")) c.vocab_ids = row.at("vocab_ids").get<std::vector<int32_t>>();
    cases.push_back(std::move(c));
  }
  return cases;
}

// Encodes every case and reports the first mismatches, escaped.
void ExpectSameIds(const WordPieceTokenizer& tokenizer, const std::vector<Case>& cases,
                   bool use_vocab_ids) {
  int mismatches = 0;
  for (const Case& c : cases) {
    const std::vector<int32_t>& expected = use_vocab_ids ? c.vocab_ids : c.ids;
    const std::vector<int32_t> ids = tokenizer.Encode(c.text);
    if (ids == expected) continue;
    if (++mismatches <= 5) {
      ADD_FAILURE() << "text: \"" << Escape(c.text) << "\"\n  HF:   " << Ids(expected)
                    << "\n  ours: " << Ids(ids);
    }
  }
  EXPECT_EQ(mismatches, 0) << "of " << cases.size() << " fixture strings";
}

// A scratch folder of this process: engineers and CI run the tests in
// parallel on one machine.
std::filesystem::path ScratchDir() {
  return std::filesystem::path(::testing::TempDir()) /
         ("wordpiece_tokenizer_test." + std::to_string(getpid()));
}

std::string WriteTemp(const std::string& name, const std::string& contents) {
  const auto path = ScratchDir() / name;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << contents;
  return path.string();
}

Json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return Json::parse(in);
}

class WordPieceTokenizerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(std::filesystem::exists(kModelDir + "/tokenizer.json") &&
                std::filesystem::exists(kModelDir + "/vocab.txt"))
        << kModelDir << " is missing the default model's tokenizer: run scripts/setup";
    if (json_tokenizer_ == nullptr) {
      auto loaded = WordPieceTokenizer::FromTokenizerJson(kModelDir + "/tokenizer.json");
      ASSERT_TRUE(loaded.ok()) << loaded.status();
      json_tokenizer_ = std::move(loaded).value();
      auto options = WordPieceTokenizer::ReadTokenizerConfig(kModelDir + "/tokenizer_config.json");
      ASSERT_TRUE(options.ok()) << options.status();
      auto from_vocab = WordPieceTokenizer::FromVocabTxt(kModelDir + "/vocab.txt", *options);
      ASSERT_TRUE(from_vocab.ok()) << from_vocab.status();
      vocab_tokenizer_ = std::move(from_vocab).value();
    }
  }

  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(ScratchDir(), ignored);
  }

  // Loaded once for the whole suite: building the maps takes a while.
  static std::unique_ptr<WordPieceTokenizer> json_tokenizer_;
  static std::unique_ptr<WordPieceTokenizer> vocab_tokenizer_;
};
std::unique_ptr<WordPieceTokenizer> WordPieceTokenizerTest::json_tokenizer_;
std::unique_ptr<WordPieceTokenizer> WordPieceTokenizerTest::vocab_tokenizer_;

TEST_F(WordPieceTokenizerTest, TokenizerJsonMatchesHuggingFaceOnFixtures) {
  const std::vector<Case> cases = ReadCases(kFixtureDir + "/wordpiece_minilm.jsonl");
  ASSERT_GE(cases.size(), 400u) << "run tools/make_tokenizer_fixtures.py";
  ExpectSameIds(*json_tokenizer_, cases, /*use_vocab_ids=*/false);
}

TEST_F(WordPieceTokenizerTest, VocabTxtMatchesTransformersOnFixtures) {
  const std::vector<Case> cases = ReadCases(kFixtureDir + "/wordpiece_minilm.jsonl");
  ASSERT_GE(cases.size(), 400u);
  ExpectSameIds(*vocab_tokenizer_, cases, /*use_vocab_ids=*/true);
}

TEST_F(WordPieceTokenizerTest, DecodeMatchesHuggingFaceOnFixtures) {
  int mismatches = 0;
  for (const Case& c : ReadCases(kFixtureDir + "/wordpiece_minilm.jsonl")) {
    const std::string decoded = json_tokenizer_->Decode(c.ids);
    if (decoded != c.decoded && ++mismatches <= 5) {
      ADD_FAILURE() << "ids " << Ids(c.ids) << "\n  HF:   \"" << Escape(c.decoded)
                    << "\"\n  ours: \"" << Escape(decoded) << "\"";
    }
    EXPECT_EQ(vocab_tokenizer_->Decode(c.ids), decoded);
  }
  EXPECT_EQ(mismatches, 0);
}

// Other settings of the same tokenizer.json (see
// tools/make_tokenizer_fixtures.py): cased, accents kept, no clean_text, no
// normalizer/pre-tokenizer/decoder, and added tokens with
// lstrip/rstrip/single_word/normalized.
TEST_F(WordPieceTokenizerTest, VariantsMatchHuggingFace) {
  const Json base = ReadJson(kModelDir + "/tokenizer.json");
  const Json variants = ReadJson(kFixtureDir + "/variants.json");
  ASSERT_GE(variants.size(), 5u);
  for (const Json& variant : variants) {
    SCOPED_TRACE(variant.at("name").get<std::string>());
    Json config = base;
    for (const auto& [key, value] : variant.at("patch").items()) {
      if (key == "extra_added_tokens") {
        for (const Json& token : value) config["added_tokens"].push_back(token);
      } else {
        config[key] = value;
      }
    }
    auto tokenizer = WordPieceTokenizer::FromTokenizerJson(
        WriteTemp(variant.at("name").get<std::string>() + ".json", config.dump()));
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    std::vector<Case> cases;
    for (const Json& c : variant.at("cases")) {
      cases.push_back({c.at("text"), c.at("ids"), c.at("ids"), c.at("decoded")});
    }
    ExpectSameIds(**tokenizer, cases, /*use_vocab_ids=*/false);
    for (const Case& c : cases) {
      EXPECT_EQ((*tokenizer)->Decode(c.ids), c.decoded) << Escape(c.text);
    }
  }
}

TEST_F(WordPieceTokenizerTest, SpecialTokenIdsAndVocabSize) {
  for (const WordPieceTokenizer* tokenizer : {json_tokenizer_.get(), vocab_tokenizer_.get()}) {
    const SpecialTokenIds& special = tokenizer->special_tokens();
    EXPECT_EQ(special.pad, 0);
    EXPECT_EQ(special.unk, 100);
    EXPECT_EQ(special.cls, 101);
    EXPECT_EQ(special.sep, 102);
    EXPECT_EQ(special.mask, 103);
    EXPECT_EQ(tokenizer->vocab_size(), 30522);
    EXPECT_EQ(tokenizer->TokenToId("##ing"), 2075);
    EXPECT_EQ(tokenizer->IdToToken(2075), "##ing");
    EXPECT_EQ(tokenizer->IdToToken(30522), std::nullopt);
    EXPECT_EQ(tokenizer->IdToToken(-1), std::nullopt);
  }
}

TEST_F(WordPieceTokenizerTest, EncodesWordPiecesAndSpecialTokens) {
  const WordPieceTokenizer& tok = *json_tokenizer_;
  EXPECT_THAT(tok.Encode("Hello, world!"), ElementsAre(7592, 1010, 2088, 999));
  EXPECT_THAT(tok.Encode("tokenization docsparse"),
              ElementsAre(19204, 3989, 9986, 27694, 3366));  // ##-continued pieces.
  EXPECT_THAT(tok.Encode("The capital is [MASK]."), ElementsAre(1996, 3007, 2003, 103, 1012));
  // Special tokens match the raw text only: "[cls]" is punctuation + word.
  EXPECT_THAT(tok.Encode("[cls]"), ElementsAre(1031, 18856, 2015, 1033));
  EXPECT_THAT(tok.Encode(""), ElementsAre());
  EXPECT_THAT(tok.Encode(" \t\u200b\n"), ElementsAre());
  // max_input_chars_per_word counts code points after normalization.
  EXPECT_EQ(tok.Encode(std::string(100, 'a')).size(), 50u);
  EXPECT_THAT(tok.Encode(std::string(101, 'a')), ElementsAre(100));
  EXPECT_THAT(tok.Encode("xyzzy\xe2\x98\x83"),
              ElementsAre(100));  // One bad piece: all [UNK].
}

TEST_F(WordPieceTokenizerTest, FrameAddsSpecialTokensAndTruncatesFromTheEnd) {
  const std::vector<int32_t> ids = json_tokenizer_->Encode("one two three four five");
  ASSERT_THAT(ids, ElementsAre(2028, 2048, 2093, 2176, 2274));
  EXPECT_THAT(json_tokenizer_->Frame(ids, 512),
              ElementsAre(101, 2028, 2048, 2093, 2176, 2274, 102));
  EXPECT_THAT(json_tokenizer_->Frame(ids, 7), ElementsAre(101, 2028, 2048, 2093, 2176, 2274, 102));
  EXPECT_THAT(json_tokenizer_->Frame(ids, 4), ElementsAre(101, 2028, 2048, 102));
  EXPECT_THAT(json_tokenizer_->Frame(ids, 2), ElementsAre(101, 102));
  EXPECT_THAT(json_tokenizer_->Frame({}, 8), ElementsAre(101, 102));
}

TEST_F(WordPieceTokenizerTest, DecodeMergesPiecesCleansUpAndSkipsSpecialTokens) {
  const WordPieceTokenizer& tok = *json_tokenizer_;
  EXPECT_EQ(tok.Decode(tok.Encode("Tokenization docsparse")), "tokenization docsparse");
  // HF cleans up each token on its own, so " ' " never matches.
  EXPECT_EQ(tok.Decode(tok.Encode("Unbelievable, isn't it? I'm sure.")),
            "unbelievable, isn ' t it? i ' m sure.");
  EXPECT_EQ(tok.Decode({101, 7592, 103, 2088, 102, 0}), "hello world");
  EXPECT_EQ(tok.Decode({7592, -5, 1 << 30, 2088}),
            "hello world");  // Unknown ids dropped.
  EXPECT_EQ(tok.Decode({}), "");
}

TEST_F(WordPieceTokenizerTest, FromModelDirPrefersTokenizerJson) {
  auto from_dir = WordPieceTokenizer::FromModelDir(kModelDir);
  ASSERT_TRUE(from_dir.ok()) << from_dir.status();
  EXPECT_EQ((*from_dir)->Encode("Straße İstanbul"), json_tokenizer_->Encode("Straße İstanbul"));

  // A broken tokenizer.json is reported, not silently replaced by vocab.txt.
  const auto dir = std::filesystem::path(WriteTemp("prefers/tokenizer.json", "{")).parent_path();
  std::filesystem::copy_file(kModelDir + "/vocab.txt", dir / "vocab.txt",
                             std::filesystem::copy_options::overwrite_existing);
  auto broken = WordPieceTokenizer::FromModelDir(dir.string());
  EXPECT_THAT(broken.status().message(), HasSubstr("tokenizer.json: not valid JSON"));

  // Without tokenizer.json, vocab.txt and tokenizer_config.json are used.
  std::filesystem::remove(dir / "tokenizer.json");
  WriteTemp("prefers/tokenizer_config.json", R"({"do_lower_case": false})");
  auto cased = WordPieceTokenizer::FromModelDir(dir.string());
  ASSERT_TRUE(cased.ok()) << cased.status();
  EXPECT_THAT((*cased)->Encode("Hello hello"), ElementsAre(100, 7592));
}

// Loading errors; needs no model.
class WordPieceTokenizerErrorsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(ScratchDir(), ignored);
  }
};

TEST_F(WordPieceTokenizerErrorsTest, MissingFilesAreNotFound) {
  auto missing = WordPieceTokenizer::FromVocabTxt("/nonexistent/vocab.txt", {});
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(missing.status().message(), HasSubstr("/nonexistent/vocab.txt"));
  auto json = WordPieceTokenizer::FromTokenizerJson("/nonexistent/tokenizer.json");
  EXPECT_EQ(json.status().code(), absl::StatusCode::kNotFound);
  const auto empty_dir = ScratchDir() / "empty_model_dir";
  std::filesystem::create_directories(empty_dir);
  auto dir = WordPieceTokenizer::FromModelDir(empty_dir.string());
  EXPECT_EQ(dir.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(dir.status().message(), HasSubstr("no tokenizer.json or vocab.txt"));
}

TEST_F(WordPieceTokenizerErrorsTest, MalformedTokenizerJsonNamesFileAndField) {
  const Json good = Json::parse(R"({
    "added_tokens": [{"id": 0, "content": "[UNK]", "special": true, "normalized": false}],
    "normalizer": {"type": "BertNormalizer", "lowercase": true},
    "pre_tokenizer": {"type": "BertPreTokenizer"},
    "decoder": {"type": "WordPiece", "prefix": "##", "cleanup": true},
    "model": {"type": "WordPiece", "unk_token": "[UNK]",
              "vocab": {"[UNK]": 0, "a": 1, "##b": 2}}})");
  auto ok = WordPieceTokenizer::FromTokenizerJson(WriteTemp("good.json", good.dump()));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_THAT((*ok)->Encode("AB a c"), ElementsAre(1, 2, 1, 0));

  const struct {
    const char* pointer;  // JSON pointer of the field to replace.
    Json value;
    const char* message;
  } cases[] = {
      {"/model/type", "BPE", "model.type is 'BPE', expected 'WordPiece'"},
      {"/model/vocab", Json::array(), "model.vocab is missing or not an object"},
      {"/model/vocab/a", "one", "model.vocab[\"a\"] is not an integer"},
      {"/model/unk_token", "<unk>", "the unknown token '<unk>' is not in the vocabulary"},
      {"/model/max_input_chars_per_word", -1, "model.max_input_chars_per_word is not an integer"},
      {"/normalizer/type", "NFKC", "normalizer.type is 'NFKC', expected 'BertNormalizer'"},
      {"/normalizer/lowercase", "yes", "normalizer.lowercase is not a boolean"},
      {"/pre_tokenizer/type", "Whitespace", "pre_tokenizer.type is 'Whitespace'"},
      {"/decoder/type", "ByteLevel", "decoder.type is 'ByteLevel'"},
      {"/added_tokens", Json::object(), "added_tokens is not an array"},
      {"/added_tokens/0/content", 7, "added_tokens[0].content is not a string"},
  };
  for (const auto& c : cases) {
    Json bad = good;
    bad[Json::json_pointer(c.pointer)] = c.value;
    const std::string path = WriteTemp("bad.json", bad.dump());
    auto result = WordPieceTokenizer::FromTokenizerJson(path);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << c.pointer;
    EXPECT_THAT(result.status().message(), HasSubstr(path + ": " + c.message)) << c.pointer;
  }
  Json no_model = good;
  no_model.erase("model");
  auto result = WordPieceTokenizer::FromTokenizerJson(WriteTemp("bad.json", no_model.dump()));
  EXPECT_THAT(result.status().message(), HasSubstr("model.type is missing"));
  result = WordPieceTokenizer::FromTokenizerJson(WriteTemp("bad.json", "[1, 2"));
  EXPECT_THAT(result.status().message(), HasSubstr("not valid JSON"));
  result = WordPieceTokenizer::FromTokenizerJson(WriteTemp("bad.json", "[1, 2]"));
  EXPECT_THAT(result.status().message(), HasSubstr("top level is not a JSON object"));
}

TEST_F(WordPieceTokenizerErrorsTest, VocabTxtWithoutUnknownTokenIsRejected) {
  const std::string path = WriteTemp("vocab.txt", "[PAD]\r\nhello\nworld\n");
  auto result = WordPieceTokenizer::FromVocabTxt(path, {});
  EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(result.status().message(), HasSubstr("'[UNK]' is not in the vocabulary"));
  WordPieceOptions options;
  options.unk_token = "[PAD]";
  result = WordPieceTokenizer::FromVocabTxt(path, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT((*result)->Encode("Hello world!"), ElementsAre(1, 2, 0));
  // The special tokens missing from the file get ids after it.
  EXPECT_EQ((*result)->special_tokens().sep, 3);
  EXPECT_EQ((*result)->vocab_size(), 6);

  auto config = WordPieceTokenizer::ReadTokenizerConfig(
      WriteTemp("tokenizer_config.json", R"({"do_lower_case": "no"})"));
  EXPECT_THAT(config.status().message(),
              HasSubstr("tokenizer_config.json: do_lower_case is not a boolean"));
}

// Random valid text never crashes Encode and gives ids inside the vocabulary;
// invalid UTF-8 (outside the contract) must not crash either.
TEST_F(WordPieceTokenizerTest, FuzzEncodeNeverCrashes) {
  std::mt19937 rng(20240917);
  const char32_t pools[][2] = {{0x20, 0x7E},     {0x00, 0x20},       {0xA0, 0x24F},
                               {0x300, 0x36F},   {0x370, 0x4FF},     {0x2000, 0x206F},
                               {0x3000, 0x30FF}, {0x4E00, 0x9FFF},   {0xAC00, 0xD7A3},
                               {0xFE00, 0xFFFF}, {0x1F300, 0x1FAFF}, {0x10000, 0x10FFFF}};
  for (int round = 0; round < 2000; ++round) {
    std::u32string text;
    const int length = std::uniform_int_distribution<int>(0, 60)(rng);
    for (int i = 0; i < length; ++i) {
      const auto& pool = pools[std::uniform_int_distribution<size_t>(0, 11)(rng)];
      char32_t c = std::uniform_int_distribution<char32_t>(pool[0], pool[1])(rng);
      if (c >= 0xD800 && c <= 0xDFFF) c = 'x';
      text.push_back(c);
    }
    const std::string utf8 = EncodeUtf8(text) + (round % 7 == 0 ? "[MASK]" : "");
    for (const int32_t id : json_tokenizer_->Encode(utf8)) {
      ASSERT_GE(id, 0);
      ASSERT_LT(id, json_tokenizer_->vocab_size()) << Escape(utf8);
    }
    json_tokenizer_->Decode(json_tokenizer_->Encode(utf8));

    std::string bytes(std::uniform_int_distribution<size_t>(0, 40)(rng), '\0');
    for (char& b : bytes) b = static_cast<char>(rng());
    for (const int32_t id : json_tokenizer_->Encode(bytes)) ASSERT_LT(id, 30522);
  }
}

}  // namespace
}  // namespace docsparse
