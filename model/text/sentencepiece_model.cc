#include "model/text/sentencepiece_model.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "model/text/unicode_text.h"

namespace docsparse {
namespace {

constexpr std::string_view kSpaceSymbol = "\xe2\x96\x81";  // "▁"
// sentencepiece's limits: rules matched per position, piece size.
constexpr size_t kMaxTrieResults = 32;
constexpr size_t kMaxPieceSize = 8000;

// Just enough of the protobuf wire format for ModelProto; every read is
// bounds-checked, so a malformed file is an error, not a crash.
class WireReader {
 public:
  explicit WireReader(std::string_view bytes) : bytes_(bytes) {}

  bool done() const { return pos_ >= bytes_.size(); }

  // The next field's number and wire type; false at a malformed key.
  bool Key(uint32_t* field, uint32_t* wire_type) {
    uint64_t key = 0;
    if (!Varint(&key)) return false;
    *field = static_cast<uint32_t>(key >> 3);
    *wire_type = static_cast<uint32_t>(key & 7);
    return true;
  }
  bool Varint(uint64_t* value) {
    *value = 0;
    for (int shift = 0; shift < 64 && pos_ < bytes_.size(); shift += 7) {
      const uint8_t b = static_cast<uint8_t>(bytes_[pos_++]);
      *value |= static_cast<uint64_t>(b & 0x7F) << shift;
      if ((b & 0x80) == 0) return true;
    }
    return false;
  }
  bool Fixed32(uint32_t* value) {
    if (bytes_.size() - pos_ < 4) return false;
    *value = 0;
    for (int k = 3; k >= 0; --k) {
      *value = (*value << 8) | static_cast<uint8_t>(bytes_[pos_ + static_cast<size_t>(k)]);
    }
    pos_ += 4;
    return true;
  }
  bool Bytes(std::string_view* value) {
    uint64_t length = 0;
    if (!Varint(&length) || length > bytes_.size() - pos_) return false;
    *value = bytes_.substr(pos_, static_cast<size_t>(length));
    pos_ += static_cast<size_t>(length);
    return true;
  }
  bool Skip(uint32_t wire_type) {
    uint64_t ignored = 0;
    uint32_t ignored32 = 0;
    std::string_view ignored_bytes;
    switch (wire_type) {
      case 0:
        return Varint(&ignored);
      case 1:
        if (bytes_.size() - pos_ < 8) return false;
        pos_ += 8;
        return true;
      case 2:
        return Bytes(&ignored_bytes);
      case 5:
        return Fixed32(&ignored32);
      default:
        return false;
    }
  }
  // Calls `on_field(field, wire_type)` for each field; it must consume the
  // value (or return false to skip it). False on malformed input.
  template <typename F>
  bool ForEachField(F on_field) {
    while (!done()) {
      uint32_t field = 0, wire_type = 0;
      if (!Key(&field, &wire_type)) return false;
      bool consumed = false;
      if (!on_field(field, wire_type, &consumed)) return false;
      if (!consumed && !Skip(wire_type)) return false;
    }
    return true;
  }

