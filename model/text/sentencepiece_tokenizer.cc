#include "model/text/sentencepiece_tokenizer.h"

#include <filesystem>
#include <unordered_map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/text/unicode_text.h"

namespace docsparse {
namespace {

// Offsets beyond this are not a Pegasus layout (and would overflow ids).
constexpr int64_t kMaxOffset = int64_t{1} << 20;

// Python's str.isspace(): the White_Space property plus the information
// separators U+001C..U+001F, which str.strip() also removes.
bool IsPythonWhitespace(char32_t c) { return IsBertWhitespace(c) || (c >= 0x1C && c <= 0x1F); }

// Python's str.strip().
std::string_view StripPythonWhitespace(std::string_view text) {
  size_t begin = 0;
  while (begin < text.size()) {
    size_t next = begin;
    if (!IsPythonWhitespace(DecodeUtf8At(text, &next))) break;
    begin = next;
  }
  size_t end = text.size();
  while (end > begin) {
    size_t start = end - 1;
    while (start > begin && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
    size_t probe = start;
    if (!IsPythonWhitespace(DecodeUtf8At(text, &probe))) break;
    end = start;
  }
  return text.substr(begin, end - begin);
}

}  // namespace

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::FromModelDir(
    const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path root(dir);
  TransformersTokenizerConfig config;
  if (fs::exists(root / "tokenizer_config.json", error)) {
    ASSIGN_OR_RETURN(config,
                     ReadTransformersTokenizerConfig((root / "tokenizer_config.json").string()));
  }
  return FromSpieceModel((root / "spiece.model").string(), config);
}

absl::StatusOr<std::unique_ptr<SentencePieceTokenizer>> SentencePieceTokenizer::FromSpieceModel(
    const std::string& spiece_path, const TransformersTokenizerConfig& config) {
  // The config names tokens by key; "tokenizer_config.json" is where they
  // came from (FromModelDir reads it beside spiece.model).
  const std::string config_file =
      (std::filesystem::path(spiece_path).parent_path() / "tokenizer_config.json").string();
  std::unique_ptr<SentencePieceTokenizer> tok(new SentencePieceTokenizer());
  ASSIGN_OR_RETURN(const std::string bytes, ReadTokenizerFile(spiece_path));
  ASSIGN_OR_RETURN(tok->model_, SentencePieceModel::Parse(bytes, spiece_path));
  const int64_t offset = config.offset.value_or(103);
  if (offset < 2 || offset > kMaxOffset) {
    return absl::InvalidArgumentError(
        absl::StrCat(config_file, ": offset ", offset, " is outside [2, ", kMaxOffset,
                     "] (PegasusTokenizer puts its special tokens at ids 0 .. offset+1)"));
  }
  tok->offset_ = static_cast<int32_t>(offset);
  tok->unigram_ = std::make_unique<UnigramModel>(tok->model_->pieces(), tok->model_->unk_id());
  tok->vocab_size_ = static_cast<int32_t>(tok->model_->pieces().size()) + tok->offset_;
  tok->cleanup_ = config.clean_up_tokenization_spaces;

  // PegasusTokenizer's tokens, by id.
  std::vector<std::pair<std::string, const char*>> names = {{"<pad>", "pad_token"},
                                                            {"</s>", "eos_token"},
                                                            {"<mask_1>", "mask_token_sent"},
                                                            {"<mask_2>", "mask_token"}};
  std::vector<AddedTokenSpec> tokens;
  std::unordered_map<std::string, int32_t> ids;
  for (const auto& [fallback, key] : names) {
    const auto it = config.tokens.find(key);
    if (it != config.tokens.end() && !it->second.has_value()) {
      return absl::InvalidArgumentError(absl::StrCat(
          config_file, ": ", key, " is null (unsupported: it changes PegasusTokenizer's ids)"));
    }
    const std::string content = it == config.tokens.end() ? fallback : *it->second;
    ids.emplace(content, static_cast<int32_t>(tokens.size()));
    tokens.push_back({content, /*special=*/true});
  }
  for (int32_t i = 2; i < tok->offset_; ++i) {
    const std::string content = absl::StrCat("<unk_", i, ">");
    ids.emplace(content, static_cast<int32_t>(tokens.size()));
    tokens.push_back({content, /*special=*/true});
  }
  const std::string unk = config.Token("unk_token").value_or("<unk>");
  // PegasusTokenizer asks sentencepiece, which answers <unk>'s id for a
  // string that is not a piece.
  const int unk_piece = tok->model_->PieceToId(unk);
  const int32_t unk_id = (unk_piece >= 0 ? unk_piece : tok->model_->unk_id()) + tok->offset_;
  ids.emplace(unk, unk_id);
  tokens.push_back({unk, /*special=*/true});
  tok->special_tokens_.Build(
      tokens,
      [&ids](std::string_view content) {
        const auto it = ids.find(std::string(content));
        return it == ids.end() ? -1 : it->second;
      },
      tok->vocab_size_);

  tok->special_.pad = tok->special_tokens_.IdOf(tokens[0].content);
  tok->special_.sep = tok->special_tokens_.IdOf(tokens[1].content);  // </s>
  tok->special_.mask = tok->special_tokens_.IdOf(tokens[3].content);
  tok->special_.unk = unk_id;
  tok->special_.cls = -1;  // Pegasus has no leading token.
  return tok;
}

std::vector<int32_t> SentencePieceTokenizer::Encode(std::string_view utf8_text) const {
  std::vector<AddedVocabulary::Segment> segments;
  special_tokens_.Split(utf8_text, /*normalized=*/false, &segments);
  std::vector<int32_t> ids;
  std::vector<int> pieces;
  std::string normalized;
  for (const AddedVocabulary::Segment& segment : segments) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      continue;
    }
    pieces.clear();
    model_->Normalize(segment.text, &normalized);
    unigram_->Encode(normalized, &pieces);
    for (const int piece : pieces) ids.push_back(piece + offset_);
  }
  return ids;
}

std::string SentencePieceTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::vector<int> pieces;
  pieces.reserve(ids.size());
  for (const int32_t id : ids) {
    // Ids below offset+2 are all special tokens; <unk> is one too.
    if (id < offset_ + 2 || id >= vocab_size_ || id == special_.unk) continue;
    pieces.push_back(id - offset_);
  }
  std::string text(StripPythonWhitespace(model_->Decode(pieces)));
  if (cleanup_) CleanUpTokenizationSpaces(&text);
  return text;
}

std::optional<std::string> SentencePieceTokenizer::IdToToken(int32_t id) const {
  if (const AddedTokenSpec* token = special_tokens_.TokenWithId(id)) return token->content;
  if (id < offset_ || id >= vocab_size_) return std::nullopt;
  return model_->pieces()[id - offset_].piece;
}

int32_t SentencePieceTokenizer::TokenToId(std::string_view token) const {
  const int32_t special = special_tokens_.IdOf(token);
  if (special >= 0) return special;
  const int piece = model_->PieceToId(token);
  return piece < 0 ? -1 : piece + offset_;
}

}  // namespace docsparse
