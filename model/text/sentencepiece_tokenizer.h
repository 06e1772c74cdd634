// Pegasus' SentencePiece tokenizer: spiece.model run as the PyPI
// sentencepiece 0.2.x runs it (model/text/sentencepiece_model.h says why not with
// Debian's libsentencepiece), with the id layout and special tokens of
// transformers' PegasusTokenizer (the sentencepiece-backed "slow" one of
// transformers 4.x), id for id and in decoded text:
//
//   id 0 <pad>, 1 </s>, 2 <mask_1> (mask_token_sent), 3 <mask_2>
//   (mask_token), 4 .. offset+1 <unk_2> .. <unk_{offset-1}>; a SentencePiece
//   piece p >= 2 is id p + offset (offset 103 by default, so <unk> = 105).
//
// Encoding: those special tokens and <unk> are cut out of the text first
// (they are never matched by SentencePiece itself); each piece of text
// between them is encoded by SentencePiece on its own (so each starts a new
// word: NFKC, whitespace collapsed and trimmed, a dummy "▁" prefix).
// Decoding: special ids (0 .. offset+1, <unk>) and unknown ids are skipped,
// the rest decoded by SentencePiece and trimmed of Python whitespace; with
// clean_up_tokenization_spaces in tokenizer_config.json (transformers 5
// defaults it to false), transformers' clean-up follows. Framing: ids </s>,
// no leading token.
//
// transformers 5 has no sentencepiece-backed PegasusTokenizer: its
// tokenizers-backed one differs from this on whitespace (a trailing "▁"
// piece, "▁" before special tokens) and does not trim decoded text;
// tests/fixtures/bpe_spm/README.md has the figures.
#ifndef DOCSPARSE_MODEL_TEXT_SENTENCEPIECE_TOKENIZER_H_
#define DOCSPARSE_MODEL_TEXT_SENTENCEPIECE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/text/added_vocabulary.h"
#include "model/text/sentencepiece_model.h"
#include "model/text/tokenizer.h"
#include "model/text/tokenizer_files.h"
#include "model/text/unigram_model.h"

namespace docsparse {

// Immutable after creation; Encode and Decode are thread-safe.
class SentencePieceTokenizer final : public Tokenizer {
 public:
  // Loads `spiece_path`; `config` (tokenizer_config.json) may change the
  // offset and the special token strings. A null mask_token or
  // mask_token_sent (another id layout) and an offset below 2 are refused.
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> FromSpieceModel(
      const std::string& spiece_path, const TransformersTokenizerConfig& config = {});

  // A model folder: spiece.model, with tokenizer_config.json when present.
  static absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> FromModelDir(
      const std::string& dir);

  std::vector<int32_t> Encode(std::string_view utf8_text) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  const SpecialTokenIds& special_tokens() const override { return special_; }
  // SentencePiece pieces + offset (PegasusTokenizer.vocab_size).
  int32_t vocab_size() const override { return vocab_size_; }
  // Pegasus frames a sequence as ids </s>.
  std::vector<int32_t> FramePrefix() const override { return {}; }
  std::vector<int32_t> FrameSuffix() const override { return {special_.sep}; }

  // The token string of `id` (special tokens, else the piece), or nullopt.
  std::optional<std::string> IdToToken(int32_t id) const;
  // The id of a special token or a piece, or -1.
  int32_t TokenToId(std::string_view token) const;

  SentencePieceTokenizer(const SentencePieceTokenizer&) = delete;
  SentencePieceTokenizer& operator=(const SentencePieceTokenizer&) = delete;

 private:
  SentencePieceTokenizer() = default;

  std::unique_ptr<SentencePieceModel> model_;  // Pieces, normalization, decoding.
  std::unique_ptr<UnigramModel> unigram_;      // Segmentation.
  AddedVocabulary special_tokens_;             // Every special token, cut out before encoding.
  int32_t offset_ = 103;
  int32_t vocab_size_ = 0;
  bool cleanup_ = false;
  SpecialTokenIds special_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_TEXT_SENTENCEPIECE_TOKENIZER_H_
