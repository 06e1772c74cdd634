// convert/special_tokens.h: the ids transformers' AutoTokenizer would give.
#include "convert/special_tokens.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "convert/model_files.h"
#include "tests/common/fixture_paths.h"
#include "tests/convert/convert_test_util.h"

namespace docsparse::convert {
namespace {

using ::testing::HasSubstr;

TEST(SpecialTokensTest, BertHasClsAndMaskButNoBos) {
  absl::StatusOr<ConverterSpecialTokens> t =
      ReadSpecialTokens(testing::LsgFixture("bert/input"), "bert");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->bos.text.empty());
  EXPECT_EQ(t->cls.text, "[CLS]");
  EXPECT_EQ(t->cls.id, 2);
  EXPECT_EQ(t->mask.text, "[MASK]");
  EXPECT_EQ(t->mask.id, 4);
}

TEST(SpecialTokensTest, RobertaHasBosFromItsByteLevelVocabulary) {
  absl::StatusOr<ConverterSpecialTokens> t =
      ReadSpecialTokens(testing::LsgFixture("roberta/input"), "roberta");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->bos.text, "<s>");
  EXPECT_EQ(t->bos.id, 0);
  EXPECT_EQ(t->mask.text, "<mask>");
  EXPECT_EQ(t->mask.id, 4);
}

TEST(SpecialTokensTest, ReadsTheDefaultModelsFiles) {
  ASSERT_TRUE(testing::MiniLmPresent());
  absl::StatusOr<ConverterSpecialTokens> t = ReadSpecialTokens(testing::MiniLmDir(), "bert");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->cls.id, 101);
  EXPECT_EQ(t->mask.id, 103);
}

TEST(SpecialTokensTest, BareVocabTxtUsesClassDefaultsAndLineNumbers) {
  testing::TempDir dir;
  ASSERT_TRUE(WriteFileAtomically(dir.Join("vocab.txt"), "[PAD]\n[MASK]\nx\n[CLS]\n").ok());
  absl::StatusOr<ConverterSpecialTokens> t = ReadSpecialTokens(dir.path(), "distilbert");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->cls.id, 3);
  EXPECT_EQ(t->mask.id, 1);
}

TEST(SpecialTokensTest, SpecialTokensMapOverridesTokenizerConfigAndAcceptsAddedTokenObjects) {
  testing::TempDir dir;
  ASSERT_TRUE(
      WriteFileAtomically(dir.Join("vocab.json"), R"({"<s>": 0, "<m>": 1, "<M>": 2, "<b>": 3})")
          .ok());
  ASSERT_TRUE(WriteFileAtomically(dir.Join("tokenizer_config.json"),
                                  R"({"mask_token": "<m>", "bos_token": null,
                                      "tokenizer_class": "RobertaTokenizerFast"})")
                  .ok());
  ASSERT_TRUE(WriteFileAtomically(dir.Join("special_tokens_map.json"),
                                  R"({"mask_token": {"content": "<M>", "lstrip": true}})")
                  .ok());
  ASSERT_TRUE(WriteFileAtomically(dir.Join("added_tokens.json"), R"({"<extra>": 4})").ok());
  absl::StatusOr<ConverterSpecialTokens> t = ReadSpecialTokens(dir.path(), "roberta");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_TRUE(t->bos.text.empty());  // null unsets the class default
  EXPECT_EQ(t->cls.id, 0);           // RobertaTokenizer's "<s>"
  EXPECT_EQ(t->mask.text, "<M>");
  EXPECT_EQ(t->mask.id, 2);
}

TEST(SpecialTokensTest, ErrorsNameTheFile) {
  testing::TempDir dir;
  absl::StatusOr<ConverterSpecialTokens> t = ReadSpecialTokens(dir.path(), "bert");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(WriteFileAtomically(dir.Join("vocab.txt"), "[CLS]\n").ok());
  ASSERT_TRUE(WriteFileAtomically(dir.Join("tokenizer_config.json"), "{not json").ok());
  t = ReadSpecialTokens(dir.path(), "bert");
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("tokenizer_config.json: not valid"));
  ASSERT_TRUE(WriteFileAtomically(dir.Join("tokenizer_config.json"), R"({"cls_token": 5})").ok());
  t = ReadSpecialTokens(dir.path(), "bert");
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("field 'cls_token'"));
}

}  // namespace
}  // namespace docsparse::convert
