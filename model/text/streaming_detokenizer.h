// Generated token ids -> text pieces, as the tokens are chosen, for streamed
// summaries. The pieces concatenated are exactly Tokenizer::Decode of all
// the ids (Hugging Face decode with skip_special_tokens and
// clean_up_tokenization_spaces), so a streaming client ends with the same
// text as a unary one.
//
// Decode of a prefix is not a prefix of the final text near its end: a
// byte-level BPE token may end inside a multi-byte UTF-8 character (decoded
// as U+FFFD until the rest arrives), the cleanup rules delete a space before
// what comes next (" ." -> ".", " ' " -> "'", " n't" -> "n't"), and
// SentencePiece decoding strips trailing whitespace. All three only touch
// text from the last whitespace character on, so a piece is emitted only up
// to (not including) the last whitespace of the decoded prefix; the rest
// waits for the next token or Finish().
#ifndef DOCSPARSE_MODEL_TEXT_STREAMING_DETOKENIZER_H_
#define DOCSPARSE_MODEL_TEXT_STREAMING_DETOKENIZER_H_

#include <cstdint>
#include <string>
#include <vector>

#include "model/text/tokenizer.h"

namespace docsparse {

// One generated sequence. Not thread-safe; borrows the tokenizer.
class StreamingDetokenizer {
 public:
  explicit StreamingDetokenizer(const Tokenizer& tokenizer) : tokenizer_(tokenizer) {}

  // Adds the next generated id; returns the text that became final with it
  // (often empty).
  std::string Append(int32_t id);

  // The text not emitted yet: Decode(all ids) minus what Append returned.
  // Call once, after the last Append.
  std::string Finish();

  const std::vector<int32_t>& ids() const { return ids_; }

 private:
  const Tokenizer& tokenizer_;
  std::vector<int32_t> ids_;
  std::string emitted_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_TEXT_STREAMING_DETOKENIZER_H_
