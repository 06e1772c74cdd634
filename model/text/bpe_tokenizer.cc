#include "model/text/bpe_tokenizer.h"

#include <algorithm>
#include <filesystem>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "model/text/byte_level.h"
#include "model/text/unicode_text.h"

namespace docsparse {
namespace {

using Json = nlohmann::json;

// Ids index dense tables: a stray huge id must not allocate gigabytes. Real
// vocabularies stay far below this (2^24).
constexpr int64_t kMaxTokenId = (int64_t{1} << 24) - 1;

// Field names in errors quote at most this much of a token.
std::string Quoted(std::string_view token) {
  return absl::StrCat("'", std::string(token.substr(0, 64)), token.size() > 64 ? "...'" : "'");
}

// The "type" of component `name` of tokenizer.json, "" when it is null or
// absent; an error when it is not an object with a string type.
absl::StatusOr<std::string> ComponentType(const JsonFieldReader& reader, const Json& root,
                                          const char* name) {
  const Json* value = JsonFieldReader::Find(root, name);
  if (value == nullptr) return std::string();
  if (!value->is_object()) return reader.Error(name, "is not an object");
  std::string type;
  RETURN_IF_ERROR(reader.Read(*value, name, "type", &type));
  if (type.empty()) return reader.Error(absl::StrCat(name, ".type"), "is missing");
  return type;
}

// One token id of a post-processor, which must name a token we have.
absl::StatusOr<int32_t> FrameId(const JsonFieldReader& reader, const Json& value,
                                const std::string& field, int32_t vocab_size) {
  if (!value.is_number_integer() || value.get<int64_t>() < 0 ||
      value.get<int64_t>() >= vocab_size) {
    return reader.Error(field,
                        absl::StrCat("is not a token id (the vocabulary has ", vocab_size, ")"));
  }
  return static_cast<int32_t>(value.get<int64_t>());
}

}  // namespace

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromModelDir(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code error;
  const fs::path root(dir);
  TransformersTokenizerConfig config;
  if (fs::exists(root / "tokenizer_config.json", error)) {
    ASSIGN_OR_RETURN(config,
                     ReadTransformersTokenizerConfig((root / "tokenizer_config.json").string()));
  }
  return FromTokenizerJson((root / "tokenizer.json").string(), config);
}

absl::StatusOr<std::unique_ptr<BpeTokenizer>> BpeTokenizer::FromTokenizerJson(
    const std::string& path, const TransformersTokenizerConfig& config) {
  ASSIGN_OR_RETURN(const Json root, ReadTokenizerJsonObject(path));
  const JsonFieldReader reader(path);
  std::unique_ptr<BpeTokenizer> tok(new BpeTokenizer());

  ASSIGN_OR_RETURN(const std::string model_type, ComponentType(reader, root, "model"));
  if (model_type != "BPE") {
    return reader.Error("model.type", model_type.empty()
                                          ? std::string("is missing, expected 'BPE'")
                                          : absl::StrCat("is '", model_type, "', expected 'BPE'"));
  }
  RETURN_IF_ERROR(tok->LoadModel(reader, root.at("model")));

  // Byte-level tokenizers have no normalizer; others would change the text
  // before the byte mapping, which we do not implement.
  ASSIGN_OR_RETURN(const std::string normalizer, ComponentType(reader, root, "normalizer"));
  if (!normalizer.empty()) {
    return reader.Error("normalizer.type",
                        absl::StrCat("is '", normalizer, "', expected null (unsupported)"));
  }
  ASSIGN_OR_RETURN(const std::string pre_tokenizer, ComponentType(reader, root, "pre_tokenizer"));
  if (pre_tokenizer != "ByteLevel") {
    return reader.Error(
        "pre_tokenizer.type",
        absl::StrCat(pre_tokenizer.empty() ? "is missing" : "is '" + pre_tokenizer + "'",
                     ", expected 'ByteLevel'"));
  }
  const Json& pre = root.at("pre_tokenizer");
  if (JsonFieldReader::Find(pre, "add_prefix_space") == nullptr) {
    return reader.Error("pre_tokenizer.add_prefix_space", "is missing");  // HF requires it.
  }
  RETURN_IF_ERROR(reader.Read(pre, "pre_tokenizer", "add_prefix_space", &tok->add_prefix_space_));
  RETURN_IF_ERROR(reader.Read(pre, "pre_tokenizer", "use_regex", &tok->use_regex_));

  ASSIGN_OR_RETURN(const std::string decoder, ComponentType(reader, root, "decoder"));
  if (!decoder.empty() && decoder != "ByteLevel") {
    return reader.Error("decoder.type",
                        absl::StrCat("is '", decoder, "', expected 'ByteLevel' or null"));
  }
  tok->byte_level_decoder_ = !decoder.empty();
  tok->cleanup_ =
      config.clean_up_tokenization_spaces && config.clean_up_tokenization_spaces_for_bpe;

  std::vector<AddedTokenSpec> added;
  if (const Json* list = JsonFieldReader::Find(root, "added_tokens"); list != nullptr) {
    if (!list->is_array()) return reader.Error("added_tokens", "is not an array");
    for (size_t i = 0; i < list->size(); ++i) {
      const Json& entry = (*list)[i];
      const std::string field = absl::StrCat("added_tokens[", i, "]");
      if (!entry.is_object()) return reader.Error(field, "is not an object");
      AddedTokenSpec token;
      if (JsonFieldReader::Find(entry, "content") == nullptr) {
        return reader.Error(field + ".content", "is missing");
      }
      RETURN_IF_ERROR(reader.Read(entry, field, "content", &token.content));
      RETURN_IF_ERROR(reader.Read(entry, field, "special", &token.special));
      token.normalized = !token.special;  // HF's default when the field is absent.
      RETURN_IF_ERROR(reader.Read(entry, field, "normalized", &token.normalized));
      RETURN_IF_ERROR(reader.Read(entry, field, "lstrip", &token.lstrip));
      RETURN_IF_ERROR(reader.Read(entry, field, "rstrip", &token.rstrip));
      RETURN_IF_ERROR(reader.Read(entry, field, "single_word", &token.single_word));
      added.push_back(std::move(token));
    }
  }
  BpeTokenizer& t = *tok;
  t.added_.Build(
      added,
      [&t](std::string_view content) {
        const auto it = t.vocab_.find(std::string(content));
        return it == t.vocab_.end() ? -1 : it->second;
      },
      static_cast<int32_t>(t.vocab_.size()));

  int32_t size = t.added_.end_id();
  for (const auto& [token, id] : t.vocab_) size = std::max(size, id + 1);
  // Pointers into vocab_'s keys and added_'s tokens, which never move: 8
  // bytes per id however long the tokens.
  t.id_to_token_.assign(static_cast<size_t>(size), nullptr);
  for (const auto& [token, id] : t.vocab_) t.id_to_token_[id] = &token;
  for (const auto& [id, token] : t.added_.by_id()) t.id_to_token_[id] = &token.content;
  t.skip_in_decode_.assign(static_cast<size_t>(size), false);
  for (int32_t id = 0; id < size; ++id) {
    t.skip_in_decode_[id] =
        t.id_to_token_[id] != nullptr && t.added_.IsSpecialContent(*t.id_to_token_[id]);
  }
  for (int b = 0; b < 256; ++b) {
    const auto it = t.vocab_.find(ByteLevelChars()[b]);
    t.byte_ids_[b] = it == t.vocab_.end() ? -1 : it->second;
  }

  RETURN_IF_ERROR(t.LoadPostProcessor(reader, root));
  // A token tokenizer_config.json names (or sets to null: none), else the
  // RobertaTokenizer default.
  const auto id_of = [&t, &config](const char* key, const char* fallback) {
    const auto it = config.tokens.find(key);
    if (it == config.tokens.end()) return t.TokenToId(fallback);
    return it->second.has_value() ? t.TokenToId(*it->second) : -1;
  };
  t.special_.cls = t.frame_prefix_.empty() ? id_of("cls_token", "<s>") : t.frame_prefix_.front();
  t.special_.sep = t.frame_suffix_.empty() ? id_of("sep_token", "</s>") : t.frame_suffix_.back();
  t.special_.pad = id_of("pad_token", "<pad>");
  t.special_.unk = t.unk_id_ >= 0 ? t.unk_id_ : id_of("unk_token", "<unk>");
  t.special_.mask = id_of("mask_token", "<mask>");
  return tok;
}

absl::Status BpeTokenizer::LoadModel(const JsonFieldReader& reader, const Json& model) {
  if (const Json* dropout = JsonFieldReader::Find(model, "dropout"); dropout != nullptr) {
    if (!dropout->is_number()) return reader.Error("model.dropout", "is not a number");
    if (dropout->get<double>() != 0.0) {
      return reader.Error("model.dropout", "must be null: BPE dropout is a training setting");
    }
  }
  bool byte_fallback = false;
  RETURN_IF_ERROR(reader.Read(model, "model", "byte_fallback", &byte_fallback));
  if (byte_fallback) return reader.Error("model.byte_fallback", "is true (unsupported)");
  for (const char* key : {"continuing_subword_prefix", "end_of_word_suffix"}) {
    std::string affix;
    RETURN_IF_ERROR(reader.Read(model, "model", key, &affix));
    if (!affix.empty()) {
      return reader.Error(
          JsonFieldReader::Dotted("model", key),
          absl::StrCat("is ", Quoted(affix), ", expected null or \"\" (byte-level BPE has none)"));
    }
  }
  RETURN_IF_ERROR(reader.Read(model, "model", "fuse_unk", &fuse_unk_));
  RETURN_IF_ERROR(reader.Read(model, "model", "ignore_merges", &ignore_merges_));

  const Json* vocab = JsonFieldReader::Find(model, "vocab");
  if (vocab == nullptr || !vocab->is_object()) {
    return reader.Error("model.vocab", "is missing or not an object");
  }
  vocab_.reserve(vocab->size());
  for (const auto& [token, id] : vocab->items()) {
    if (!id.is_number_integer() || id.get<int64_t>() < 0 || id.get<int64_t>() > kMaxTokenId) {
      return reader.Error(absl::StrCat("model.vocab[", Quoted(token), "]"),
                          absl::StrCat("is not an integer in [0, ", kMaxTokenId, "]"));
    }
    vocab_[token] = static_cast<int32_t>(id.get<int64_t>());
  }
  std::string unk_token;
  RETURN_IF_ERROR(reader.Read(model, "model", "unk_token", &unk_token));
  if (!unk_token.empty()) {
    // HF fails only when it meets an unknown byte; fail early instead.
    const auto it = vocab_.find(unk_token);
    if (it == vocab_.end()) {
      return reader.Error("model.unk_token",
                          absl::StrCat(Quoted(unk_token), " is not in the vocabulary"));
    }
    unk_id_ = it->second;
  }
  const Json* merges = JsonFieldReader::Find(model, "merges");
  if (merges == nullptr || !merges->is_array()) {
    return reader.Error("model.merges", "is missing or not an array");
  }
  return LoadMerges(reader, *merges);
}

// Merges come as "a b" strings (tokenizers < 0.20, and merges.txt) or as
// ["a", "b"] pairs. The rank is the position in the list (after "#version"
// lines); for a pair listed twice the later rank wins, as in HF's map.
absl::Status BpeTokenizer::LoadMerges(const JsonFieldReader& reader, const Json& merges) {
  merges_.reserve(merges.size());
  int32_t rank = 0;
  for (size_t i = 0; i < merges.size(); ++i) {
    const Json& entry = merges[i];
    const std::string field = absl::StrCat("model.merges[", i, "]");
    std::string left, right;
    if (entry.is_string()) {
      const std::string& line = entry.get_ref<const std::string&>();
      if (line.rfind("#version", 0) == 0) continue;
      const size_t space = line.find(' ');
      if (space == std::string::npos || line.find(' ', space + 1) != std::string::npos) {
        return reader.Error(field, "is not two tokens separated by one space");
      }
      left = line.substr(0, space);
      right = line.substr(space + 1);
    } else if (entry.is_array() && entry.size() == 2 && entry[0].is_string() &&
               entry[1].is_string()) {
      left = entry[0].get<std::string>();
      right = entry[1].get<std::string>();
    } else {
      return reader.Error(field, "is neither \"a b\" nor [\"a\", \"b\"]");
    }
    int32_t part_ids[3] = {};
    const std::string parts[3] = {left, right, left + right};  // The merge makes the third.
    for (int k = 0; k < 3; ++k) {
      const auto it = vocab_.find(parts[k]);
      if (it == vocab_.end()) {
        return reader.Error(field, absl::StrCat(Quoted(parts[k]), " is not in the vocabulary"));
      }
      part_ids[k] = it->second;
    }
    merges_[PairKey(part_ids[0], part_ids[1])] = {rank++, part_ids[2]};
  }
  return absl::OkStatus();
}

absl::Status BpeTokenizer::LoadPostProcessor(const JsonFieldReader& reader, const Json& root) {
  const int32_t size = vocab_size();
  ASSIGN_OR_RETURN(const std::string type, ComponentType(reader, root, "post_processor"));
  std::vector<std::pair<const Json*, std::string>> processors;  // With their field names.
  if (type == "Sequence") {
    const Json* list = JsonFieldReader::Find(root.at("post_processor"), "processors");
    if (list == nullptr || !list->is_array()) {
      return reader.Error("post_processor.processors", "is missing or not an array");
    }
    for (size_t i = 0; i < list->size(); ++i) {
      processors.emplace_back(&(*list)[i], absl::StrCat("post_processor.processors[", i, "]"));
    }
  } else if (!type.empty()) {
    processors.emplace_back(&root.at("post_processor"), "post_processor");
  }
  for (const auto& [processor, field] : processors) {
    if (!processor->is_object()) return reader.Error(field, "is not an object");
    std::string kind;
    RETURN_IF_ERROR(reader.Read(*processor, field, "type", &kind));
    if (kind == "ByteLevel") continue;  // Offsets only.
    if (kind == "RobertaProcessing" || kind == "BertProcessing") {
      // "cls": ["<s>", 0], "sep": ["</s>", 2]: HF uses these ids as written.
      for (const auto& [key, out] : {std::pair{"cls", &frame_prefix_}, {"sep", &frame_suffix_}}) {
        const Json* pair = JsonFieldReader::Find(*processor, key);
        const std::string name = JsonFieldReader::Dotted(field, key);
        if (pair == nullptr || !pair->is_array() || pair->size() != 2) {
          return reader.Error(name, "is not a [token, id] pair");
        }
        ASSIGN_OR_RETURN(const int32_t id, FrameId(reader, (*pair)[1], name + "[1]", size));
        *out = {id};
      }
    } else if (kind == "TemplateProcessing") {
      // "single": [{"SpecialToken": {"id": "<s>"}}, {"Sequence": {"id": "A"}}, ...];
      // the ids of a special token are in "special_tokens": {"<s>": {"ids": [0]}}.
      const Json* single = JsonFieldReader::Find(*processor, "single");
      const Json* specials = JsonFieldReader::Find(*processor, "special_tokens");
      if (single == nullptr || !single->is_array()) {
        return reader.Error(field + ".single", "is missing or not an array");
      }
      std::vector<int32_t>* out = &frame_prefix_;
      frame_prefix_.clear();
      frame_suffix_.clear();
      for (size_t i = 0; i < single->size(); ++i) {
        const Json& piece = (*single)[i];
        const std::string name = absl::StrCat(field, ".single[", i, "]");
        if (JsonFieldReader::Find(piece, "Sequence") != nullptr) {
          out = &frame_suffix_;
          continue;
        }
        const Json* special = JsonFieldReader::Find(piece, "SpecialToken");
        std::string token;
        if (special == nullptr) return reader.Error(name, "is neither Sequence nor SpecialToken");
        RETURN_IF_ERROR(reader.Read(*special, name + ".SpecialToken", "id", &token));
        const Json* entry =
            specials == nullptr ? nullptr : JsonFieldReader::Find(*specials, token.c_str());
        const Json* ids = entry == nullptr ? nullptr : JsonFieldReader::Find(*entry, "ids");
        const std::string ids_field = absl::StrCat(field, ".special_tokens[", Quoted(token), "]");
        if (ids == nullptr || !ids->is_array()) {
          return reader.Error(ids_field + ".ids", "is missing or not an array");
        }
        for (size_t k = 0; k < ids->size(); ++k) {
          ASSIGN_OR_RETURN(
              const int32_t id,
              FrameId(reader, (*ids)[k], absl::StrCat(ids_field, ".ids[", k, "]"), size));
          out->push_back(id);
        }
      }
    } else {
      return reader.Error(field + ".type",
                          absl::StrCat("is '", kind,
                                       "', expected RobertaProcessing, TemplateProcessing, "
                                       "BertProcessing, ByteLevel, Sequence or null"));
    }
  }
  return absl::OkStatus();
}

std::optional<std::string_view> BpeTokenizer::IdToToken(int32_t id) const {
  if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size() || !id_to_token_[id]) {
    return std::nullopt;
  }
  return std::string_view(*id_to_token_[id]);
}

