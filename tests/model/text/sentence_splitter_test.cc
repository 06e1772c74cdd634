#include "model/text/sentence_splitter.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/common/fixture_paths.h"

namespace docsparse {
namespace {

std::vector<std::string> Texts(std::string_view text) {
  std::vector<std::string> out;
  for (const Sentence& s : SplitSentences(text)) out.push_back(s.text);
  return out;
}

TEST(SentenceSplitterTest, SplitsOnTerminalPunctuation) {
  EXPECT_THAT(Texts("One two three. Four five six! Is it seven? \"Yes,\" she said."),
              ::testing::ElementsAre("One two three.", "Four five six!", "Is it seven?",
                                     "\"Yes,\" she said."));
}

TEST(SentenceSplitterTest, KeepsAbbreviationsInitialsAndNumbers) {
  EXPECT_THAT(Texts("See e.g. the appendix. J. Smith paid $3.50 to Mr. Jones. Done."),
              ::testing::ElementsAre("See e.g. the appendix.", "J. Smith paid $3.50 to Mr. Jones.",
                                     "Done."));
}

TEST(SentenceSplitterTest, ParagraphsAndWrappedLines) {
  EXPECT_THAT(Texts("  0. Definitions.\n\n  \"This License\" refers to\nversion 3 of the GNU "
                    "GPL.\n\nTitle without stop\n\nLast one"),
              ::testing::ElementsAre("0. Definitions.",
                                     "\"This License\" refers to version 3 of the GNU GPL.",
                                     "Title without stop", "Last one"));
}

TEST(SentenceSplitterTest, OffsetsPointIntoTheText) {
  const std::string text = "  Alpha beta.\n Gamma   delta.  ";
  const std::vector<Sentence> sentences = SplitSentences(text);
  ASSERT_EQ(sentences.size(), 2u);
  EXPECT_EQ(text.substr(sentences[0].begin, sentences[0].end - sentences[0].begin), "Alpha beta.");
  EXPECT_EQ(text.substr(sentences[1].begin, sentences[1].end - sentences[1].begin),
            "Gamma   delta.");
  EXPECT_EQ(sentences[1].text, "Gamma delta.");
  EXPECT_EQ(sentences[1].words, 2);
}

TEST(SentenceSplitterTest, EmptyAndWhitespaceOnly) {
  EXPECT_TRUE(SplitSentences("").empty());
  EXPECT_TRUE(SplitSentences(" \n\n\t ").empty());
}

TEST(SentenceSplitterTest, Gpl3HasHundredsOfSentences) {
  const std::string gpl = testing::ReadFile("/usr/share/common-licenses/GPL-3");
  ASSERT_FALSE(gpl.empty());
  const std::vector<Sentence> sentences = SplitSentences(gpl);
  EXPECT_GT(sentences.size(), 200u);
  for (const Sentence& s : sentences) {
    ASSERT_LT(s.begin, s.end);
    ASSERT_LE(s.end, gpl.size());
  }
}

}  // namespace
}  // namespace docsparse
