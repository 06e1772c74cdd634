#include "model/text/sentence_splitter.h"

#include <algorithm>
#include <array>
#include <cctype>

namespace docsparse {
namespace {

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v';
}

constexpr std::array<std::string_view, 22> kAbbreviations = {
    "e.g", "i.e", "etc", "vs", "mr", "mrs", "ms", "dr", "prof",   "inc", "ltd",
    "co",  "no",  "fig", "st", "jr", "sr",  "cf", "al", "approx", "vol", "sec"};

std::string Lower(std::string_view s) {
  std::string out(s);
  std::transform(out.begin(), out.end(), out.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return out;
}

// The word that ends at `dot` (exclusive), e.g. "e.g" for "... e.g.".
std::string_view WordBefore(std::string_view text, size_t dot, size_t sentence_begin) {
  size_t start = dot;
  while (start > sentence_begin && !IsSpace(text[start - 1]) && text[start - 1] != '(') --start;
  return text.substr(start, dot - start);
}

bool IsAllDigits(std::string_view word) {
  return !word.empty() &&
         std::all_of(word.begin(), word.end(), [](unsigned char c) { return std::isdigit(c); });
}

// Whether the '.', '!' or '?' at `pos` ends a sentence.
bool EndsSentence(std::string_view text, size_t pos, size_t sentence_begin, size_t end) {
  size_t next = pos + 1;
  while (next < end &&
         (text[next] == '"' || text[next] == '\'' || text[next] == ')' || text[next] == ']' ||
          text[next] == '.' || text[next] == '!' || text[next] == '?')) {
    ++next;
  }
  if (next >= end) return true;
  if (!IsSpace(text[next])) return false;  // "3.14", "a.b.c", "end.)x"
  while (next < end && IsSpace(text[next])) ++next;
  if (next >= end) return true;
  const unsigned char following = static_cast<unsigned char>(text[next]);
  const bool starts_sentence = std::isupper(following) || std::isdigit(following) ||
                               following == '"' || following == '\'' || following == '(' ||
                               following == '[' || following >= 0x80;
  if (!starts_sentence) return false;
  if (text[pos] != '.') return true;
  const std::string_view word = WordBefore(text, pos, sentence_begin);
  if (word.size() == 1 && std::isalpha(static_cast<unsigned char>(word[0]))) return false;
  const std::string lower = Lower(word);
  for (std::string_view abbreviation : kAbbreviations) {
    if (lower == abbreviation) return false;
  }
  // A list number opening the sentence ("0. Definitions.").
  const size_t word_begin = static_cast<size_t>(word.data() - text.data());
  if (IsAllDigits(word) && word_begin == sentence_begin) return false;
  return true;
}

void Emit(std::string_view text, size_t begin, size_t end, std::vector<Sentence>* out) {
  while (begin < end && IsSpace(text[begin])) ++begin;
  while (end > begin && IsSpace(text[end - 1])) --end;
  if (begin == end) return;
  Sentence sentence;
  sentence.begin = begin;
  sentence.end = end;
  bool in_space = false;
  bool in_word = false;
  for (size_t i = begin; i < end; ++i) {
    if (IsSpace(text[i])) {
      in_space = true;
      in_word = false;
      continue;
    }
    if (in_space) sentence.text.push_back(' ');
    in_space = false;
    if (!in_word) ++sentence.words;
    in_word = true;
    sentence.text.push_back(text[i]);
  }
  out->push_back(std::move(sentence));
}

}  // namespace

std::vector<Sentence> SplitSentences(std::string_view text) {
  std::vector<Sentence> sentences;
  size_t paragraph_begin = 0;
  while (paragraph_begin < text.size()) {
    // A paragraph ends at a line that is empty or only whitespace.
    size_t paragraph_end = paragraph_begin;
    size_t line_begin = paragraph_begin;
    while (line_begin < text.size()) {
      size_t line_end = text.find('\n', line_begin);
      if (line_end == std::string_view::npos) line_end = text.size();
      const bool blank = std::all_of(text.begin() + line_begin, text.begin() + line_end, IsSpace);
      if (blank && line_begin > paragraph_begin) break;
      paragraph_end = std::min(text.size(), line_end + 1);
      line_begin = paragraph_end;
    }
    size_t sentence_begin = paragraph_begin;
    while (sentence_begin < paragraph_end && IsSpace(text[sentence_begin])) ++sentence_begin;
    for (size_t pos = sentence_begin; pos < paragraph_end; ++pos) {
      const char c = text[pos];
      if ((c == '.' || c == '!' || c == '?') &&
          EndsSentence(text, pos, sentence_begin, paragraph_end)) {
        size_t stop = pos + 1;
        while (stop < paragraph_end && !IsSpace(text[stop])) ++stop;
        Emit(text, sentence_begin, stop, &sentences);
        sentence_begin = stop;
        while (sentence_begin < paragraph_end && IsSpace(text[sentence_begin])) ++sentence_begin;
        pos = sentence_begin == 0 ? 0 : sentence_begin - 1;
      }
    }
    Emit(text, sentence_begin, paragraph_end, &sentences);
    paragraph_begin = std::max(paragraph_end, line_begin);
  }
  return sentences;
}

}  // namespace docsparse
