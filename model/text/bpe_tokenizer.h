// Byte-level BPE (GPT-2, RoBERTa, BART), id for id what Hugging Face
// `tokenizers` 0.2x produces for a tokenizer.json made of a ByteLevel
// pre-tokenizer, a BPE model, a ByteLevel decoder (or none) and no
// normalizer; and decoded text as transformers 5 decodes it.
//
// Encoding, as HF does it:
//   1. added tokens (tokenizer.json "added_tokens": <s>, </s>, <mask>, ...)
//      are cut out of the text with HF's rules (model/text/added_vocabulary.h);
//   2. ByteLevel pre-tokenizer, on each remaining piece: a space is
//      prepended when add_prefix_space is set and the piece does not start
//      with one; the piece is split with the GPT-2 regex when use_regex is
//      set (model/text/byte_level.h); every byte becomes its stand-in character;
//   3. BPE on each word: one symbol per byte, then merges applied lowest
//      rank first, leftmost first, exactly as HF's priority queue does
//      (ignore_merges: a word that is a vocabulary token is taken whole);
//      a byte whose character is not in the vocabulary becomes unk_token
//      (fused into one when fuse_unk), or is dropped when there is none.
//
// Decoding (transformers' decode(ids, skip_special_tokens=True)): ids of
// special added tokens and unknown ids are skipped; the ByteLevel decoder
// maps the stand-in characters of each token back to bytes (a token with any
// other character keeps its own UTF-8) and reads the bytes as UTF-8, with
// U+FFFD for ill-formed sequences; without a decoder tokens are joined with
// spaces. transformers' clean_up_tokenization runs only when
// tokenizer_config.json sets both clean_up_tokenization_spaces and
// clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output
// (transformers 5 ignores the first alone for BPE models).
//
// Refused with an error naming the field: any normalizer, a pre-tokenizer
// other than ByteLevel, a decoder other than ByteLevel, BPE dropout,
// byte_fallback, a non-empty continuing_subword_prefix / end_of_word_suffix
// (no byte-level tokenizer uses them), merges naming tokens that are not in
// the vocabulary.
#ifndef DOCSPARSE_MODEL_TEXT_BPE_TOKENIZER_H_
#define DOCSPARSE_MODEL_TEXT_BPE_TOKENIZER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "absl/status/statusor.h"
#include "model/text/added_vocabulary.h"
#include "model/text/tokenizer.h"
#include "model/text/tokenizer_files.h"

namespace docsparse {

// Immutable after creation; Encode and Decode are thread-safe.
class BpeTokenizer final : public Tokenizer {
 public:
  // Loads a HF tokenizer.json whose model is BPE. `config` (from
  // tokenizer_config.json, when the folder has one) supplies the decode
  // cleanup flags and the names of <pad>, <unk> and <mask>. Errors name the
  // file and the field.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> FromTokenizerJson(
      const std::string& path, const TransformersTokenizerConfig& config = {});

  // A model folder: tokenizer.json, with tokenizer_config.json when present.
  static absl::StatusOr<std::unique_ptr<BpeTokenizer>> FromModelDir(const std::string& dir);

  std::vector<int32_t> Encode(std::string_view utf8_text) const override;
  std::string Decode(const std::vector<int32_t>& ids) const override;
  const SpecialTokenIds& special_tokens() const override { return special_; }
  // One past the largest id of the vocabulary and the added tokens.
  int32_t vocab_size() const override { return static_cast<int32_t>(id_to_token_.size()); }
  // What the post-processor puts around a single sequence: <s> and </s>
  // for RobertaProcessing, the template's special tokens for
  // TemplateProcessing, nothing for ByteLevel or no post-processor.
  std::vector<int32_t> FramePrefix() const override { return frame_prefix_; }
  std::vector<int32_t> FrameSuffix() const override { return frame_suffix_; }

  // The token string of `id` (added tokens first), or nullopt.
  std::optional<std::string_view> IdToToken(int32_t id) const;
  // The id of an added or vocabulary token, or -1.
  int32_t TokenToId(std::string_view token) const;

  BpeTokenizer(const BpeTokenizer&) = delete;
  BpeTokenizer& operator=(const BpeTokenizer&) = delete;

 private:
  // What a merge of two adjacent symbols gives (HF MergeMap value).
  struct Merge {
    int32_t rank = 0;
    int32_t new_id = 0;
  };

  BpeTokenizer() = default;

  absl::Status LoadModel(const JsonFieldReader& reader, const nlohmann::json& model);
  absl::Status LoadMerges(const JsonFieldReader& reader, const nlohmann::json& merges);
  absl::Status LoadPostProcessor(const JsonFieldReader& reader, const nlohmann::json& root);

  // Step 2 and 3 on a piece of text that holds no added token.
  void EncodePiece(std::string_view piece, std::vector<int32_t>* ids) const;
  // Step 3 on one pre-tokenized word (raw bytes).
  void EncodeWord(std::string_view word, std::vector<int32_t>* ids) const;

  static uint64_t PairKey(int32_t a, int32_t b) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(a)) << 32) | static_cast<uint32_t>(b);
  }

  // ByteLevel pre-tokenizer settings.
  bool add_prefix_space_ = false;
  bool use_regex_ = true;
  // BPE model settings.
  int32_t unk_id_ = -1;
  bool fuse_unk_ = false;
  bool ignore_merges_ = false;
  // Decoder settings.
  bool byte_level_decoder_ = true;
  bool cleanup_ = false;

  std::unordered_map<std::string, int32_t> vocab_;
  std::unordered_map<uint64_t, Merge> merges_;
  // Vocabulary id of each byte's stand-in character, or -1.
  int32_t byte_ids_[256] = {};
  AddedVocabulary added_;

  // Dense tables by id: the token string (added tokens win, as in HF), and
  // whether Decode skips it (a special token).
  std::vector<const std::string*> id_to_token_;
  std::vector<bool> skip_in_decode_;
  std::vector<int32_t> frame_prefix_;
  std::vector<int32_t> frame_suffix_;
  SpecialTokenIds special_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_TEXT_BPE_TOKENIZER_H_