 private:
  std::string_view bytes_;
  size_t pos_ = 0;
};

// A bool or enum field (wire type 0) into *out.
bool ReadVarint(WireReader& reader, uint32_t wire_type, uint64_t* out, bool* consumed) {
  if (wire_type != 0) return true;  // Skipped, as protobuf skips a mismatched type.
  *consumed = true;
  return reader.Varint(out);
}
bool ReadBytes(WireReader& reader, uint32_t wire_type, std::string_view* out, bool* consumed) {
  if (wire_type != 2) return true;
  *consumed = true;
  return reader.Bytes(out);
}

// Darts-clone unit fields.
bool HasLeaf(uint32_t unit) { return ((unit >> 8) & 1) == 1; }
uint32_t Value(uint32_t unit) { return unit & ((1U << 31) - 1); }
uint32_t Label(uint32_t unit) { return unit & ((1U << 31) | 0xFF); }
uint32_t Offset(uint32_t unit) { return (unit >> 10) << ((unit & (1U << 9)) >> 6); }

}  // namespace

absl::StatusOr<std::unique_ptr<SentencePieceModel>> SentencePieceModel::Parse(
    std::string_view serialized, const std::string& source) {
  std::unique_ptr<SentencePieceModel> model(new SentencePieceModel());
  const auto refuse = [&source](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat(source, ": not a SentencePiece model (", why, ")"));
  };
  uint64_t model_type = 1;  // UNIGRAM, the default.
  uint64_t byte_fallback = 0;
  std::string_view charsmap, denormalizer_charsmap;
  bool bad_piece = false;
  WireReader reader(serialized);
  const bool well_formed =
      reader.ForEachField([&](uint32_t field, uint32_t wire_type, bool* consumed) {
        std::string_view message;
        if (field == 1 || field == 2 || field == 3 || field == 5) {
          if (!ReadBytes(reader, wire_type, &message, consumed)) return false;
          if (!*consumed) return true;
        }
        WireReader inner(message);
        uint64_t value = 0;
        std::string_view bytes;
        switch (field) {
          case 1: {  // SentencePiece: piece = 1, score = 2, type = 3.
            SentencePieceEntry entry;
            const bool ok = inner.ForEachField([&](uint32_t f, uint32_t w, bool* used) {
              if (f == 1) {
                if (!ReadBytes(inner, w, &bytes, used)) return false;
                if (*used) entry.piece.assign(bytes);
              } else if (f == 2 && w == 5) {
                uint32_t bits = 0;
                *used = true;
                if (!inner.Fixed32(&bits)) return false;
                std::memcpy(&entry.score, &bits, sizeof(bits));
              } else if (f == 3) {
                if (!ReadVarint(inner, w, &value, used)) return false;
                // proto2 keeps the default for a value the enum does not have.
                if (*used && value >= 1 && value <= 6) entry.type = static_cast<PieceType>(value);
              }
              return true;
            });
            if (!ok) bad_piece = true;
            model->pieces_.push_back(std::move(entry));
            return ok;
          }
          case 2:  // TrainerSpec.
            return inner.ForEachField([&](uint32_t f, uint32_t w, bool* used) {
              if (f == 3) return ReadVarint(inner, w, &model_type, used);
              if (f == 35) return ReadVarint(inner, w, &byte_fallback, used);
              if (f == 24) {
                if (!ReadVarint(inner, w, &value, used)) return false;
                if (*used) model->treat_whitespace_as_suffix_ = value != 0;
              }
              if (f == 44) {
                if (!ReadBytes(inner, w, &bytes, used)) return false;
                if (*used) model->unk_surface_.assign(bytes);
              }
              return true;
            });
          case 3:  // NormalizerSpec.
            return inner.ForEachField([&](uint32_t f, uint32_t w, bool* used) {
              if (f == 2) return ReadBytes(inner, w, &charsmap, used);
              bool* flag = f == 3   ? &model->add_dummy_prefix_
                           : f == 4 ? &model->remove_extra_whitespaces_
                           : f == 5 ? &model->escape_whitespaces_
                                    : nullptr;
              if (flag == nullptr) return true;
              if (!ReadVarint(inner, w, &value, used)) return false;
              if (*used) *flag = value != 0;
              return true;
            });
          case 5:  // The denormalizer's NormalizerSpec.
            return inner.ForEachField([&](uint32_t f, uint32_t w, bool* used) {
              return f != 2 || ReadBytes(inner, w, &denormalizer_charsmap, used);
            });
          default:
            return true;
        }
      });
  if (!well_formed || bad_piece) return refuse("malformed ModelProto");
  if (model_type != 1) return refuse(absl::StrCat("model_type ", model_type, " is not UNIGRAM"));
  if (byte_fallback != 0) return refuse("byte_fallback is unsupported");
  if (!denormalizer_charsmap.empty()) return refuse("a denormalizer is unsupported");
  if (model->pieces_.empty()) return refuse("no pieces");

