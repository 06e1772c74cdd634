#include "model/text/bpe_tokenizer.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "model/text/tokenizer_files.h"
#include "nlohmann/json.hpp"
#include "tests/common/fixture_paths.h"
#include "tests/common/tokenizer_cases.h"

namespace docsparse {
namespace {

using Json = nlohmann::json;
using ::docsparse::testing::FixturePath;
using ::docsparse::testing::TokenizerCase;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kBartDir = FixturePath("bpe_spm/bart_tokenizer");

Json ReadJson(const std::string& path) {
  std::ifstream in(path);
  return Json::parse(in);
}

std::string WriteTemp(const std::string& name, const std::string& contents) {
  const auto path = ::docsparse::testing::ScratchDir("bpe_tokenizer_test") / name;
  std::filesystem::create_directories(path.parent_path());
  std::ofstream(path, std::ios::binary) << contents;
  return path.string();
}

// The patches of tools/make_bpe_spm_tokenizer_fixtures.py (apply_bpe_patch).
Json ApplyPatch(Json config, const Json& patch) {
  if (patch.contains("set")) {
    for (const auto& [pointer, value] : patch.at("set").items()) {
      config[Json::json_pointer(pointer)] = value;
    }
  }
  if (patch.contains("remove_vocab")) {
    for (const Json& token : patch.at("remove_vocab")) {
      config["model"]["vocab"].erase(token.get<std::string>());
    }
  }
  if (patch.value("legacy_merges", false)) {
    Json merges = Json::array();
    for (const Json& pair : config["model"]["merges"]) {
      merges.push_back(pair[0].get<std::string>() + " " + pair[1].get<std::string>());
    }
    config["model"]["merges"] = merges;
  }
  if (patch.contains("append_added_tokens")) {
    for (const Json& token : patch.at("append_added_tokens")) {
      config["added_tokens"].push_back(token);
    }
  }
  return config;
}

class BpeTokenizerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto loaded = BpeTokenizer::FromModelDir(kBartDir);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    tokenizer_ = std::move(loaded).value().release();
    cases_ = new std::vector<TokenizerCase>(
        ::docsparse::testing::ReadTokenizerCases(FixturePath("bpe_spm/bart_cases.jsonl")));
  }
  static void TearDownTestSuite() {
    delete tokenizer_;
    delete cases_;
  }
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(::docsparse::testing::ScratchDir("bpe_tokenizer_test"), ignored);
  }

  // Loaded once: the fixture tokenizer has 4k tokens and 3.7k merges.
  static const BpeTokenizer* tokenizer_;
  static const std::vector<TokenizerCase>* cases_;
};
const BpeTokenizer* BpeTokenizerTest::tokenizer_ = nullptr;
const std::vector<TokenizerCase>* BpeTokenizerTest::cases_ = nullptr;

TEST_F(BpeTokenizerTest, EncodeMatchesHuggingFaceOnFixtures) {
  int strings = 0;
  for (const TokenizerCase& c : *cases_) strings += c.decode_only ? 0 : 1;
  ASSERT_GE(strings, 300) << "run tools/make_bpe_spm_tokenizer_fixtures.py";
  ::docsparse::testing::ExpectSameIds(*tokenizer_, *cases_);
}

TEST_F(BpeTokenizerTest, DecodeMatchesTransformersOnFixtures) {
  ::docsparse::testing::ExpectSameDecoded(*tokenizer_, *cases_);
}

TEST_F(BpeTokenizerTest, FrameMatchesTransformers) {
  int framed = 0;
  for (const TokenizerCase& c : *cases_) {
    if (!c.framed.has_value()) continue;
    ++framed;
    EXPECT_EQ(tokenizer_->Frame(c.ids, 1 << 20), *c.framed)
        << ::docsparse::testing::EscapeText(c.text);
  }
  EXPECT_GE(framed, 200);
  // Truncation keeps the special tokens and cuts ids from the end.
  EXPECT_THAT(tokenizer_->Frame({10, 11, 12, 13}, 4), ElementsAre(0, 10, 11, 2));
  EXPECT_THAT(tokenizer_->Frame({10, 11}, 1), ElementsAre(0, 2));
}

