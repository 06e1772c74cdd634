// Analytical cost of an encoder forward pass: what the attention computed
// (edges per layer and head), its density, and FLOPs, accumulated over every
// window and every auxiliary pass (sentences, labels) a request needed.
//
// Conventions (DESIGN.md, "Cost model"):
//  - an edge is one computed query-key pair of one head;
//  - density = edges / dense pairs, both over real (non-padding) tokens;
//  - attention FLOPs = 4 * head_dim per edge (2·d for q·k, 2·d for p·v) plus
//    planner overhead;
//  - linear FLOPs per real token and layer = 8·h² (q, k, v, output
//    projections) + 4·h·i (feed-forward); embeddings, layer norms, softmax
//    and pooling are not counted (they are O(h) per token);
//  - dense-equivalent FLOPs = the same tokens with dense attention.
// Padding a batch adds work that is a batching artefact, not a property of
// the request; it is reported as padded_tokens, not as FLOPs.
#ifndef DOCSPARSE_MODEL_ATTENTION_COST_MODEL_H_
#define DOCSPARSE_MODEL_ATTENTION_COST_MODEL_H_

#include <cstdint>
#include <vector>

namespace docsparse {

// The dimensions the cost of an encoder depends on.
struct EncoderShape {
  int num_layers = 0;
  int num_heads = 0;
  int head_dim = 0;
  int hidden = 0;
  int intermediate = 0;
};

// Dense self-attention FLOPs of one layer over `tokens` tokens, all heads.
double DenseAttentionFlops(int64_t tokens, const EncoderShape& shape);
// Projection and feed-forward FLOPs of all layers over `tokens` tokens.
double EncoderLinearFlops(int64_t tokens, const EncoderShape& shape);

// What one attention call computed for one batch item at one layer.
struct ItemAttentionCost {
  std::vector<int64_t> head_edges;  // [num_heads]
  double planner_flops = 0;         // e.g. SBM memberships and sampling
  // Sampling planners (SBM): the expected edges per head before sampling;
  // empty for deterministic planners, whose expectation is head_edges.
  std::vector<double> head_expected_edges;
  // The request's budget asked for a plan below the planner's floor (its
  // cheapest admissible plan), and the floor ran instead.
  bool raised_to_floor = false;
};

// Accumulates one request's cost. Not thread-safe; one per request.
class CostAccount {
 public:
  explicit CostAccount(const EncoderShape& shape);

  // One encoder pass over a sequence with `real_tokens` tokens, run inside a
  // batch padded to `padded_tokens`. Counts linear and dense-equivalent
  // FLOPs and the dense pairs densities are measured against.
  void AddSequence(int64_t real_tokens, int64_t padded_tokens);
  // What the attention of `layer` computed for that sequence.
  void AddAttention(int layer, const ItemAttentionCost& cost);
  // Adds another account of the same model (e.g. sentence embeddings).
  void Merge(const CostAccount& other);

  const EncoderShape& shape() const { return shape_; }
  int64_t input_tokens() const { return input_tokens_; }
  int64_t padded_tokens() const { return padded_tokens_; }
  int64_t sequences() const { return sequences_; }
  int64_t HeadEdges(int layer, int head) const;
  int64_t TotalEdges() const;
  // Edges expected before sampling (sampling planners; for deterministic
  // ones, the edges computed) and the densities they give.
  double HeadExpectedEdges(int layer, int head) const;
  double HeadExpectedDensity(int layer, int head) const;
  double MeanExpectedDensity() const;
  // Edges / dense pairs for one head; 0 when nothing ran.
  double HeadDensity(int layer, int head) const;
  // Mean of the head densities over layers and heads.
  double MeanDensity() const;
  double AttentionFlops() const;
  double PlannerFlops() const { return planner_flops_; }
  double LinearFlops() const { return linear_flops_; }
  double TotalFlops() const { return linear_flops_ + AttentionFlops(); }
  double DenseEquivalentFlops() const;
  // Whether any layer ran its planner's floor instead of what the budget
  // asked (ItemAttentionCost::raised_to_floor).
  bool raised_to_floor() const { return raised_to_floor_; }

 private:
  EncoderShape shape_;
  std::vector<int64_t> edges_;          // [layer * heads + head]
  std::vector<double> expected_edges_;  // [layer * heads + head]
  // Sum over sequences of real_tokens², the dense pairs of one head.
  int64_t dense_pairs_per_head_ = 0;
  int64_t input_tokens_ = 0;
  int64_t padded_tokens_ = 0;
  int64_t sequences_ = 0;
  double linear_flops_ = 0;
  double planner_flops_ = 0;
  bool raised_to_floor_ = false;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_COST_MODEL_H_
