// Rule-based sentence segmentation for extractive summaries: blank lines end
// paragraphs; inside a paragraph a sentence ends at . ! or ? (plus closing
// quotes or brackets) followed by whitespace and a capital, digit, quote or
// bracket, except after common abbreviations, single-letter initials and
// leading list numbers ("0. Definitions.").
#ifndef DOCSPARSE_MODEL_TEXT_SENTENCE_SPLITTER_H_
#define DOCSPARSE_MODEL_TEXT_SENTENCE_SPLITTER_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace docsparse {

struct Sentence {
  size_t begin = 0;  // byte offsets into the text, whitespace trimmed
  size_t end = 0;
  std::string text;  // the bytes with runs of whitespace collapsed to one space
  int words = 0;
};

std::vector<Sentence> SplitSentences(std::string_view text);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_TEXT_SENTENCE_SPLITTER_H_