int32_t BpeTokenizer::TokenToId(std::string_view token) const {
  const int32_t added = added_.IdOf(token);
  if (added >= 0) return added;
  const auto it = vocab_.find(std::string(token));
  return it == vocab_.end() ? -1 : it->second;
}

std::vector<int32_t> BpeTokenizer::Encode(std::string_view utf8_text) const {
  std::vector<int32_t> ids;
  ids.reserve(utf8_text.size() / 3 + 1);
  std::vector<AddedVocabulary::Segment> raw, normalized;
  added_.Split(utf8_text, /*normalized=*/false, &raw);
  for (const AddedVocabulary::Segment& segment : raw) {
    if (segment.id >= 0) {
      ids.push_back(segment.id);
      continue;
    }
    // No normalizer: the normalized text is the raw text.
    normalized.clear();
    added_.Split(segment.text, /*normalized=*/true, &normalized);
    for (const AddedVocabulary::Segment& piece : normalized) {
      if (piece.id >= 0) {
        ids.push_back(piece.id);
      } else {
        EncodePiece(piece.text, &ids);
      }
    }
  }
  return ids;
}

void BpeTokenizer::EncodePiece(std::string_view piece, std::vector<int32_t>* ids) const {
  if (piece.empty()) return;
  std::string prefixed;
  if (add_prefix_space_ && piece.front() != ' ') {
    prefixed = " " + std::string(piece);
    piece = prefixed;
  }
  if (!use_regex_) {
    EncodeWord(piece, ids);
    return;
  }
  std::vector<std::string_view> words;
  SplitGpt2Words(piece, &words);
  for (const std::string_view word : words) EncodeWord(word, ids);
}

