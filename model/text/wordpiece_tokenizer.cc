#include "model/text/wordpiece_tokenizer.h"

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <sstream>
#include <unordered_set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/text/unicode_text.h"
#include "nlohmann/json.hpp"

namespace docsparse {
namespace {

// Vocabularies are dense id tables; real ones stay far below this (2^24).
constexpr int64_t kMaxVocabularyId = (int64_t{1} << 24) - 1;

using Json = nlohmann::json;

bool IsContinuationByte(char b) { return (static_cast<uint8_t>(b) & 0xC0) == 0x80; }

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open (", std::strerror(errno), ")"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

absl::StatusOr<Json> ReadJsonObject(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::exception& e) {  // syntax, and numbers out of range
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON: ", e.what()));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": top level is not a JSON object"));
  }
  return root;
}

// Typed reads of optional fields. Every error names the file and the dotted
// field, e.g. "x/tokenizer.json: model.unk_token is not a string".
class FieldReader {
 public:
  explicit FieldReader(const std::string& file) : file_(file) {}

  absl::Status Error(const std::string& field, const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat(file_, ": ", field, " ", what));
  }

  // Reads obj[key] into *out; leaves *out alone when the key is absent or
  // null. Integers must fit an int32 id and not be negative.
  template <typename T>
  absl::Status Read(const Json& obj, const std::string& field, const char* key, T* out) const {
    const Json* value = Find(obj, key);
    if (value == nullptr) return absl::OkStatus();
    const char* error = TypeError(*value, out);
    if (error != nullptr) return Error(Dotted(field, key), error);
    *out = value->get<T>();
    return absl::OkStatus();
  }

  // The component `name` (normalizer, decoder, ...) when its "type" is
  // `expected`; nullptr when it is absent or null (and `optional`).
  absl::StatusOr<const Json*> Component(const Json& root, const char* name, const char* expected,
                                        bool optional) const {
    const Json* value = Find(root, name);
    std::string type;
    if (value != nullptr) {
      if (!value->is_object()) return Error(name, "is not an object");
      RETURN_IF_ERROR(Read(*value, name, "type", &type));
      if (type == expected) return value;
    }
    if (value == nullptr && optional) return nullptr;
    return Error(absl::StrCat(name, ".type"),
                 absl::StrCat(type.empty() ? "is missing" : "is '" + type + "'", ", expected '",
                              expected, "'", optional ? " or null" : ""));
  }

  static const Json* Find(const Json& obj, const char* key) {
    const auto it = obj.find(key);
    return it == obj.end() || it->is_null() ? nullptr : &*it;
  }
  static std::string Dotted(const std::string& field, const char* key) {
    return field.empty() ? std::string(key) : absl::StrCat(field, ".", key);
  }
  static const char* TypeError(const Json& value, bool*) {
    return value.is_boolean() ? nullptr : "is not a boolean";
  }
  static const char* TypeError(const Json& value, std::string*) {
    return value.is_string() ? nullptr : "is not a string";
  }
  static const char* TypeError(const Json& value, int64_t*) {
    return value.is_number_integer() && value.get<int64_t>() >= 0 &&
                   value.get<int64_t>() <= std::numeric_limits<int32_t>::max()
               ? nullptr
               : "is not an integer in [0, 2^31)";
  }

 private:
  const std::string& file_;
};

// A special token in tokenizer_config.json: a string, or an AddedToken
// object ({"content": ...}) as older transformers wrote them.
absl::Status ReadTokenString(const FieldReader& reader, const Json& config, const char* key,
                             std::string* out) {
  const Json* value = FieldReader::Find(config, key);
  if (value != nullptr && value->is_object()) {
    return reader.Read(*value, key, "content", out);
  }
  return reader.Read(config, "", key, out);
}

// Rust's str::replace, applied in place.
void ReplaceAll(std::string* text, std::string_view from, std::string_view to) {
  for (size_t pos = text->find(from); pos != std::string::npos; pos = text->find(from, pos)) {
    text->replace(pos, from.size(), to);
    pos += to.size();
  }
}

// HF decoders::wordpiece::cleanup, applied to each token (with its leading
// space) rather than to the joined text, exactly as HF does.
void CleanUpTokenization(std::string* token) {
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},   {" ?", "?"},     {" !", "!"},    {" ,", ","},
      {" ' ", "'"},  {" n't", "n't"}, {" 'm", "'m"},  {" do not", " don't"},
      {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) ReplaceAll(token, from, to);
}

