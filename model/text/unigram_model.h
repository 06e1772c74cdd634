// SentencePiece's unigram segmentation (the Viterbi search over the pieces
// of a model), exactly as sentencepiece 0.2.x's Model::EncodeOptimized does
// it, which is what transformers' PegasusTokenizer runs (PyPI sentencepiece).
//
// Why not libsentencepiece's own: Debian ships 0.1.97, whose search adds
// piece scores in double precision (a double literal leaks into the score of
// user-defined symbols), while 0.2.x adds them in float. Segmentations whose
// float scores tie (runs such as "-----...", common in documents) then come
// out differently. 0.2.x also re-bases the running scores every 1e5 to keep
// float precision on long texts. This file reproduces both.
#ifndef DOCSPARSE_MODEL_TEXT_UNIGRAM_MODEL_H_
#define DOCSPARSE_MODEL_TEXT_UNIGRAM_MODEL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

namespace docsparse {

// ModelProto.SentencePiece.Type.
enum class PieceType {
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6
};

struct SentencePieceEntry {
  std::string piece;
  float score = 0;
  PieceType type = PieceType::kNormal;
};

// Immutable after construction; Encode is thread-safe.
class UnigramModel {
 public:
  // `pieces` by id; `unk_id` is the id of the unknown piece.
  UnigramModel(const std::vector<SentencePieceEntry>& pieces, int unk_id);

  // Appends the piece ids of `normalized` (text already through
  // SentencePiece's normalizer: "▁" for spaces). Unknown characters become
  // `unk_id`, a run of them one `unk_id` (as SentencePieceProcessor merges
  // them).
  void Encode(std::string_view normalized, std::vector<int>* ids) const;

 private:
  // A byte trie of the pieces the search may use (normal, user-defined and
  // unused ones, as SentencePiece's double array holds them).
  int32_t Child(int32_t node, uint8_t byte) const;

  std::vector<SentencePieceEntry> pieces_;
  int unk_id_ = -1;
  float min_score_ = 0;
  std::unordered_map<uint64_t, int32_t> edges_;  // (node << 8 | byte) -> child.
  std::vector<int32_t> node_piece_;              // Piece id ending at a node, or -1.
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_TEXT_UNIGRAM_MODEL_H_