  // sentencepiece's ModelInterface::InitializePieces checks, and UTF-8
  // (decoded text is made of the pieces).
  std::unordered_set<std::string_view> normal, reserved;
  for (size_t id = 0; id < model->pieces_.size(); ++id) {
    const SentencePieceEntry& entry = model->pieces_[id];
    const std::string where = absl::StrCat("piece ", id);
    if (entry.piece.empty()) return refuse(where + " is empty");
    if (entry.piece.size() >= kMaxPieceSize) return refuse(where + " is too long");
    if (entry.piece.find('\0') != std::string::npos) return refuse(where + " holds a NUL");
    if (!ValidateUtf8(entry.piece).ok()) return refuse(where + " is not valid UTF-8");
    if (!std::isfinite(entry.score)) return refuse(where + " has a NaN or infinite score");
    const bool is_normal = entry.type == PieceType::kNormal ||
                           entry.type == PieceType::kUserDefined ||
                           entry.type == PieceType::kUnused;
    if (!(is_normal ? normal : reserved).insert(entry.piece).second) {
      return refuse(where + " is defined twice");
    }
    model->piece_ids_.emplace(entry.piece, static_cast<int>(id));
    switch (entry.type) {
      case PieceType::kByte:
        return refuse("byte pieces without byte_fallback");
      case PieceType::kUnknown:
        if (model->unk_id_ >= 0) return refuse("two unknown pieces");
        model->unk_id_ = static_cast<int>(id);
        break;
      case PieceType::kUserDefined:
        model->user_defined_.push_back(entry.piece);
        break;
      default:
        break;
    }
    if (entry.type != PieceType::kControl && entry.type != PieceType::kUnknown) {
      std::string_view rest = entry.piece;
      if (rest.substr(0, kSpaceSymbol.size()) == kSpaceSymbol) rest.remove_prefix(3);
      if (rest.find(kSpaceSymbol) != std::string_view::npos) {
        model->has_internal_space_symbol_ = true;
      }
    }
  }
  if (model->unk_id_ < 0) return refuse("no unknown piece");

  // The character map: <trie size (uint32 LE)><double array><replacements>,
  // with sentencepiece 0.2's size checks.
  if (!charsmap.empty()) {
    if (charsmap.size() <= 4) return refuse("normalizer_spec.precompiled_charsmap is broken");
    uint32_t trie_size = 0;
    for (int k = 3; k >= 0; --k) {
      trie_size = (trie_size << 8) | static_cast<uint8_t>(charsmap[static_cast<size_t>(k)]);
    }
    if (trie_size >= charsmap.size() - 4 || trie_size < 1024 || (trie_size & 0x3FF) != 0) {
      return refuse("normalizer_spec.precompiled_charsmap has a bad trie size");
    }
    model->trie_.resize(trie_size / 4);
    for (size_t i = 0; i < model->trie_.size(); ++i) {
      uint32_t unit = 0;
      for (int k = 3; k >= 0; --k) {
        unit = (unit << 8) | static_cast<uint8_t>(charsmap[4 + 4 * i + static_cast<size_t>(k)]);
      }
      model->trie_[i] = unit;
    }
    model->replacements_.assign(charsmap.substr(4 + trie_size));
  }
  return model;
}

int SentencePieceModel::PieceToId(std::string_view piece) const {
  const auto it = piece_ids_.find(std::string(piece));
  return it == piece_ids_.end() ? -1 : it->second;
}

size_t SentencePieceModel::CommonPrefixSearch(std::string_view key,
                                              std::pair<size_t, uint32_t>* results,
                                              size_t max_results) const {
  if (trie_.empty()) return 0;
  size_t found = 0;
  size_t node_pos = Offset(trie_[0]);
  for (size_t i = 0; i < key.size(); ++i) {
    const uint8_t label = static_cast<uint8_t>(key[i]);
    node_pos ^= label;
    if (node_pos >= trie_.size()) return found;
    const uint32_t unit = trie_[node_pos];
    if (Label(unit) != label) return found;
    node_pos ^= Offset(unit);
    if (HasLeaf(unit)) {
      if (node_pos >= trie_.size()) return found;
      if (found < max_results) results[found] = {i + 1, Value(trie_[node_pos])};
      ++found;
    }
  }
  return found;
}