// The regex `\w` of Rust's regex crate: alphabetic, marks, digits, connector
// punctuation, joiners. Only single_word added tokens look at it.
bool EndsWithWordChar(std::string_view text) {
  if (text.empty()) return false;
  size_t start = text.size() - 1;
  while (start > 0 && IsContinuationByte(text[start])) --start;
  return IsWordCharacter(DecodeUtf8At(text, &start));
}
bool StartsWithWordChar(std::string_view text) {
  size_t pos = 0;
  return !text.empty() && IsWordCharacter(DecodeUtf8At(text, &pos));
}

}  // namespace

absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> WordPieceTokenizer::FromTokenizerJson(
    const std::string& path) {
  ASSIGN_OR_RETURN(const Json root, ReadJsonObject(path));
  const FieldReader reader(path);
  std::unique_ptr<WordPieceTokenizer> tok(new WordPieceTokenizer());

  ASSIGN_OR_RETURN(const Json* model_json, reader.Component(root, "model", "WordPiece", false));
  const Json& model = *model_json;
  const Json* vocab = FieldReader::Find(model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) {
    return reader.Error("model.vocab", "is missing or not an object");
  }
  int64_t max_chars = static_cast<int64_t>(tok->max_input_chars_per_word_);
  tok->vocab_.reserve(vocab->size());
  for (const auto& [token, id] : vocab->items()) {
    if (const char* error = FieldReader::TypeError(id, &max_chars)) {
      return reader.Error(absl::StrCat("model.vocab[\"", token, "\"]"), error);
    }
    // Ids index a dense table: a stray huge id must not allocate gigabytes.
    if (id.get<int64_t>() > kMaxVocabularyId) {
      return reader.Error(absl::StrCat("model.vocab[\"", token.substr(0, 64), "\"]"),
                          absl::StrCat("id exceeds the supported maximum ", kMaxVocabularyId));
    }
    tok->vocab_.emplace_back(token, static_cast<int32_t>(id.get<int64_t>()));
  }
  RETURN_IF_ERROR(reader.Read(model, "model", "unk_token", &tok->unk_token_));
  RETURN_IF_ERROR(
      reader.Read(model, "model", "continuing_subword_prefix", &tok->continuing_prefix_));
  RETURN_IF_ERROR(reader.Read(model, "model", "max_input_chars_per_word", &max_chars));
  tok->max_input_chars_per_word_ = static_cast<size_t>(max_chars);

  ASSIGN_OR_RETURN(const Json* normalizer,
                   reader.Component(root, "normalizer", "BertNormalizer", true));
  if (normalizer == nullptr) {
    tok->normalizer_.reset();
  } else {
    BertNormalizerOptions& norm = *tok->normalizer_;
    const Json& n = *normalizer;
    RETURN_IF_ERROR(reader.Read(n, "normalizer", "clean_text", &norm.clean_text));
    RETURN_IF_ERROR(
        reader.Read(n, "normalizer", "handle_chinese_chars", &norm.handle_chinese_chars));
    RETURN_IF_ERROR(reader.Read(n, "normalizer", "lowercase", &norm.lowercase));
    // HF: strip_accents.unwrap_or(lowercase).
    norm.strip_accents = norm.lowercase;
    RETURN_IF_ERROR(reader.Read(n, "normalizer", "strip_accents", &norm.strip_accents));
  }
  ASSIGN_OR_RETURN(const Json* pre_tokenizer,
                   reader.Component(root, "pre_tokenizer", "BertPreTokenizer", true));
  tok->pre_tokenize_ = pre_tokenizer != nullptr;
  ASSIGN_OR_RETURN(const Json* decoder, reader.Component(root, "decoder", "WordPiece", true));
  tok->decoder_enabled_ = decoder != nullptr;
  if (decoder != nullptr) {
    RETURN_IF_ERROR(reader.Read(*decoder, "decoder", "prefix", &tok->decoder_prefix_));
    RETURN_IF_ERROR(reader.Read(*decoder, "decoder", "cleanup", &tok->decoder_cleanup_));
  }

  std::vector<AddedToken> added;
  if (const Json* list = FieldReader::Find(root, "added_tokens"); list != nullptr) {
    if (!list->is_array()) return reader.Error("added_tokens", "is not an array");
    for (size_t i = 0; i < list->size(); ++i) {
      const Json& entry = (*list)[i];
      const std::string field = absl::StrCat("added_tokens[", i, "]");
      if (!entry.is_object()) return reader.Error(field, "is not an object");
      AddedToken token;
      int64_t id = -1;
      RETURN_IF_ERROR(reader.Read(entry, field, "id", &id));
      RETURN_IF_ERROR(reader.Read(entry, field, "content", &token.content));
      if (id < 0) return reader.Error(field, "has no id");
      token.id = static_cast<int32_t>(id);
      RETURN_IF_ERROR(reader.Read(entry, field, "special", &token.special));
      token.normalized = !token.special;  // HF's default when the field is absent.
      RETURN_IF_ERROR(reader.Read(entry, field, "normalized", &token.normalized));
      RETURN_IF_ERROR(reader.Read(entry, field, "lstrip", &token.lstrip));
      RETURN_IF_ERROR(reader.Read(entry, field, "rstrip", &token.rstrip));
      RETURN_IF_ERROR(reader.Read(entry, field, "single_word", &token.single_word));
      added.push_back(std::move(token));
    }
  }
  RETURN_IF_ERROR(tok->Finish(path, std::move(added)));

  // [CLS]/[SEP] are what the post-processor frames a single sequence with.
  std::string cls = "[CLS]", sep = "[SEP]";
  const Json* post = FieldReader::Find(root, "post_processor");
  const Json* post_type_value =
      post != nullptr && post->is_object() ? FieldReader::Find(*post, "type") : nullptr;
  const std::string post_type = post_type_value != nullptr && post_type_value->is_string()
                                    ? post_type_value->get<std::string>()
                                    : "";
  if (post_type == "TemplateProcessing") {
    // "single": [{"SpecialToken": {"id": "[CLS]", ...}}, {"Sequence": ...}]
    const auto special_name = [](const Json& piece, std::string* name) {
      const Json::json_pointer id("/SpecialToken/id");
      if (piece.contains(id) && piece[id].is_string()) *name = piece[id];
    };
    const Json* single = FieldReader::Find(*post, "single");
    if (single != nullptr && single->is_array() && !single->empty()) {
      special_name(single->front(), &cls);
      special_name(single->back(), &sep);
    }
  } else if (post_type == "BertProcessing" ||
             post_type == "RobertaProcessing") {  // "cls": ["[CLS]", 101]
    for (auto [key, name] : {std::pair{"/cls/0", &cls}, {"/sep/0", &sep}}) {
      const Json::json_pointer pointer(key);
      if (post->contains(pointer) && (*post)[pointer].is_string()) {
        *name = (*post)[pointer];
      }
    }
  }
  tok->special_.cls = tok->TokenToId(cls);
  tok->special_.sep = tok->TokenToId(sep);
  tok->special_.pad = tok->TokenToId("[PAD]");
  if (const Json* padding = FieldReader::Find(root, "padding"); padding != nullptr) {
    std::string pad_token;
    RETURN_IF_ERROR(reader.Read(*padding, "padding", "pad_token", &pad_token));
    if (!pad_token.empty()) tok->special_.pad = tok->TokenToId(pad_token);
  }
  tok->special_.mask = tok->TokenToId("[MASK]");
  return tok;
}

