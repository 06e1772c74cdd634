// The special token ids a checkpoint conversion needs (BOS/CLS and MASK for
// the LSG global embeddings), read from a model folder's tokenizer files the
// way transformers' AutoTokenizer resolves them, without a tokenizer:
//   token strings: the tokenizer class's defaults (by tokenizer_config.json
//     "tokenizer_class", else config.json "model_type"), overridden by
//     tokenizer_config.json, then by special_tokens_map.json; a value is a
//     string or an AddedToken object {"content": ...}; null unsets it;
//   ids: the vocabulary (tokenizer.json "model.vocab", else vocab.txt line
//     numbers, else vocab.json), then added tokens on top (tokenizer.json
//     "added_tokens", added_tokens.json, tokenizer_config.json
//     "added_tokens_decoder").
#ifndef DOCSPARSE_CONVERT_SPECIAL_TOKENS_H_
#define DOCSPARSE_CONVERT_SPECIAL_TOKENS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"

namespace docsparse::convert {

struct SpecialToken {
  std::string text;  // e.g. "[CLS]"; empty when the tokenizer has none
  std::optional<int64_t> id;
};

struct ConverterSpecialTokens {
  SpecialToken bos;
  SpecialToken cls;
  SpecialToken mask;
};

// Reads `model_dir`'s tokenizer files. NOT_FOUND when the folder has no
// vocabulary file at all (tokenizer.json, vocab.txt, vocab.json);
// INVALID_ARGUMENT naming the file and field when one is malformed. A token
// whose text is not in the vocabulary is returned without an id (the caller
// decides whether it needs it).
absl::StatusOr<ConverterSpecialTokens> ReadSpecialTokens(const std::string& model_dir,
                                                         std::string_view model_type);

}  // namespace docsparse::convert

#endif  // DOCSPARSE_CONVERT_SPECIAL_TOKENS_H_
