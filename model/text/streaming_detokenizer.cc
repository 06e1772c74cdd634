#include "model/text/streaming_detokenizer.h"

#include "model/text/unicode_text.h"

namespace docsparse {
namespace {

// Python's str.isspace, what HF's strip() and SentencePiece's decoder see.
bool IsWhitespace(char32_t c) { return IsBertWhitespace(c) || (c >= 0x1C && c <= 0x1F); }

// Byte offset where the last whitespace character of `text` starts; 0 when
// there is none (nothing is final yet).
size_t FinalPrefixLength(const std::string& text) {
  size_t final_length = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t start = pos;
    if (IsWhitespace(DecodeUtf8At(text, &pos))) final_length = start;
  }
  return final_length;
}

}  // namespace

std::string StreamingDetokenizer::Append(int32_t id) {
  ids_.push_back(id);
  const std::string text = tokenizer_.Decode(ids_);
  const size_t length = FinalPrefixLength(text);
  // A shorter final prefix than what went out already (the cleanup rules
  // joined a held-back space) adds nothing; the earlier text stays right.
  if (length <= emitted_.size() || text.compare(0, emitted_.size(), emitted_) != 0) return "";
  std::string piece = text.substr(emitted_.size(), length - emitted_.size());
  emitted_.append(piece);
  return piece;
}

std::string StreamingDetokenizer::Finish() {
  const std::string text = tokenizer_.Decode(ids_);
  // emitted_ is a prefix of `text` by the argument in the header; were a
  // tokenizer to break it, the client would see a garbled end, not a crash.
  std::string rest = text.size() > emitted_.size() ? text.substr(emitted_.size()) : "";
  emitted_ = text;
  return rest;
}

}  // namespace docsparse