// The same tokenizer.json with other settings (see the fixture script):
// add_prefix_space, no regex, legacy merges, ignore_merges, unk_token with
// and without fuse_unk, no decoder, added tokens with every flag, and the
// tokenizer_config.json clean-up flags.
TEST_F(BpeTokenizerTest, VariantsMatchHuggingFace) {
  const Json base = ReadJson(kBartDir + "/tokenizer.json");
  const Json base_config = ReadJson(kBartDir + "/tokenizer_config.json");
  const Json variants = ReadJson(FixturePath("bpe_spm/bart_variants.json"));
  ASSERT_GE(variants.size(), 12u);
  for (const Json& variant : variants) {
    const std::string name = variant.at("name");
    SCOPED_TRACE(name);
    const std::string dir = name + "/";
    WriteTemp(dir + "tokenizer.json", ApplyPatch(base, variant.at("patch")).dump());
    Json config = base_config;
    config.update(variant.at("config_patch"));
    WriteTemp(dir + "tokenizer_config.json", config.dump());
    auto tokenizer = BpeTokenizer::FromModelDir(
        (::docsparse::testing::ScratchDir("bpe_tokenizer_test") / name).string());
    ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
    std::vector<TokenizerCase> cases;
    for (const Json& c : variant.at("cases")) {
      TokenizerCase one;
      one.text = c.at("text");
      one.ids = c.at("ids").get<std::vector<int32_t>>();
      one.decoded = c.at("decoded");
      cases.push_back(std::move(one));
    }
    ::docsparse::testing::ExpectSameIds(**tokenizer, cases);
    ::docsparse::testing::ExpectSameDecoded(**tokenizer, cases);
  }
}

// One text of about 120k characters, through the paths short strings do not reach.
TEST_F(BpeTokenizerTest, LongTextMatchesHuggingFace) {
  std::ifstream in(FixturePath("bpe_spm/long_cases.json"));
  const nlohmann::json summary = nlohmann::json::parse(in).at("bart");
  ::docsparse::testing::ExpectSameLongCase(*tokenizer_, *cases_, summary);
}

TEST_F(BpeTokenizerTest, SpecialTokenIdsAndVocabSize) {
  const SpecialTokenIds& special = tokenizer_->special_tokens();
  EXPECT_EQ(special.cls, 0);  // <s>
  EXPECT_EQ(special.pad, 1);  // <pad>
  EXPECT_EQ(special.sep, 2);  // </s>
  EXPECT_EQ(special.unk, 3);  // <unk>
  EXPECT_EQ(special.mask, 4000);
  EXPECT_EQ(tokenizer_->vocab_size(), 4001);
  EXPECT_EQ(tokenizer_->TokenToId("<mask>"), 4000);
  EXPECT_EQ(tokenizer_->IdToToken(4000), "<mask>");
  EXPECT_EQ(tokenizer_->IdToToken(4001), std::nullopt);
  EXPECT_EQ(tokenizer_->IdToToken(-1), std::nullopt);
  EXPECT_EQ(tokenizer_->TokenToId("no such token"), -1);
}

TEST_F(BpeTokenizerTest, EncodesSpecialTokensAndDecodesWithoutThem) {
  const std::vector<int32_t> ids = tokenizer_->Encode("The capital is <mask>.");
  ASSERT_GE(ids.size(), 2u);
  // <mask> has lstrip: it swallows the space before it.
  EXPECT_EQ(ids[ids.size() - 2], 4000);
  EXPECT_EQ(tokenizer_->Decode(ids), "The capital is.");
  EXPECT_EQ(tokenizer_->Decode(tokenizer_->Frame(tokenizer_->Encode("Hello world"), 64)),
            "Hello world");
  EXPECT_EQ(tokenizer_->Decode({-1, 1 << 30}), "");  // Unknown ids are skipped.
  EXPECT_THAT(tokenizer_->Encode(""), ElementsAre());
}