// HF models::bpe::Word::merge_all, step for step: a queue of candidate
// merges ordered by (rank, position); an entry is skipped when its left
// symbol was merged away, has no right neighbour, or the pair there no
// longer merges into the same token.
void BpeTokenizer::EncodeWord(std::string_view word, std::vector<int32_t>* ids) const {
  if (ignore_merges_) {
    std::string chars;
    for (const char b : word) chars += ByteLevelChars()[static_cast<uint8_t>(b)];
    const auto it = vocab_.find(chars);
    if (it != vocab_.end()) {
      ids->push_back(it->second);
      return;
    }
  }
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    int32_t length;  // In bytes; 0 once merged into its left neighbour.
  };
  std::vector<Symbol> symbols;
  symbols.reserve(word.size());
  const auto add = [&symbols](int32_t id, int32_t length) {
    const int32_t index = static_cast<int32_t>(symbols.size());
    if (!symbols.empty()) symbols.back().next = index;
    symbols.push_back({id, index - 1, -1, length});
  };
  int32_t pending_unk_length = 0;  // Unknown bytes not yet added.
  for (const char b : word) {
    const int32_t id = byte_ids_[static_cast<uint8_t>(b)];
    if (id >= 0) {
      if (pending_unk_length > 0) add(unk_id_, pending_unk_length);
      pending_unk_length = 0;
      add(id, 1);
    } else if (unk_id_ >= 0) {  // Without an unknown token the byte is dropped.
      if (pending_unk_length > 0 && !fuse_unk_) add(unk_id_, pending_unk_length);
      pending_unk_length = (fuse_unk_ ? pending_unk_length : 0) + 1;
    }
  }
  if (pending_unk_length > 0) add(unk_id_, pending_unk_length);

  struct Candidate {
    int32_t rank;
    int32_t pos;
    int32_t new_id;
    bool operator>(const Candidate& other) const {
      return rank != other.rank ? rank > other.rank : pos > other.pos;
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<Candidate>> queue;
  const auto find_merge = [this](int32_t a, int32_t b) -> const Merge* {
    const auto it = merges_.find(PairKey(a, b));
    return it == merges_.end() ? nullptr : &it->second;
  };
  for (size_t i = 0; i + 1 < symbols.size(); ++i) {
    if (const Merge* m = find_merge(symbols[i].id, symbols[i + 1].id)) {
      queue.push({m->rank, static_cast<int32_t>(i), m->new_id});
    }
  }
  while (!queue.empty()) {
    const Candidate top = queue.top();
    queue.pop();
    Symbol& left = symbols[top.pos];
    if (left.length == 0 || left.next == -1) continue;
    const int32_t right_pos = left.next;
    const Symbol right = symbols[right_pos];
    const Merge* current = find_merge(left.id, right.id);
    if (current == nullptr || current->new_id != top.new_id) continue;

    left.id = top.new_id;
    left.length += right.length;
    left.next = right.next;
    symbols[right_pos].length = 0;
    if (right.next >= 0) symbols[right.next].prev = top.pos;
    if (left.prev >= 0) {
      if (const Merge* m = find_merge(symbols[left.prev].id, left.id)) {
        queue.push({m->rank, left.prev, m->new_id});
      }
    }
    if (left.next >= 0) {
      if (const Merge* m = find_merge(left.id, symbols[left.next].id)) {
        queue.push({m->rank, top.pos, m->new_id});
      }
    }
  }
  for (const Symbol& symbol : symbols) {
    if (symbol.length > 0) ids->push_back(symbol.id);
  }
}

std::string BpeTokenizer::Decode(const std::vector<int32_t>& ids) const {
  std::string bytes;
  bool first = true;
  for (const int32_t id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= id_to_token_.size()) continue;
    const std::string* token = id_to_token_[id];
    if (token == nullptr || skip_in_decode_[id]) continue;
    if (!byte_level_decoder_) {  // HF joins the tokens with spaces.
      if (!first) bytes += ' ';
      bytes += *token;
      first = false;
      continue;
    }
    // A token made of stand-in characters becomes their bytes; any other
    // (an added token such as " hello ") keeps its UTF-8 as it is.
    std::string mapped;
    bool all_mapped = true;
    for (size_t pos = 0; pos < token->size() && all_mapped;) {
      const int byte = ByteOfByteLevelChar(DecodeUtf8At(*token, &pos));
      all_mapped = byte >= 0;
      mapped.push_back(static_cast<char>(byte));
    }
    bytes += all_mapped ? mapped : *token;
  }
  std::string text = byte_level_decoder_ ? Utf8Lossy(bytes) : std::move(bytes);
  if (cleanup_) CleanUpTokenizationSpaces(&text);
  return text;
}

}  // namespace docsparse
