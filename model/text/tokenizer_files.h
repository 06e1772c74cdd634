// Reading the files of a Hugging Face tokenizer folder (tokenizer.json,
// tokenizer_config.json) with errors that name the file and the field, as
// "x/tokenizer.json: model.merges[3] is not a string", and the transformers
// conventions those files switch on. Shared by the BPE and SentencePiece
// tokenizers and the tokenizer loader.
#ifndef DOCSPARSE_MODEL_TEXT_TOKENIZER_FILES_H_
#define DOCSPARSE_MODEL_TEXT_TOKENIZER_FILES_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace docsparse {

// The bytes of `path`; NotFound naming the file when it cannot be opened.
absl::StatusOr<std::string> ReadTokenizerFile(const std::string& path);

// `path` parsed as JSON whose top level is an object; InvalidArgument naming
// the file otherwise (syntax errors, numbers out of range).
absl::StatusOr<nlohmann::json> ReadTokenizerJsonObject(const std::string& path);

// Typed reads of the optional fields of one file. Every error is
// InvalidArgument "<file>: <dotted field> <what is wrong>".
class JsonFieldReader {
 public:
  explicit JsonFieldReader(std::string file) : file_(std::move(file)) {}

  const std::string& file() const { return file_; }
  absl::Status Error(const std::string& field, const std::string& what) const;

  // obj[key] into *out; *out is left alone when the key is absent or null.
  absl::Status Read(const nlohmann::json& obj, const std::string& field, const char* key,
                    bool* out) const;
  absl::Status Read(const nlohmann::json& obj, const std::string& field, const char* key,
                    std::string* out) const;
  // Integers must be in [0, 2^31).
  absl::Status Read(const nlohmann::json& obj, const std::string& field, const char* key,
                    int64_t* out) const;

  // obj[key], or nullptr when it is absent or null.
  static const nlohmann::json* Find(const nlohmann::json& obj, const char* key);
  // "field.key", or "key" at the top level.
  static std::string Dotted(const std::string& field, const char* key);

 private:
  std::string file_;
};

// What our tokenizers read from transformers' tokenizer_config.json.
struct TransformersTokenizerConfig {
  // The *_token entries (bos_token, eos_token, unk_token, sep_token,
  // pad_token, cls_token, mask_token, mask_token_sent), written as a string or
  // as an AddedToken object {"content": ...}; nullopt when written as null.
  // Absent keys are absent.
  std::map<std::string, std::optional<std::string>> tokens;
  // transformers' decode(clean_up_tokenization_spaces=None) default
  // (transformers 5 defaults it to false).
  bool clean_up_tokenization_spaces = false;
  // transformers 5 ignores the flag above for BPE models unless this is set.
  bool clean_up_tokenization_spaces_for_bpe = false;
  // PegasusTokenizer's offset of the SentencePiece ids.
  std::optional<int64_t> offset;

  // The token string of `key` when written as a string (or object).
  std::optional<std::string> Token(const std::string& key) const;
};

// Reads tokenizer_config.json; other keys are ignored (transformers keeps
// many we have no use for: model_max_length, padding_side, ...).
absl::StatusOr<TransformersTokenizerConfig> ReadTransformersTokenizerConfig(
    const std::string& path);

// transformers' PreTrainedTokenizerBase.clean_up_tokenization, which
// decode(clean_up_tokenization_spaces=True) applies to the whole text:
// " ." -> ".", " n't" -> "n't", " 's" -> "'s", ... (Python str.replace, in
// transformers' order).
void CleanUpTokenizationSpaces(std::string* text);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_TEXT_TOKENIZER_FILES_H_
