#include "model/text/tokenizer_loader.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/text/bpe_tokenizer.h"
#include "model/text/sentencepiece_tokenizer.h"
#include "model/text/tokenizer_files.h"
#include "model/text/wordpiece_tokenizer.h"

namespace docsparse {

absl::StatusOr<std::unique_ptr<Tokenizer>> LoadTokenizer(const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path root(model_dir);
  const bool has_spiece = fs::exists(root / "spiece.model", error);
  if (fs::exists(root / "tokenizer.json", error)) {
    const std::string path = (root / "tokenizer.json").string();
    // Parsed twice (here and by the tokenizer); a tokenizer.json is at most a
    // few MB, read once per model load.
    ASSIGN_OR_RETURN(const nlohmann::json json, ReadTokenizerJsonObject(path));
    const JsonFieldReader reader(path);
    const nlohmann::json* model = JsonFieldReader::Find(json, "model");
    if (model == nullptr || !model->is_object()) return reader.Error("model", "is missing");
    std::string type;
    RETURN_IF_ERROR(reader.Read(*model, "model", "type", &type));
    if (type == "WordPiece") return WordPieceTokenizer::FromModelDir(model_dir);
    if (type == "BPE") return BpeTokenizer::FromModelDir(model_dir);
    if (type == "Unigram" && has_spiece) return SentencePieceTokenizer::FromModelDir(model_dir);
    return reader.Error("model.type",
                        absl::StrCat(type.empty() ? "is missing" : "is '" + type + "'",
                                     ", expected WordPiece, BPE, or Unigram beside a "
                                     "spiece.model"));
  }
  if (has_spiece) return SentencePieceTokenizer::FromModelDir(model_dir);
  if (fs::exists(root / "vocab.txt", error)) return WordPieceTokenizer::FromModelDir(model_dir);
  return absl::NotFoundError(
      absl::StrCat(model_dir, ": no tokenizer.json, spiece.model or vocab.txt"));
}

}  // namespace docsparse