absl::StatusOr<WordPieceOptions> WordPieceTokenizer::ReadTokenizerConfig(const std::string& path) {
  ASSIGN_OR_RETURN(const Json config, ReadJsonObject(path));
  const FieldReader reader(path);
  WordPieceOptions options;
  RETURN_IF_ERROR(reader.Read(config, "", "do_lower_case", &options.lowercase));
  bool strip = false;
  if (FieldReader::Find(config, "strip_accents") != nullptr) {
    RETURN_IF_ERROR(reader.Read(config, "", "strip_accents", &strip));
    options.strip_accents = strip;
  }
  RETURN_IF_ERROR(
      reader.Read(config, "", "tokenize_chinese_chars", &options.tokenize_chinese_chars));
  for (auto [key, token] : {std::pair{"unk_token", &options.unk_token},
                            {"sep_token", &options.sep_token},
                            {"pad_token", &options.pad_token},
                            {"cls_token", &options.cls_token},
                            {"mask_token", &options.mask_token}}) {
    RETURN_IF_ERROR(ReadTokenString(reader, config, key, token));
  }
  return options;
}

absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> WordPieceTokenizer::FromVocabTxt(
    const std::string& path, const WordPieceOptions& options) {
  ASSIGN_OR_RETURN(const std::string text, ReadFile(path));
  std::unique_ptr<WordPieceTokenizer> tok(new WordPieceTokenizer());
  // Python's universal newlines, as transformers reads the file: a line ends
  // at "\n", "\r\n" or "\r"; a final newline does not start another token.
  size_t start = 0;
  int32_t id = 0;
  while (start < text.size()) {
    const size_t end = text.find_first_of("\r\n", start);
    const size_t stop = end == std::string::npos ? text.size() : end;
    tok->vocab_.emplace_back(text.substr(start, stop - start), id++);
    start = stop + (stop < text.size() && text.compare(stop, 2, "\r\n") == 0 ? 2 : 1);
  }
  if (tok->vocab_.empty()) return absl::InvalidArgumentError(absl::StrCat(path, ": empty"));
  tok->unk_token_ = options.unk_token;
  tok->max_input_chars_per_word_ = options.max_input_chars_per_word;
  tok->normalizer_->handle_chinese_chars = options.tokenize_chinese_chars;
  tok->normalizer_->lowercase = options.lowercase;
  tok->normalizer_->strip_accents = options.strip_accents.value_or(options.lowercase);

  // BertTokenizer registers its special tokens as added tokens matched in
  // the raw text (in transformers' SPECIAL_TOKENS_ATTRIBUTES order, which
  // decides the ids of any missing from the vocabulary).
  std::vector<AddedToken> added;
  for (const std::string* content : {&options.unk_token, &options.sep_token, &options.pad_token,
                                     &options.cls_token, &options.mask_token}) {
    AddedToken token;
    token.content = *content;
    token.special = true;
    added.push_back(std::move(token));
  }
  RETURN_IF_ERROR(tok->Finish(path, std::move(added)));
  tok->special_.cls = tok->TokenToId(options.cls_token);
  tok->special_.sep = tok->TokenToId(options.sep_token);
  tok->special_.pad = tok->TokenToId(options.pad_token);
  tok->special_.mask = tok->TokenToId(options.mask_token);
  return tok;
}

