// BERT's WordPiece tokenizer, id for id what Hugging Face `tokenizers`
// (Rust, 0.2x) produces for a tokenizer.json made of BertNormalizer,
// BertPreTokenizer, a WordPiece model and a WordPiece decoder.
//
// Encoding, as HF does it:
//   1. added tokens (tokenizer.json "added_tokens"; the special tokens for a
//      vocab.txt) are cut out of the raw text, leftmost-longest, and map to
//      their ids; those marked normalized=true are matched after step 2;
//   2. BertNormalizer: clean_text, spaces around CJK ideographs,
//      strip_accents (NFD then drop Mn; when unset it follows lowercase),
//      lowercase;
//   3. BertPreTokenizer: split on whitespace; each punctuation character is a
//      word of its own;
//   4. WordPiece: greedy longest-match-first with a "##" continuation prefix;
//      a word longer than max_input_chars_per_word, or with any piece not in
//      the vocabulary, is a single [UNK].
// The Unicode classes involved are HF's (see model/text/unicode_text.h).
#ifndef DOCSPARSE_MODEL_TEXT_WORDPIECE_TOKENIZER_H_
#define DOCSPARSE_MODEL_TEXT_WORDPIECE_TOKENIZER_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "model/text/tokenizer.h"
#include "model/text/unicode_text.h"

namespace docsparse {

// How to tokenize with a bare vocab.txt: the BertTokenizer arguments that
// tokenizer_config.json carries. Defaults are BertTokenizer's.
struct WordPieceOptions {
  bool lowercase = true;              // do_lower_case
  std::optional<bool> strip_accents;  // unset: same as lowercase
  bool tokenize_chinese_chars = true;
  std::string unk_token = "[UNK]";
  std::string sep_token = "[SEP]";
  std::string pad_token = "[PAD]";
  std::string cls_token = "[CLS]";
  std::string mask_token = "[MASK]";
  size_t max_input_chars_per_word = 100;
};

// Immutable after creation; Encode and Decode are thread-safe.
class WordPieceTokenizer final : public Tokenizer {
 public:
  // Loads a HF tokenizer.json whose model is WordPiece. The normalizer must
  // be BertNormalizer or null, the pre-tokenizer BertPreTokenizer or null,
  // the decoder WordPiece or null. Errors name the file and the field.
  static absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> FromTokenizerJson(
      const std::string& path);

  // Loads a BERT vocab.txt (one token per line, id = line number) and
  // tokenizes as transformers' BertTokenizer does with `options`.
  static absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> FromVocabTxt(
      const std::string& path, const WordPieceOptions& options);

  // Options from a transformers tokenizer_config.json (do_lower_case,
  // strip_accents, tokenize_chinese_chars, the *_token strings); absent
  // fields keep their defaults.
  static absl::StatusOr<WordPieceOptions> ReadTokenizerConfig(const std::string& path);

  // A model folder: tokenizer.json when present, else vocab.txt with
  // tokenizer_config.json (when present).
  static absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> FromModelDir(const std::string& dir);

  std::vector<int32_t> Encode(std::string_view utf8_text) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  const SpecialTokenIds& special_tokens() const override { return special_; }
  // One past the largest id of the vocabulary and the added tokens.
  int32_t vocab_size() const override { return static_cast<int32_t>(id_to_token_.size()); }

  // The token string of `id`, or nullopt when no token has that id.
  std::optional<std::string_view> IdToToken(int32_t id) const;
  // The id of a vocabulary or added token, or -1.
  int32_t TokenToId(std::string_view token) const;

  WordPieceTokenizer(const WordPieceTokenizer&) = delete;
  WordPieceTokenizer& operator=(const WordPieceTokenizer&) = delete;

 private:
  // A token matched in the text before normalization (HF AddedToken).
  struct AddedToken {
    std::string content;
    int32_t id = -1;
    // Skipped by Decode.
    bool special = false;
    // Matched in the normalized text instead of the raw one.
    bool normalized = false;
    // Also swallow the whitespace on their left / right.
    bool lstrip = false;
    bool rstrip = false;
    // Only matches when no word character touches it.
    bool single_word = false;
    // What is searched for and what Decode shows: the content, normalized
    // when `normalized` (HF's normalized_cache).
    std::string text;
  };
  // Added tokens searched in one kind of text (raw or normalized).
  struct AddedTokenSet {
    std::vector<const AddedToken*> tokens;  // Into added_tokens_.
    bool first_byte[256] = {};              // Of their texts.
  };
  // A piece of text and, when it is an added token, its id.
  struct Segment {
    std::string_view text;
    int32_t added_id = -1;
  };

  WordPieceTokenizer() = default;

  // Once vocab_ and added tokens are in: builds the lookup tables and checks
  // the model can encode anything (its unknown token is in the vocabulary).
  absl::Status Finish(const std::string& source, std::vector<AddedToken> added);

  std::vector<Segment> SplitOnAddedTokens(std::string_view text, const AddedTokenSet& set) const;
  std::string Normalize(std::string_view text) const;
  void EncodeNormalized(std::string_view normalized, std::vector<int32_t>* ids) const;
  void PreTokenizeAndEncode(std::string_view normalized, std::vector<int32_t>* ids) const;
  void EncodeWord(std::string_view word, std::vector<int32_t>* ids) const;

  std::optional<BertNormalizerOptions> normalizer_ = BertNormalizerOptions();
  bool pre_tokenize_ = true;  // BertPreTokenizer, or none.
  bool decoder_enabled_ = true;
  bool decoder_cleanup_ = true;
  std::string decoder_prefix_ = "##";
  std::string continuing_prefix_ = "##";
  std::string unk_token_ = "[UNK]";
  size_t max_input_chars_per_word_ = 100;

  // The model vocabulary in file order; a later duplicate string wins the
  // lookup, as in HF. The maps hold views into these strings, so vocab_ is
  // never changed after Finish() (and the tokenizer is neither copied nor
  // moved: it lives behind a unique_ptr).
  std::vector<std::pair<std::string, int32_t>> vocab_;
  // Every token; the continuation tokens again, keyed without "##".
  std::unordered_map<std::string_view, int32_t> word_start_ids_;
  std::unordered_map<std::string_view, int32_t> continuation_ids_;
  size_t max_token_bytes_ = 0;

  // By id; never changed after Finish() (the sets point into it).
  std::vector<AddedToken> added_tokens_;
  AddedTokenSet raw_added_;
  AddedTokenSet normalized_added_;
  std::unordered_map<std::string, int32_t> added_ids_;

  std::vector<std::optional<std::string_view>> id_to_token_;
  // What Decode shows for an id (HF simple_id_to_token) and whether it
  // skips it (a special token).
  std::vector<std::optional<std::string_view>> decode_token_;
  std::vector<bool> skip_in_decode_;
  int32_t unk_id_ = -1;
  SpecialTokenIds special_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_TEXT_WORDPIECE_TOKENIZER_H_