TEST_F(BpeTokenizerTest, ConcurrentEncodeGivesTheSameIds) {
  std::vector<std::string> texts;
  std::vector<std::vector<int32_t>> expected;
  for (const TokenizerCase& c : *cases_) {
    if (c.decode_only) continue;
    texts.push_back(c.text);
    expected.push_back(c.ids);
  }
  std::vector<int> mismatches(4, 0);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&, t] {
      for (int round = 0; round < 3; ++round) {
        for (size_t i = t; i < texts.size() + t; ++i) {
          const size_t k = i % texts.size();
          if (tokenizer_->Encode(texts[k]) != expected[k]) ++mismatches[t];
        }
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_THAT(mismatches, ElementsAre(0, 0, 0, 0));
}

// Loading errors; the files are small hand-written tokenizers.
class BpeTokenizerErrorsTest : public ::testing::Test {
 protected:
  void TearDown() override {
    std::error_code ignored;
    std::filesystem::remove_all(::docsparse::testing::ScratchDir("bpe_tokenizer_test"), ignored);
  }

  // A minimal byte-level tokenizer: every byte's character, "Ġ" + "t" and
  // "Ġt" + "h" merges.
  static Json SmallTokenizer() {
    Json tokenizer = Json::parse(R"({
      "version": "1.0",
      "added_tokens": [{"id": 0, "content": "<s>", "special": true},
                       {"id": 1, "content": "</s>", "special": true}],
      "normalizer": null,
      "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": false,
                        "trim_offsets": true, "use_regex": true},
      "post_processor": {"type": "RobertaProcessing", "sep": ["</s>", 1], "cls": ["<s>", 0],
                         "trim_offsets": true, "add_prefix_space": false},
      "decoder": {"type": "ByteLevel"},
      "model": {"type": "BPE", "dropout": null, "unk_token": null,
                "continuing_subword_prefix": "", "end_of_word_suffix": "",
                "fuse_unk": false, "byte_fallback": false,
                "merges": [["\u0120", "t"], ["\u0120t", "h"]]}})");
    Json& vocab = tokenizer["model"]["vocab"];
    vocab["<s>"] = 0;
    vocab["</s>"] = 1;
    vocab["<unk>"] = 2;
    for (int b = 0; b < 256; ++b) vocab[ByteLevelCharForTest(b)] = 3 + b;
    vocab["\xc4\xa0t"] = 259;  // "Ġt"
    vocab["\xc4\xa0th"] = 260;
    return tokenizer;
  }

  static std::string ByteLevelCharForTest(int b) {
    // GPT-2's table: printable Latin-1 bytes stand for themselves.
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    int n = 0;
    for (int k = 0; k < b; ++k) {
      n += (k >= '!' && k <= '~') || (k >= 0xA1 && k <= 0xAC) || k >= 0xAE ? 0 : 1;
    }
    std::string out;
    AppendUtf8(printable ? static_cast<char32_t>(b) : static_cast<char32_t>(0x100 + n), &out);
    return out;
  }
};

TEST_F(BpeTokenizerErrorsTest, SmallTokenizerWorks) {
  auto tok = BpeTokenizer::FromTokenizerJson(WriteTemp("good.json", SmallTokenizer().dump()));
  ASSERT_TRUE(tok.ok()) << tok.status();
  // " the" -> "Ġth" + "e"; "a" alone.
  EXPECT_THAT((*tok)->Encode("a the"), ElementsAre(3 + 'a', 260, 3 + 'e'));
  EXPECT_EQ((*tok)->Decode({0, 3 + 'a', 260, 3 + 'e', 1}), "a the");
  EXPECT_THAT((*tok)->Frame({5}, 10), ElementsAre(0, 5, 1));
}

