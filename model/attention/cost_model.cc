#include "model/attention/cost_model.h"

#include <cstddef>
#include <numeric>

namespace docsparse {

double DenseAttentionFlops(int64_t tokens, const EncoderShape& shape) {
  const double pairs = static_cast<double>(tokens) * static_cast<double>(tokens);
  return 4.0 * shape.head_dim * pairs * shape.num_heads;
}

double EncoderLinearFlops(int64_t tokens, const EncoderShape& shape) {
  const double h = shape.hidden;
  const double i = shape.intermediate;
  return static_cast<double>(tokens) * shape.num_layers * (8.0 * h * h + 4.0 * h * i);
}

CostAccount::CostAccount(const EncoderShape& shape)
    : shape_(shape),
      edges_(static_cast<size_t>(shape.num_layers) * shape.num_heads, 0),
      expected_edges_(edges_.size(), 0.0) {}

void CostAccount::AddSequence(int64_t real_tokens, int64_t padded_tokens) {
  input_tokens_ += real_tokens;
  padded_tokens_ += padded_tokens;
  ++sequences_;
  dense_pairs_per_head_ += real_tokens * real_tokens;
  linear_flops_ += EncoderLinearFlops(real_tokens, shape_);
}

void CostAccount::AddAttention(int layer, const ItemAttentionCost& cost) {
  const size_t base = static_cast<size_t>(layer) * shape_.num_heads;
  for (size_t head = 0; head < cost.head_edges.size(); ++head) {
    edges_[base + head] += cost.head_edges[head];
    expected_edges_[base + head] += head < cost.head_expected_edges.size()
                                        ? cost.head_expected_edges[head]
                                        : static_cast<double>(cost.head_edges[head]);
  }
  planner_flops_ += cost.planner_flops;
  raised_to_floor_ = raised_to_floor_ || cost.raised_to_floor;
}

void CostAccount::Merge(const CostAccount& other) {
  for (size_t i = 0; i < edges_.size() && i < other.edges_.size(); ++i) {
    edges_[i] += other.edges_[i];
    expected_edges_[i] += other.expected_edges_[i];
  }
  dense_pairs_per_head_ += other.dense_pairs_per_head_;
  input_tokens_ += other.input_tokens_;
  padded_tokens_ += other.padded_tokens_;
  sequences_ += other.sequences_;
  linear_flops_ += other.linear_flops_;
  planner_flops_ += other.planner_flops_;
  raised_to_floor_ = raised_to_floor_ || other.raised_to_floor_;
}

int64_t CostAccount::HeadEdges(int layer, int head) const {
  return edges_[static_cast<size_t>(layer) * shape_.num_heads + head];
}

int64_t CostAccount::TotalEdges() const {
  return std::accumulate(edges_.begin(), edges_.end(), int64_t{0});
}

double CostAccount::HeadExpectedEdges(int layer, int head) const {
  return expected_edges_[static_cast<size_t>(layer) * shape_.num_heads + head];
}

double CostAccount::HeadExpectedDensity(int layer, int head) const {
  if (dense_pairs_per_head_ == 0) return 0;
  return HeadExpectedEdges(layer, head) / static_cast<double>(dense_pairs_per_head_);
}

double CostAccount::MeanExpectedDensity() const {
  if (dense_pairs_per_head_ == 0 || expected_edges_.empty()) return 0;
  const double total = std::accumulate(expected_edges_.begin(), expected_edges_.end(), 0.0);
  return total / (static_cast<double>(dense_pairs_per_head_) * static_cast<double>(edges_.size()));
}

double CostAccount::HeadDensity(int layer, int head) const {
  if (dense_pairs_per_head_ == 0) return 0;
  return static_cast<double>(HeadEdges(layer, head)) / static_cast<double>(dense_pairs_per_head_);
}

double CostAccount::MeanDensity() const {
  if (dense_pairs_per_head_ == 0 || edges_.empty()) return 0;
  return static_cast<double>(TotalEdges()) /
         (static_cast<double>(dense_pairs_per_head_) * static_cast<double>(edges_.size()));
}

double CostAccount::AttentionFlops() const {
  return 4.0 * shape_.head_dim * static_cast<double>(TotalEdges()) + planner_flops_;
}

double CostAccount::DenseEquivalentFlops() const {
  const double dense_attention = 4.0 * shape_.head_dim *
                                 static_cast<double>(dense_pairs_per_head_) * shape_.num_heads *
                                 shape_.num_layers;
  return linear_flops_ + dense_attention;
}

}  // namespace docsparse