// sentencepiece 0.2 Normalizer::NormalizePrefix.
std::pair<std::string_view, size_t> SentencePieceModel::NormalizePrefix(
    std::string_view input) const {
  // User-defined pieces pass through whole (the longest that matches).
  size_t user_defined = 0;
  for (const std::string& piece : user_defined_) {
    if (piece.size() > user_defined && input.substr(0, piece.size()) == piece) {
      user_defined = piece.size();
    }
  }
  if (user_defined > 0) return {input.substr(0, user_defined), user_defined};

  std::pair<size_t, uint32_t> results[kMaxTrieResults];
  const size_t count =
      std::min(CommonPrefixSearch(input, results, kMaxTrieResults), kMaxTrieResults);
  size_t longest_length = 0;
  uint32_t longest_value = 0;
  for (size_t k = 0; k < count; ++k) {
    if (longest_length == 0 || results[k].first > longest_length) {
      longest_length = results[k].first;
      longest_value = results[k].second;
    }
  }
  if (longest_length == 0 || longest_value >= replacements_.size()) {
    size_t next = 0;
    const char32_t c = DecodeUtf8At(input, &next);
    if (c == 0xFFFD && next == 1) return {"\xEF\xBF\xBD", 1};  // Malformed: one byte.
    return {input.substr(0, next), next};
  }
  // A replacement runs to its NUL (or the end of the map).
  const std::string_view rest = std::string_view(replacements_).substr(longest_value);
  return {rest.substr(0, rest.find('\0')), longest_length};
}

// sentencepiece 0.2 Normalizer::Normalize.
void SentencePieceModel::Normalize(std::string_view input, std::string* normalized) const {
  normalized->clear();
  if (remove_extra_whitespaces_) {  // Leading whitespace goes.
    while (!input.empty()) {
      const auto [piece, consumed] = NormalizePrefix(input);
      if (piece != " ") break;
      input.remove_prefix(consumed);
    }
  }
  if (input.empty()) return;
  const std::string_view space = escape_whitespaces_ ? kSpaceSymbol : " ";
  normalized->reserve(input.size() + input.size() / 2);
  if (!treat_whitespace_as_suffix_ && add_dummy_prefix_) normalized->append(space);
  bool is_prev_space = remove_extra_whitespaces_;
  while (!input.empty()) {
    auto [piece, consumed] = NormalizePrefix(input);
    while (is_prev_space && !piece.empty() && piece.front() == ' ') piece.remove_prefix(1);
    if (!piece.empty()) {
      for (const char c : piece) {
        if (c == ' ') {
          normalized->append(space);
        } else {
          normalized->push_back(c);
        }
      }
      is_prev_space = piece.back() == ' ';
    }
    input.remove_prefix(consumed);
    if (!remove_extra_whitespaces_) is_prev_space = false;
  }
  if (remove_extra_whitespaces_) {  // So does trailing whitespace.
    while (normalized->size() >= space.size() &&
           normalized->compare(normalized->size() - space.size(), space.size(), space) == 0) {
      normalized->resize(normalized->size() - space.size());
    }
  }
  if (treat_whitespace_as_suffix_ && add_dummy_prefix_) normalized->append(space);
}

// sentencepiece 0.2 SentencePieceProcessor::Decode (no byte pieces here).
std::string SentencePieceModel::Decode(const std::vector<int>& ids) const {
  std::string text;
  bool is_bos_ws = true;  // Whether a leading "▁" may still be the dummy prefix.
  bool bos_ws_seen = false;
  for (const int id : ids) {
    if (id < 0 || static_cast<size_t>(id) >= pieces_.size()) continue;
    if (bos_ws_seen || !text.empty()) is_bos_ws = false;
    bos_ws_seen = false;
    const SentencePieceEntry& entry = pieces_[static_cast<size_t>(id)];
    if (entry.type == PieceType::kControl) continue;  // Invisible.
    if (entry.type == PieceType::kUnknown) {
      text += unk_surface_;
      continue;
    }
    std::string_view piece = entry.piece;
    const auto consume_space = [&piece] {
      if (piece.substr(0, kSpaceSymbol.size()) != kSpaceSymbol) return false;
      piece.remove_prefix(kSpaceSymbol.size());
      return true;
    };
    if (is_bos_ws && (add_dummy_prefix_ || remove_extra_whitespaces_)) {
      // With remove_extra_whitespaces every leading "▁" piece is dropped.
      bos_ws_seen = consume_space() && !remove_extra_whitespaces_;
    }
    if (consume_space()) text.push_back(' ');
    if (!has_internal_space_symbol_) {
      text.append(piece);
      continue;
    }
    for (size_t pos = 0; pos < piece.size();) {
      if (piece.compare(pos, kSpaceSymbol.size(), kSpaceSymbol) == 0) {
        text.push_back(' ');
        pos += kSpaceSymbol.size();
      } else {
        text.push_back(piece[pos++]);
      }
    }
  }
  return text;
}

}  // namespace docsparse
