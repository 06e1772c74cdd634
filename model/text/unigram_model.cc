#include "model/text/unigram_model.h"

#include <algorithm>
#include <cfloat>

namespace docsparse {
namespace {

// sentencepiece unigram_model.cc constants.
constexpr float kUnkPenalty = 10.0f;
constexpr float kScoreResetThreshold = 100000.0f;

// sentencepiece's string_util::OneCharLen: the UTF-8 length a lead byte
// announces (1 for stray continuation bytes).
size_t OneCharLen(uint8_t lead) { return "\1\1\1\1\1\1\1\1\1\1\1\1\2\2\3\4"[lead >> 4]; }

}  // namespace

UnigramModel::UnigramModel(const std::vector<SentencePieceEntry>& pieces, int unk_id)
    : pieces_(pieces), unk_id_(unk_id) {
  min_score_ = FLT_MAX;
  for (const SentencePieceEntry& entry : pieces_) {
    if (entry.type == PieceType::kNormal) min_score_ = std::min(min_score_, entry.score);
  }
  node_piece_.push_back(-1);  // The root.
  for (size_t id = 0; id < pieces_.size(); ++id) {
    const PieceType type = pieces_[id].type;
    if (type != PieceType::kNormal && type != PieceType::kUserDefined &&
        type != PieceType::kUnused) {
      continue;
    }
    int32_t node = 0;
    for (const char b : pieces_[id].piece) {
      const uint64_t key = (static_cast<uint64_t>(node) << 8) | static_cast<uint8_t>(b);
      auto [it, added] = edges_.emplace(key, static_cast<int32_t>(node_piece_.size()));
      if (added) node_piece_.push_back(-1);
      node = it->second;
    }
    if (node_piece_[node] < 0) node_piece_[node] = static_cast<int32_t>(id);  // First wins.
  }
}

int32_t UnigramModel::Child(int32_t node, uint8_t byte) const {
  const auto it = edges_.find((static_cast<uint64_t>(node) << 8) | byte);
  return it == edges_.end() ? -1 : it->second;
}

// sentencepiece 0.2.x Model::EncodeOptimized, statement for statement:
// best_path_ends_at[i] is the best segmentation of normalized[0, i).
void UnigramModel::Encode(std::string_view normalized, std::vector<int>* ids) const {
  struct BestPathNode {
    int id = -1;
    float best_path_score = 0;
    int starts_at = -1;
  };
  const size_t size = normalized.size();
  if (size == 0) return;
  const float unk_score = min_score_ - kUnkPenalty;
  std::vector<BestPathNode> best_path_ends_at(size + 1);
  size_t starts_at = 0;
  size_t max_frontier = 0;
  while (starts_at < size) {
    float best_path_score_till_here = best_path_ends_at[starts_at].best_path_score;
    // Keeps float precision on long texts: shift every score still in play.
    if (best_path_score_till_here < -kScoreResetThreshold ||
        best_path_score_till_here > kScoreResetThreshold) {
      const float offset = best_path_score_till_here;
      for (size_t i = starts_at; i <= max_frontier; ++i) {
        if (i == starts_at || best_path_ends_at[i].starts_at != -1) {
          best_path_ends_at[i].best_path_score -= offset;
        }
      }
      best_path_score_till_here = 0.0f;
    }
    bool has_single_node = false;
    const size_t mblen =
        std::min(OneCharLen(static_cast<uint8_t>(normalized[starts_at])), size - starts_at);
    int32_t node = 0;
    for (size_t key_pos = starts_at; key_pos < size;) {
      node = Child(node, static_cast<uint8_t>(normalized[key_pos]));
      if (node < 0) break;
      ++key_pos;
      const int id = node_piece_[node];
      if (id < 0 || pieces_[id].type == PieceType::kUnused) continue;
      max_frontier = std::max(max_frontier, key_pos);
      BestPathNode& target_node = best_path_ends_at[key_pos];
      const size_t length = key_pos - starts_at;
      // User-defined symbols get a bonus so that they are always chosen.
      const float score = pieces_[id].type == PieceType::kUserDefined
                              ? static_cast<float>(0.1 * static_cast<double>(length - 1))
                              : pieces_[id].score;
      const float candidate_best_path_score = score + best_path_score_till_here;
      if (target_node.starts_at == -1 || candidate_best_path_score > target_node.best_path_score) {
        target_node.best_path_score = candidate_best_path_score;
        target_node.starts_at = static_cast<int>(starts_at);
        target_node.id = id;
      }
      if (!has_single_node && length == mblen) has_single_node = true;
    }
    if (!has_single_node) {
      max_frontier = std::max(max_frontier, starts_at + mblen);
      BestPathNode& target_node = best_path_ends_at[starts_at + mblen];
      const float candidate_best_path_score = unk_score + best_path_score_till_here;
      if (target_node.starts_at == -1 || candidate_best_path_score > target_node.best_path_score) {
        target_node.best_path_score = candidate_best_path_score;
        target_node.starts_at = static_cast<int>(starts_at);
        target_node.id = unk_id_;
      }
    }
    starts_at += mblen;
  }
  // Backtrack, then merge runs of unknown pieces.
  std::vector<int> path;
  for (size_t ends_at = size; ends_at > 0;) {
    const BestPathNode& node_at = best_path_ends_at[ends_at];
    path.push_back(node_at.id);
    ends_at = static_cast<size_t>(node_at.starts_at);
  }
  std::reverse(path.begin(), path.end());
  bool previous_unknown = false;
  for (const int id : path) {
    const bool unknown = id == unk_id_;
    if (!(unknown && previous_unknown)) ids->push_back(id);
    previous_unknown = unknown;
  }
}

}  // namespace docsparse
