// A SentencePiece model file (spiece.model, a serialized ModelProto) read
// and run without libsentencepiece: its pieces, its normalizer (the
// precompiled character map, e.g. NMT NFKC, and whitespace handling) and its
// decoder, as sentencepiece 0.2.x implements them; segmentation is
// model/text/unigram_model.h.
//
// Why not libsentencepiece: Debian's libsentencepiece.so (0.1.97) exports
// the symbols of its own copy of protobuf-lite, which interpose on
// libprotobuf.so (loaded by LibTorch and gRPC): a binary linking both
// crashes before main() (libprotobuf's static initialisers run into
// sentencepiece's copy). And its unigram search breaks ties differently from
// the PyPI sentencepiece that transformers uses (model/text/unigram_model.h).
//
// Only unigram models without byte fallback or a denormalizer are accepted
// (Pegasus, T5, ALBERT, XLNet style); anything else is refused with a reason.
#ifndef DOCSPARSE_MODEL_TEXT_SENTENCEPIECE_MODEL_H_
#define DOCSPARSE_MODEL_TEXT_SENTENCEPIECE_MODEL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "model/text/unigram_model.h"

namespace docsparse {

// Immutable after Parse; the const methods are thread-safe.
class SentencePieceModel {
 public:
  // Parses and checks `serialized` (the bytes of `source`, named in errors).
  static absl::StatusOr<std::unique_ptr<SentencePieceModel>> Parse(std::string_view serialized,
                                                                   const std::string& source);

  // `text` through the normalizer, as the segmentation sees it: the
  // character map applied (leftmost longest rule), whitespace trimmed and
  // collapsed, spaces as "▁", a "▁" prefix (with the model's defaults).
  void Normalize(std::string_view text, std::string* normalized) const;

  // The text of piece ids (sentencepiece's Decode): "▁" back to spaces, the
  // first word's dummy "▁" dropped, control pieces invisible, the unknown
  // piece as the model's unk_surface (" ⁇ "). Ids out of range are skipped.
  std::string Decode(const std::vector<int>& ids) const;

  const std::vector<SentencePieceEntry>& pieces() const { return pieces_; }
  int unk_id() const { return unk_id_; }
  // The id of a piece, or -1.
  int PieceToId(std::string_view piece) const;

  SentencePieceModel(const SentencePieceModel&) = delete;
  SentencePieceModel& operator=(const SentencePieceModel&) = delete;

 private:
  SentencePieceModel() = default;

  // The normalized form of the longest prefix of `input` that a rule (or a
  // user-defined piece) covers, and how many bytes of `input` it consumes;
  // one character as it is when no rule applies.
  std::pair<std::string_view, size_t> NormalizePrefix(std::string_view input) const;
  // Darts-clone's commonPrefixSearch over the character map's double array,
  // bounds-checked: the (length, value) of each rule that is a prefix of
  // `key`, shortest first, at most `max_results`.
  size_t CommonPrefixSearch(std::string_view key, std::pair<size_t, uint32_t>* results,
                            size_t max_results) const;

  std::vector<SentencePieceEntry> pieces_;
  std::unordered_map<std::string, int> piece_ids_;
  int unk_id_ = -1;
  // Pieces of the user-defined type: never split nor normalized.
  std::vector<std::string> user_defined_;
  // Some piece has a "▁" after its first character.
  bool has_internal_space_symbol_ = false;

  // Normalizer settings (NormalizerSpec, TrainerSpec defaults).
  bool add_dummy_prefix_ = true;
  bool remove_extra_whitespaces_ = true;
  bool escape_whitespaces_ = true;
  bool treat_whitespace_as_suffix_ = false;
  std::string unk_surface_ = " \xE2\x81\x87 ";
  // The precompiled character map: a Darts-clone double array of uint32
  // units, and the NUL-separated replacement strings its values point into.
  std::vector<uint32_t> trie_;
  std::string replacements_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_TEXT_SENTENCEPIECE_MODEL_H_
