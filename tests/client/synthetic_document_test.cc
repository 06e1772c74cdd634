#include "client/synthetic_document.h"

#include <gtest/gtest.h>

#include <set>
#include <sstream>
#include <string>

#include "tests/common/fixture_paths.h"

namespace docsparse {
namespace {

// Tokens an uncased BERT WordPiece tokenizer makes of a synthetic document
// whose words are all whole-word tokens: words, punctuation, [CLS], [SEP].
int CountTokens(const std::string& text) {
  int tokens = 2;
  bool in_word = false;
  for (char c : text) {
    if (c == '.' || c == ',') {
      ++tokens;
      in_word = false;
    } else if (c == ' ') {
      in_word = false;
    } else if (!in_word) {
      ++tokens;
      in_word = true;
    }
  }
  return tokens;
}

TEST(SyntheticDocumentTest, SameSeedSameText) {
  EXPECT_EQ(SyntheticDocument(512, 7), SyntheticDocument(512, 7));
  EXPECT_NE(SyntheticDocument(512, 7), SyntheticDocument(512, 8));
}

TEST(SyntheticDocumentTest, HasTheRequestedTokenCount) {
  for (int tokens : {3, 4, 5, 10, 37, 128, 512, 4096, 16384}) {
    for (uint64_t seed : {1, 2, 3}) {
      EXPECT_EQ(CountTokens(SyntheticDocument(tokens, seed)), tokens)
          << tokens << " tokens, seed " << seed;
    }
  }
  // Too small to hold a word besides [CLS] and [SEP]: still one word.
  EXPECT_EQ(CountTokens(SyntheticDocument(1, 1)), 3);
}

TEST(SyntheticDocumentTest, LooksLikeProse) {
  const std::string text = SyntheticDocument(4096, 1);
  // About 4.5 bytes a token for English.
  EXPECT_GT(text.size(), 4096u * 3);
  EXPECT_LT(text.size(), 4096u * 7);
  std::istringstream words(text);
  std::set<std::string> distinct;
  for (std::string word; words >> word;) distinct.insert(word);
  EXPECT_GT(distinct.size(), 200u);
  EXPECT_TRUE(isupper(static_cast<unsigned char>(text[0])));
  EXPECT_EQ(text.back(), '.');
}

TEST(SyntheticDocumentTest, DocumentsUseConsecutiveSeeds) {
  const std::vector<std::string> documents = SyntheticDocuments(64, 3, 10);
  ASSERT_EQ(documents.size(), 3u);
  EXPECT_EQ(documents[2], SyntheticDocument(64, 12));
}

TEST(SyntheticDocumentTest, EveryWordIsOneTokenOfTheUncasedVocabulary) {
  ASSERT_TRUE(testing::MiniLmPresent());
  std::istringstream vocab_file(testing::ReadFile(testing::MiniLmDir() + "/vocab.txt"));
  std::set<std::string> vocab;
  for (std::string line; std::getline(vocab_file, line);) vocab.insert(line);
  ASSERT_GT(vocab.size(), 30000u);
  for (const char* word : SyntheticWords()) EXPECT_TRUE(vocab.count(word)) << word;
}

}  // namespace
}  // namespace docsparse
