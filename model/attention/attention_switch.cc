#include "model/attention/attention_switch.h"

#include <utility>

namespace docsparse {
namespace {

class SwitchingAttention final : public AttentionMechanism {
 public:
  SwitchingAttention(std::unique_ptr<AttentionMechanism> native,
                     std::map<AttentionKind, std::unique_ptr<AttentionMechanism>> alternatives)
      : native_(std::move(native)), alternatives_(std::move(alternatives)) {
    alternatives_.erase(native_->kind());
  }

  AttentionKind kind() const override { return native_->kind(); }

  std::vector<AttentionKind> kinds() const {
    std::vector<AttentionKind> kinds = {native_->kind()};
    for (const auto& [kind, mechanism] : alternatives_) kinds.push_back(kind);
    return kinds;
  }

  at::Tensor Forward(const AttentionInputs& in,
                     std::vector<ItemAttentionCost>* item_costs) const override {
    const int64_t batch = in.query.size(0);
    std::map<const AttentionMechanism*, std::vector<int64_t>> groups;
    for (int64_t b = 0; b < batch; ++b) groups[&MechanismFor(in, b)].push_back(b);
    if (groups.size() == 1) return groups.begin()->first->Forward(in, item_costs);

    // Mixed kinds: each group runs as its own batch, trimmed to its longest
    // item, and its rows go back to their places.
    at::Tensor context = at::zeros_like(in.query);
    item_costs->assign(batch, ItemAttentionCost{});
    for (const auto& [mechanism, rows] : groups) {
      AttentionInputs part;
      int64_t longest = 0;
      for (int64_t row : rows) {
        part.lengths.push_back(in.lengths[row]);
        if (!in.item_options.empty()) part.item_options.push_back(in.item_options[row]);
        longest = std::max(longest, in.lengths[row]);
      }
      const at::Tensor index = at::tensor(rows, at::kLong);
      auto take = [&](const at::Tensor& t) {
        return t.index_select(0, index).narrow(2, 0, longest).contiguous();
      };
      part.query = take(in.query);
      part.key = take(in.key);
      part.value = take(in.value);
      part.layer = in.layer;
      part.precision = in.precision;
      if (in.global_projections) {
        part.global_projections = [&in, &take, &index](int64_t query_rows) {
          const ProjectedHeads all = in.global_projections(query_rows);
          return ProjectedHeads{all.query.index_select(0, index), take(all.key), take(all.value)};
        };
      }
      std::vector<ItemAttentionCost> part_costs;
      const at::Tensor part_context = mechanism->Forward(part, &part_costs);
      for (size_t i = 0; i < rows.size(); ++i) {
        context[rows[i]].narrow(1, 0, longest).copy_(part_context[static_cast<int64_t>(i)]);
        (*item_costs)[rows[i]] = std::move(part_costs[i]);
      }
    }
    return context;
  }

 private:
  const AttentionMechanism& MechanismFor(const AttentionInputs& in, int64_t item) const {
    if (in.item_options.empty() || !in.item_options[item].kind.has_value()) return *native_;
    const auto it = alternatives_.find(*in.item_options[item].kind);
    return it == alternatives_.end() ? *native_ : *it->second;
  }

  std::unique_ptr<AttentionMechanism> native_;
  std::map<AttentionKind, std::unique_ptr<AttentionMechanism>> alternatives_;
};

}  // namespace

std::unique_ptr<AttentionMechanism> MakeSwitchingAttention(
    std::unique_ptr<AttentionMechanism> native,
    std::map<AttentionKind, std::unique_ptr<AttentionMechanism>> alternatives) {
  return std::make_unique<SwitchingAttention>(std::move(native), std::move(alternatives));
}

std::vector<AttentionKind> AvailableAttentionKinds(const AttentionMechanism& mechanism) {
  if (const auto* switching = dynamic_cast<const SwitchingAttention*>(&mechanism)) {
    return switching->kinds();
  }
  return {mechanism.kind()};
}

}  // namespace docsparse