TEST_F(BpeTokenizerErrorsTest, MalformedTokenizerJsonNamesFileAndField) {
  const Json good = SmallTokenizer();
  const struct {
    const char* pointer;  // JSON pointer of the field to replace.
    Json value;
    const char* message;
  } cases[] = {
      {"/model/type", "WordPiece", "model.type is 'WordPiece', expected 'BPE'"},
      {"/model/vocab", Json::array(), "model.vocab is missing or not an object"},
      {"/model/vocab/a", "one", "model.vocab['a'] is not an integer"},
      {"/model/vocab/a", -3, "model.vocab['a'] is not an integer"},
      {"/model/merges", Json::object(), "model.merges is missing or not an array"},
      {"/model/merges/0", "\u0120 t x", "model.merges[0] is not two tokens"},
      {"/model/merges/0", Json::array({"x", 1}), "model.merges[0] is neither"},
      {"/model/merges/1", Json::array({"\u0120t", "zz"}),
       "model.merges[1] 'zz' is not in the vocabulary"},
      {"/model/merges/1", Json::array({"a", "b"}), "model.merges[1] 'ab' is not in the vocab"},
      {"/model/dropout", 0.1, "model.dropout must be null"},
      {"/model/byte_fallback", true, "model.byte_fallback is true (unsupported)"},
      {"/model/continuing_subword_prefix", "##", "model.continuing_subword_prefix is '##'"},
      {"/model/end_of_word_suffix", "</w>", "model.end_of_word_suffix is '</w>'"},
      {"/model/unk_token", "<nope>", "model.unk_token '<nope>' is not in the vocabulary"},
      {"/model/fuse_unk", "yes", "model.fuse_unk is not a boolean"},
      {"/normalizer", Json{{"type", "NFC"}}, "normalizer.type is 'NFC', expected null"},
      {"/pre_tokenizer/type", "Whitespace", "pre_tokenizer.type is 'Whitespace'"},
      {"/pre_tokenizer", nullptr, "pre_tokenizer.type is missing, expected 'ByteLevel'"},
      {"/pre_tokenizer/add_prefix_space", nullptr, "pre_tokenizer.add_prefix_space is missing"},
      {"/pre_tokenizer/use_regex", 1, "pre_tokenizer.use_regex is not a boolean"},
      {"/decoder/type", "WordPiece", "decoder.type is 'WordPiece', expected 'ByteLevel' or null"},
      {"/post_processor/type", "Nope", "post_processor.type is 'Nope'"},
      {"/post_processor/cls", Json::array({"<s>", 9999}), "post_processor.cls[1] is not a token"},
      {"/post_processor/sep", "</s>", "post_processor.sep is not a [token, id] pair"},
      {"/added_tokens", Json::object(), "added_tokens is not an array"},
      {"/added_tokens/1/content", 7, "added_tokens[1].content is not a string"},
      {"/added_tokens/1/lstrip", "no", "added_tokens[1].lstrip is not a boolean"},
  };
  for (const auto& c : cases) {
    Json bad = good;
    bad[Json::json_pointer(c.pointer)] = c.value;
    const std::string path = WriteTemp("bad.json", bad.dump());
    auto result = BpeTokenizer::FromTokenizerJson(path);
    EXPECT_EQ(result.status().code(), absl::StatusCode::kInvalidArgument) << c.pointer;
    EXPECT_THAT(result.status().message(), HasSubstr(path + ": " + c.message)) << c.pointer;
  }

  Json template_processing = good;
  template_processing["post_processor"] = Json::parse(R"({"type": "TemplateProcessing",
      "single": [{"SpecialToken": {"id": "<s>", "type_id": 0}},
                 {"Sequence": {"id": "A", "type_id": 0}},
                 {"SpecialToken": {"id": "</x>", "type_id": 0}}],
      "special_tokens": {"<s>": {"id": "<s>", "ids": [0], "tokens": ["<s>"]}}})");
  auto result = BpeTokenizer::FromTokenizerJson(WriteTemp("bad.json", template_processing.dump()));
  EXPECT_THAT(result.status().message(),
              HasSubstr("post_processor.special_tokens['</x>'].ids is missing"));
  template_processing["post_processor"]["special_tokens"]["</x>"] = {{"ids", {1}}};
  result = BpeTokenizer::FromTokenizerJson(WriteTemp("good.json", template_processing.dump()));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_THAT((*result)->Frame({7}, 10), ElementsAre(0, 7, 1));

  result = BpeTokenizer::FromTokenizerJson(WriteTemp("bad.json", "{\"model\": "));
  EXPECT_THAT(result.status().message(), HasSubstr("not valid JSON"));
  result = BpeTokenizer::FromTokenizerJson(WriteTemp("bad.json", "[]"));
  EXPECT_THAT(result.status().message(), HasSubstr("top level is not a JSON object"));
  result = BpeTokenizer::FromTokenizerJson("/nonexistent/tokenizer.json");
  EXPECT_EQ(result.status().code(), absl::StatusCode::kNotFound);

  // tokenizer_config.json errors name that file.
  const std::string dir =
      std::filesystem::path(WriteTemp("dir/tokenizer.json", good.dump())).parent_path().string();
  WriteTemp("dir/tokenizer_config.json", R"({"clean_up_tokenization_spaces": "yes"})");
  result = BpeTokenizer::FromModelDir(dir);
  EXPECT_THAT(result.status().message(),
              HasSubstr("tokenizer_config.json: clean_up_tokenization_spaces is not a boolean"));
  WriteTemp("dir/tokenizer_config.json", R"({"mask_token": {"lstrip": true}})");
  result = BpeTokenizer::FromModelDir(dir);
  EXPECT_THAT(result.status().message(),
              HasSubstr("tokenizer_config.json: mask_token.content is missing"));
}

}  // namespace
}  // namespace docsparse