absl::StatusOr<std::unique_ptr<WordPieceTokenizer>> WordPieceTokenizer::FromModelDir(
    const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path root(dir);
  if (fs::exists(root / "tokenizer.json", error)) {
    return FromTokenizerJson((root / "tokenizer.json").string());
  }
  if (!fs::exists(root / "vocab.txt", error)) {
    return absl::NotFoundError(absl::StrCat(dir, ": no tokenizer.json or vocab.txt"));
  }
  WordPieceOptions options;
  if (fs::exists(root / "tokenizer_config.json", error)) {
    ASSIGN_OR_RETURN(options, ReadTokenizerConfig((root / "tokenizer_config.json").string()));
  }
  return FromVocabTxt((root / "vocab.txt").string(), options);
}

absl::Status WordPieceTokenizer::Finish(const std::string& source, std::vector<AddedToken> added) {
  int32_t size = 0;
  for (const auto& [token, id] : vocab_) {
    word_start_ids_[token] = id;
    max_token_bytes_ = std::max(max_token_bytes_, token.size());
    if (token.size() > continuing_prefix_.size() &&
        token.compare(0, continuing_prefix_.size(), continuing_prefix_) == 0) {
      continuation_ids_[std::string_view(token).substr(continuing_prefix_.size())] = id;
    }
    size = std::max(size, id + 1);
  }
  const auto unk = word_start_ids_.find(unk_token_);
  if (unk == word_start_ids_.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": the unknown token '", unk_token_, "' is not in the vocabulary"));
  }
  unk_id_ = special_.unk = unk->second;

  // HF AddedVocabulary::add_tokens: the "id" written in tokenizer.json is
  // not used. A token already known (added earlier, or in the vocabulary)
  // keeps that id, any other gets the next id after the vocabulary; for the
  // same id the later token wins.
  int32_t next_id = static_cast<int32_t>(word_start_ids_.size());
  std::map<int32_t, AddedToken> by_id;
  std::unordered_set<std::string> special;
  for (AddedToken& token : added) {
    if (token.content.empty()) continue;
    if (const auto it = added_ids_.find(token.content); it != added_ids_.end()) {
      token.id = it->second;
    } else if (const auto vocab_it = word_start_ids_.find(token.content);
               vocab_it != word_start_ids_.end()) {
      token.id = vocab_it->second;
    } else {
      token.id = next_id++;
    }
    added_ids_[token.content] = token.id;
    if (token.special) special.insert(token.content);
    by_id[token.id] = std::move(token);
  }
  added_tokens_.reserve(by_id.size());
  for (auto& [id, token] : by_id) {
    size = std::max(size, id + 1);
    added_tokens_.push_back(std::move(token));
  }
  id_to_token_.assign(static_cast<size_t>(size), std::nullopt);
  for (const auto& [token, id] : vocab_) id_to_token_[id] = token;
  decode_token_ = id_to_token_;
  for (AddedToken& token : added_tokens_) {
    token.text = token.normalized ? Normalize(token.content) : token.content;
  }
  for (const AddedToken& token : added_tokens_) {
    id_to_token_[token.id] = token.content;  // Added tokens win, as in HF.
    decode_token_[token.id] = token.text;
    if (token.text.empty()) continue;  // Normalizes to nothing: never matches.
    AddedTokenSet& set = token.normalized ? normalized_added_ : raw_added_;
    set.first_byte[static_cast<uint8_t>(token.text[0])] = true;
    set.tokens.push_back(&token);
  }
  // HF skips what decodes to a special token's content, whichever id it has.
  skip_in_decode_.assign(decode_token_.size(), false);
  for (size_t id = 0; id < decode_token_.size(); ++id) {
    skip_in_decode_[id] =
        decode_token_[id].has_value() && special.count(std::string(*decode_token_[id])) > 0;
  }
  return absl::OkStatus();
}

