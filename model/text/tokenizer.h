// Tokenizer interface: text -> vocabulary ids. WordPiece (BERT), byte-level
// BPE (RoBERTa, BART) and SentencePiece (Pegasus) implement it;
// model/text/tokenizer_loader.h picks one for a model folder.
#ifndef DOCSPARSE_MODEL_TEXT_TOKENIZER_H_
#define DOCSPARSE_MODEL_TEXT_TOKENIZER_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace docsparse {

// Ids of the special tokens a sequence is framed with; -1 when absent.
struct SpecialTokenIds {
  int32_t cls = -1;  // [CLS] / <s>: first token of a sequence
  int32_t sep = -1;  // [SEP] / </s>: last token of a sequence
  int32_t pad = -1;
  int32_t unk = -1;
  int32_t mask = -1;
};

// Thread-safe after construction: Encode is const and keeps no state.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // Ids of `utf8_text` without special tokens and without truncation, exactly
  // as Hugging Face `tokenizers` would give them with add_special_tokens=False.
  // The text must be valid UTF-8 (callers validate at the API boundary).
  virtual std::vector<int32_t> Encode(std::string_view utf8_text) const = 0;

  // Token strings back to text (HF decode with cleanup); used for display.
  virtual std::string Decode(const std::vector<int32_t>& ids) const = 0;

  virtual const SpecialTokenIds& special_tokens() const = 0;
  virtual int32_t vocab_size() const = 0;

  // The special tokens HF's post-processor puts before and after a single
  // sequence: [CLS] and [SEP] (BERT, RoBERTa, BART) unless a tokenizer says
  // otherwise (Pegasus: nothing before, </s> after).
  virtual std::vector<int32_t> FramePrefix() const { return {special_tokens().cls}; }
  virtual std::vector<int32_t> FrameSuffix() const { return {special_tokens().sep}; }

  // FramePrefix() ids FrameSuffix(), keeping at most `max_tokens` in total
  // (ids are cut from the end, as HF truncation=True does for a single
  // sequence).
  std::vector<int32_t> Frame(const std::vector<int32_t>& ids, size_t max_tokens) const {
    const std::vector<int32_t> prefix = FramePrefix();
    const std::vector<int32_t> suffix = FrameSuffix();
    const size_t overhead = prefix.size() + suffix.size();
    const size_t room = max_tokens >= overhead ? max_tokens - overhead : 0;
    std::vector<int32_t> framed = prefix;
    framed.reserve(std::min(ids.size(), room) + overhead);
    framed.insert(framed.end(), ids.begin(),
                  ids.begin() + static_cast<std::ptrdiff_t>(std::min(ids.size(), room)));
    framed.insert(framed.end(), suffix.begin(), suffix.end());
    return framed;
  }
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_TEXT_TOKENIZER_H_
