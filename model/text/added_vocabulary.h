// Hugging Face `tokenizers`' AddedVocabulary (0.2x): the tokens cut out of
// the text before the model sees it (special tokens such as <mask>, and
// user-added ones), with HF's id assignment and matching rules:
//
//   - ids: tokenizer.json's "id" fields are not used. All tokens are added in
//     file order; a token whose content is already an added token or in the
//     model vocabulary keeps that id, any other gets the next free id from
//     the model vocabulary's size (its number of entries) on; for one id the
//     later token wins;
//   - matching: leftmost-longest over the text, resuming after the end of
//     each match even when the match is then discarded (single_word);
//     lstrip / rstrip also swallow the Unicode whitespace (Rust
//     char::is_whitespace) on their left / right; single_word tokens match
//     only where no word character (Rust regex \w) touches them;
//   - tokens with normalized=false are matched in the raw text first; those
//     with normalized=true in what is left, after normalization.
//
// Used by BpeTokenizer and SentencePieceTokenizer; immutable after Build and
// safe to share between threads.
#ifndef DOCSPARSE_MODEL_TEXT_ADDED_VOCABULARY_H_
#define DOCSPARSE_MODEL_TEXT_ADDED_VOCABULARY_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <unordered_set>
#include <vector>

namespace docsparse {

// One entry of tokenizer.json "added_tokens" (HF AddedToken).
struct AddedTokenSpec {
  std::string content;
  bool special = false;     // Skipped by Decode(skip_special_tokens=true).
  bool normalized = false;  // Matched in the normalized text.
  bool lstrip = false;
  bool rstrip = false;
  bool single_word = false;

  bool operator==(const AddedTokenSpec& other) const;
};

class AddedVocabulary {
 public:
  // A piece of text, and the id of the added token it is (else -1).
  struct Segment {
    std::string_view text;
    int32_t id = -1;
  };

  AddedVocabulary() = default;

  // Adds `tokens` in order as HF does when it loads tokenizer.json.
  // `model_id(content)` is the model vocabulary's id of a string (or -1) and
  // `model_vocab_entries` its number of entries.
  void Build(const std::vector<AddedTokenSpec>& tokens,
             const std::function<int32_t(std::string_view)>& model_id, int32_t model_vocab_entries);

  // Cuts the tokens with normalized=false (`normalized` false) or =true out
  // of `text`, appending the pieces in order: added tokens with their id,
  // the text between them with id -1 (never empty).
  void Split(std::string_view text, bool normalized, std::vector<Segment>* out) const;

  // Whether any token is matched in the raw / normalized text.
  bool has_raw_tokens() const { return !raw_.tokens.empty(); }
  bool has_normalized_tokens() const { return !normalized_.tokens.empty(); }

  // The id of an added token's content, or -1.
  int32_t IdOf(std::string_view content) const;
  // The token that owns `id`, or nullptr.
  const AddedTokenSpec* TokenWithId(int32_t id) const;
  // Whether `text` is the content of a special token (HF decides what
  // Decode skips by the token string, not the id).
  bool IsSpecialContent(std::string_view text) const;
  // One past the largest id, or 0 when empty.
  int32_t end_id() const { return by_id_.empty() ? 0 : by_id_.rbegin()->first + 1; }
  const std::map<int32_t, AddedTokenSpec>& by_id() const { return by_id_; }

 private:
  // Tokens searched in one kind of text, longest first within each leading
  // byte (so the first that matches at a position is the longest).
  struct Candidate {
    std::string text;
    int32_t id = -1;
    bool lstrip = false;
    bool rstrip = false;
    bool single_word = false;
  };
  struct MatchSet {
    std::vector<Candidate> tokens;
    std::vector<std::vector<size_t>> by_first_byte = std::vector<std::vector<size_t>>(256);
  };
  void Index(bool normalized, MatchSet* set) const;

  std::map<int32_t, AddedTokenSpec> by_id_;       // HF added_tokens_map_r.
  std::unordered_map<std::string, int32_t> ids_;  // HF added_tokens_map.
  std::unordered_set<std::string> special_;
  MatchSet raw_;
  MatchSet normalized_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_TEXT_ADDED_VOCABULARY_H_