std::optional<std::string_view> WordPieceTokenizer::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) return std::nullopt;
  return id_to_token_[id];
}

int32_t WordPieceTokenizer::TokenToId(std::string_view token) const {
  if (const auto it = added_ids_.find(std::string(token)); it != added_ids_.end()) {
    return it->second;
  }
  const auto it = word_start_ids_.find(token);
  return it == word_start_ids_.end() ? -1 : it->second;
}

std::vector<int32_t> WordPieceTokenizer::Encode(std::string_view utf8_text) const {
  std::vector<int32_t> ids;
  ids.reserve(utf8_text.size() / 4 + 1);
  for (const Segment& segment : SplitOnAddedTokens(utf8_text, raw_added_)) {
    if (segment.added_id >= 0) {
      ids.push_back(segment.added_id);
    } else {
      EncodeNormalized(Normalize(segment.text), &ids);
    }
  }
  return ids;
}

// HF AddedVocabulary::find_matches over a leftmost-longest Aho-Corasick
// automaton. Few added tokens exist (BERT has five), so a first-byte filter
// and direct comparison do the automaton's job.
std::vector<WordPieceTokenizer::Segment> WordPieceTokenizer::SplitOnAddedTokens(
    std::string_view text, const AddedTokenSet& set) const {
  std::vector<Segment> segments;
  size_t start_offset = 0;
  size_t pos = 0;
  while (!set.tokens.empty() && pos < text.size()) {
    if (!set.first_byte[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    const AddedToken* best = nullptr;
    for (const AddedToken* candidate : set.tokens) {
      if ((best == nullptr || candidate->text.size() > best->text.size()) &&
          text.substr(pos, candidate->text.size()) == candidate->text) {
        best = candidate;
      }
    }
    if (best == nullptr) {
      ++pos;
      continue;
    }
    const AddedToken& token = *best;
    size_t start = pos;
    size_t stop = pos + token.text.size();
    pos = stop;  // The automaton resumes here even if the match is discarded.
    if (token.single_word && ((start > 0 && EndsWithWordChar(text.substr(0, start))) ||
                              (stop < text.size() && StartsWithWordChar(text.substr(stop))))) {
      continue;
    }
    if (token.lstrip) {
      size_t new_start = start;
      while (new_start > 0) {
        size_t prev = new_start - 1;
        while (prev > 0 && IsContinuationByte(text[prev])) --prev;
        size_t probe = prev;
        if (!IsBertWhitespace(DecodeUtf8At(text, &probe))) break;
        new_start = prev;
      }
      start = std::max(new_start, start_offset);
    }
    while (token.rstrip && stop < text.size()) {
      size_t next = stop;
      if (!IsBertWhitespace(DecodeUtf8At(text, &next))) break;
      stop = next;
    }
    if (start_offset < start) segments.push_back({text.substr(start_offset, start - start_offset)});
    segments.push_back({text.substr(start, stop - start), token.id});
    start_offset = stop;
  }
  if (start_offset < text.size()) segments.push_back({text.substr(start_offset)});
  return segments;
}

std::string WordPieceTokenizer::Normalize(std::string_view text) const {
  return normalizer_.has_value() ? BertNormalize(text, *normalizer_) : std::string(text);
}

void WordPieceTokenizer::EncodeNormalized(std::string_view normalized,
                                          std::vector<int32_t>* ids) const {
  if (normalized_added_.tokens.empty()) {
    PreTokenizeAndEncode(normalized, ids);
    return;
  }
  for (const Segment& segment : SplitOnAddedTokens(normalized, normalized_added_)) {
    if (segment.added_id >= 0) {
      ids->push_back(segment.added_id);
    } else {
      PreTokenizeAndEncode(segment.text, ids);
    }
  }
}

void WordPieceTokenizer::PreTokenizeAndEncode(std::string_view text,
                                              std::vector<int32_t>* ids) const {
  if (!pre_tokenize_) {
    if (!text.empty()) EncodeWord(text, ids);
    return;
  }
  size_t word_start = 0;
  for (size_t pos = 0; pos < text.size();) {
    const size_t char_start = pos;
    const char32_t c = DecodeUtf8At(text, &pos);
    const bool punctuation = IsBertPunctuation(c);
    if (!punctuation && !IsBertWhitespace(c)) continue;
    if (char_start > word_start) {
      EncodeWord(text.substr(word_start, char_start - word_start), ids);
    }
    if (punctuation) EncodeWord(text.substr(char_start, pos - char_start), ids);
    word_start = pos;
  }
  if (text.size() > word_start) EncodeWord(text.substr(word_start), ids);
}

void WordPieceTokenizer::EncodeWord(std::string_view word, std::vector<int32_t>* ids) const {
  size_t chars = 0;
  for (const char b : word) chars += IsContinuationByte(b) ? 0 : 1;
  if (chars > max_input_chars_per_word_) {
    ids->push_back(unk_id_);
    return;
  }
  const size_t first = ids->size();
  for (size_t start = 0; start < word.size();) {
    const auto& pieces = start == 0 ? word_start_ids_ : continuation_ids_;
    // Longer substrings than the longest token cannot match: start there,
    // on a character boundary, instead of at the end of the word.
    size_t end = std::min(word.size(), start + max_token_bytes_);
    while (end > start && end < word.size() && IsContinuationByte(word[end])) --end;
    int32_t id = -1;
    while (end > start) {
      const auto it = pieces.find(word.substr(start, end - start));
      if (it != pieces.end()) {
        id = it->second;
        break;
      }
      do {
        --end;
      } while (end > start && IsContinuationByte(word[end]));
    }
    if (id < 0) {  // One unmatched piece makes the whole word unknown.
      ids->resize(first);
      ids->push_back(unk_id_);
      return;
    }
    ids->push_back(id);
    start = end;
  }
}

std::string WordPieceTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::vector<std::string_view> tokens;
  tokens.reserve(ids.size());
  for (const int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= decode_token_.size()) continue;
    const std::optional<std::string_view>& token = decode_token_[id];
    if (token.has_value() && !skip_in_decode_[id]) tokens.push_back(*token);
  }
  std::string text;
  if (!decoder_enabled_) {
    for (size_t i = 0; i < tokens.size(); ++i) {
      if (i != 0) text += ' ';
      text += tokens[i];
    }
    return text;
  }
  std::string piece;
  for (size_t i = 0; i < tokens.size(); ++i) {
    piece.assign(tokens[i]);
    if (i != 0) {
      if (piece.compare(0, decoder_prefix_.size(), decoder_prefix_) == 0) {
        piece.erase(0, decoder_prefix_.size());
      } else {
        piece.insert(0, 1, ' ');
      }
    }
    if (decoder_cleanup_) CleanUpTokenization(&piece);
    text += piece;
  }
  return text;
}

}  // namespace docsparse
