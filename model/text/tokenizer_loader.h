// Picks and loads the tokenizer of a model folder from the files it holds:
//
//   tokenizer.json with a WordPiece model  -> WordPieceTokenizer (BERT family)
//   tokenizer.json with a BPE model        -> BpeTokenizer (RoBERTa, BART)
//   spiece.model (tokenizer.json absent,
//     or with a Unigram model)             -> SentencePieceTokenizer (Pegasus)
//   vocab.txt                              -> WordPieceTokenizer
//
// tokenizer_config.json, when present, is read by the chosen tokenizer.
// A tokenizer.json that cannot be read is an error, not a reason to fall
// back to another file.
#ifndef DOCSPARSE_MODEL_TEXT_TOKENIZER_LOADER_H_
#define DOCSPARSE_MODEL_TEXT_TOKENIZER_LOADER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "model/text/tokenizer.h"

namespace docsparse {

// NotFound when the folder holds none of the files above; InvalidArgument
// naming the file and field when the chosen files are malformed or use
// settings we do not implement.
absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& model_dir);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_TEXT_TOKENIZER_LOADER_H_
