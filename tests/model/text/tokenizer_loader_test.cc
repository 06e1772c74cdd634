#include "model/text/tokenizer_loader.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "model/text/bpe_tokenizer.h"
#include "model/text/sentencepiece_tokenizer.h"
#include "model/text/wordpiece_tokenizer.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/tokenizer_cases.h"

namespace docsparse {
namespace {

namespace fs = std::filesystem;
using ::docsparse::testing::FixturePath;
using ::testing::HasSubstr;
using ::testing::NotNull;

class TokenizerLoaderTest : public ::testing::Test {
 protected:
  void TearDown() override {
    std::error_code ignored;
    fs::remove_all(Scratch(), ignored);
  }
  static fs::path Scratch() { return ::docsparse::testing::ScratchDir("tokenizer_loader_test"); }

  // A folder with copies of `files` (source paths) and, optionally, a file
  // written from `name`/`contents`.
  static std::string Folder(const std::string& folder, const std::vector<std::string>& files,
                            const std::string& name = "", const std::string& contents = "") {
    const fs::path dir = Scratch() / folder;
    fs::create_directories(dir);
    for (const std::string& file : files) {
      fs::copy_file(file, dir / fs::path(file).filename(), fs::copy_options::overwrite_existing);
    }
    if (!name.empty()) std::ofstream(dir / name) << contents;
    return dir.string();
  }
};

TEST_F(TokenizerLoaderTest, PicksTheTokenizerFromTheFiles) {
  auto bart = LoadTokenizer(FixturePath("bpe_spm/bart_tokenizer"));
  ASSERT_TRUE(bart.ok()) << bart.status();
  EXPECT_THAT(dynamic_cast<const BpeTokenizer*>(bart->get()), NotNull());

  auto pegasus = LoadTokenizer(FixturePath("bpe_spm/pegasus_tokenizer"));
  ASSERT_TRUE(pegasus.ok()) << pegasus.status();
  EXPECT_THAT(dynamic_cast<const SentencePieceTokenizer*>(pegasus->get()), NotNull());
  EXPECT_EQ((*pegasus)->Frame({200}, 8), (std::vector<int32_t>{200, 1}));

  // A Pegasus folder as the hub has it: spiece.model beside a Unigram
  // tokenizer.json, which we leave to SentencePiece.
  const std::string spiece = FixturePath("bpe_spm/pegasus_tokenizer/spiece.model");
  auto both = LoadTokenizer(
      Folder("both", {spiece}, "tokenizer.json", R"({"model": {"type": "Unigram"}})"));
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_THAT(dynamic_cast<const SentencePieceTokenizer*>(both->get()), NotNull());

  ASSERT_TRUE(::docsparse::testing::MiniLmPresent());
  auto minilm = LoadTokenizer(::docsparse::testing::MiniLmDir());
  ASSERT_TRUE(minilm.ok()) << minilm.status();
  EXPECT_THAT(dynamic_cast<const WordPieceTokenizer*>(minilm->get()), NotNull());
  auto vocab_only =
      LoadTokenizer(Folder("vocab", {::docsparse::testing::MiniLmDir() + "/vocab.txt"}));
  ASSERT_TRUE(vocab_only.ok()) << vocab_only.status();
  EXPECT_THAT(dynamic_cast<const WordPieceTokenizer*>(vocab_only->get()), NotNull());
}

TEST_F(TokenizerLoaderTest, ErrorsNameTheFolderOrTheFile) {
  auto empty = LoadTokenizer(Folder("empty", {}));
  EXPECT_EQ(empty.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(empty.status().message(), HasSubstr("no tokenizer.json, spiece.model or vocab.txt"));

  // A broken tokenizer.json is reported, not replaced by spiece.model.
  const std::string spiece = FixturePath("bpe_spm/pegasus_tokenizer/spiece.model");
  auto broken = LoadTokenizer(Folder("broken", {spiece}, "tokenizer.json", "{"));
  EXPECT_THAT(broken.status().message(), HasSubstr("tokenizer.json: not valid JSON"));

  auto unigram =
      LoadTokenizer(Folder("unigram", {}, "tokenizer.json", R"({"model": {"type": "Unigram"}})"));
  EXPECT_THAT(unigram.status().message(),
              HasSubstr("tokenizer.json: model.type is 'Unigram', expected WordPiece, BPE, or "
                        "Unigram beside a spiece.model"));
  auto no_model = LoadTokenizer(Folder("no_model", {}, "tokenizer.json", R"({"version": "1.0"})"));
  EXPECT_THAT(no_model.status().message(), HasSubstr("tokenizer.json: model is missing"));
  auto bad_type =
      LoadTokenizer(Folder("bad_type", {}, "tokenizer.json", R"({"model": {"type": ["BPE"]}})"));
  EXPECT_THAT(bad_type.status().message(), HasSubstr("tokenizer.json: model.type is not a string"));
}

}  // namespace
}  // namespace docsparse
