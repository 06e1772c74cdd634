// A union of plans (issue 16's composition): the pairs of any of its parts,
// each computed and counted once, run on the edge executor
// (model/attention/edge_plan.h). Its knobs are its parts' as
// "<part>.<knob>"; its price is the sum of the parts' (an upper bound: pairs
// two parts share are computed once, and the cost report counts what ran).
// A cap is shared out in order: each part but the last may take an equal
// share of what is left, the last takes the rest.
#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "model/attention/edge_plan.h"
#include "model/attention/planner_registry.h"

namespace docsparse {
namespace {

struct Part {
  std::string prefix;  // "<name>."
  std::unique_ptr<AttentionPlanner> planner;
  std::shared_ptr<const EdgePlanner> edges;
};

// The knobs of `knobs` that belong to the part with `prefix`, unprefixed.
AttentionKnobValues PartKnobs(const AttentionKnobValues& knobs, const std::string& prefix) {
  AttentionKnobValues part;
  for (const auto& [name, value] : knobs) {
    if (name.compare(0, prefix.size(), prefix) == 0) part[name.substr(prefix.size())] = value;
  }
  return part;
}

class UnionItemEdgePlan final : public ItemEdgePlan {
 public:
  explicit UnionItemEdgePlan(std::vector<std::unique_ptr<ItemEdgePlan>> parts)
      : parts_(std::move(parts)) {}

  HeadEdgeList Head(int32_t head) override {
    std::vector<HeadEdgeList> lists;
    for (const std::unique_ptr<ItemEdgePlan>& part : parts_) lists.push_back(part->Head(head));
    return UnionOfEdges(lists);
  }
  double planner_flops() const override {
    double flops = 0;
    for (const std::unique_ptr<ItemEdgePlan>& part : parts_) flops += part->planner_flops();
    return flops;
  }
  bool raised_to_floor() const override {
    return std::any_of(parts_.begin(), parts_.end(),
                       [](const auto& part) { return part->raised_to_floor(); });
  }

 private:
  std::vector<std::unique_ptr<ItemEdgePlan>> parts_;
};

class UnionEdgePlanner final : public EdgePlanner {
 public:
  explicit UnionEdgePlanner(
      std::vector<std::pair<std::string, std::shared_ptr<const EdgePlanner>>> parts)
      : parts_(std::move(parts)) {}

  std::unique_ptr<ItemEdgePlan> PlanItem(const ItemPlanInput& input) const override {
    std::vector<std::unique_ptr<ItemEdgePlan>> plans;
    for (const auto& [prefix, planner] : parts_) {
      ItemPlanInput part = input;
      part.knobs = PartKnobs(input.knobs, prefix);
      plans.push_back(planner->PlanItem(part));
    }
    return std::make_unique<UnionItemEdgePlan>(std::move(plans));
  }

 private:
  std::vector<std::pair<std::string, std::shared_ptr<const EdgePlanner>>> parts_;
};

class UnionPlanner final : public AttentionPlanner {
 public:
  UnionPlanner(std::vector<Part> parts, int64_t prepended)
      : parts_(std::move(parts)), prepended_(prepended) {
    std::vector<std::pair<std::string, std::shared_ptr<const EdgePlanner>>> edges;
    for (const Part& part : parts_) edges.emplace_back(part.prefix, part.edges);
    edges_ = std::make_shared<UnionEdgePlanner>(std::move(edges));
  }

  AttentionKind kind() const override { return AttentionKind::kUnion; }

  std::map<std::string, KnobRange> Knobs() const override {
    std::map<std::string, KnobRange> knobs;
    for (const Part& part : parts_) {
      for (const auto& [name, range] : part.planner->Knobs()) knobs[part.prefix + name] = range;
    }
    return knobs;
  }
  bool samples() const override {
    return std::any_of(parts_.begin(), parts_.end(),
                       [](const Part& part) { return part.planner->samples(); });
  }
  absl::Status ValidateKnobs(const AttentionKnobValues& knobs) const override {
    for (const Part& part : parts_) {
      absl::Status status = part.planner->ValidateKnobs(PartKnobs(knobs, part.prefix));
      if (!status.ok()) {
        return absl::Status(status.code(), absl::StrCat(part.prefix, status.message()));
      }
    }
    return absl::OkStatus();
  }
  // The parts, "longformer+sbm".
  std::string Variant() const override {
    std::vector<std::string> names;
    for (const Part& part : parts_) names.emplace_back(part.planner->name());
    return absl::StrJoin(names, "+");
  }

  AttentionPrice Price(const AttentionKnobValues& knobs, const std::vector<int64_t>& tokens,
                       const EncoderShape& shape) const override {
    AttentionPrice price;
    for (const Part& part : parts_) {
      const AttentionPrice each = part.planner->Price(PartKnobs(knobs, part.prefix), tokens, shape);
      price.edges += each.edges;
      price.attention_flops += each.attention_flops;
    }
    const double dense = DensePairs(tokens, prepended_) * shape.num_heads * shape.num_layers;
    if (price.edges > dense) {
      price.attention_flops -= (price.edges - dense) * 4.0 * shape.head_dim;
      price.edges = dense;
    }
    price.density = dense > 0 ? price.edges / dense : 0;
    return price;
  }

  BudgetFit FitBudget(const AttentionCap& cap, const AttentionKnobValues& start,
                      const std::vector<int64_t>& tokens,
                      const EncoderShape& shape) const override {
    BudgetFit fit;
    fit.knobs = start;
    AttentionCap left = cap;
    for (size_t i = 0; i < parts_.size(); ++i) {
      const Part& part = parts_[i];
      const double share =
          i + 1 == parts_.size() ? 1.0 : 1.0 / static_cast<double>(parts_.size() - i);
      AttentionCap part_cap;
      if (left.max_density) part_cap.max_density = std::max(0.0, *left.max_density * share);
      if (left.max_attention_gflops) {
        part_cap.max_attention_gflops = std::max(0.0, *left.max_attention_gflops * share);
      }
      const BudgetFit each = part.planner->FitBudget(
          part_cap, StartingKnobs(*part.planner, PartKnobs(start, part.prefix)), tokens, shape);
      for (const auto& [name, value] : each.knobs) fit.knobs[part.prefix + name] = value;
      fit.fits = fit.fits && each.fits;
      if (left.max_density) *left.max_density -= each.price.density;
      if (left.max_attention_gflops) *left.max_attention_gflops -= each.price.attention_flops / 1e9;
    }
    fit.price = Price(fit.knobs, tokens, shape);
    return fit;
  }

  std::string FloorDescription() const override {
    std::vector<std::string> floors;
    for (const Part& part : parts_) floors.push_back(part.planner->FloorDescription());
    return absl::StrCat("union of ", absl::StrJoin(floors, "; "));
  }

  // The parts' maps added, at most 1 per cell (shared pairs counted once
  // would need the plans themselves).
  std::vector<float> MaskMap(const AttentionKnobValues& knobs, const std::vector<int64_t>& lengths,
                             int resolution, int* cells) const override {
    std::vector<float> map;
    for (const Part& part : parts_) {
      const std::vector<float> each =
          part.planner->MaskMap(PartKnobs(knobs, part.prefix), lengths, resolution, cells);
      if (map.empty()) map.assign(each.size(), 0.0f);
      for (size_t c = 0; c < each.size() && c < map.size(); ++c) {
        map[c] = std::min(1.0f, map[c] + each[c]);
      }
    }
    return map;
  }

  std::unique_ptr<AttentionMechanism> MakeMechanism() const override {
    return MakeEdgeAttention(AttentionKind::kUnion, edges_, StartingKnobs(*this, {}));
  }
  std::shared_ptr<const EdgePlanner> edge_planner() const override { return edges_; }

 private:
  std::vector<Part> parts_;
  int64_t prepended_;
  std::shared_ptr<const EdgePlanner> edges_;
};

}  // namespace

std::vector<AttentionKind> UnionPartsOf(const PlannerSource& source) {
  if (!source.union_parts.empty()) return source.union_parts;
  return {AttentionKind::kLongformer,
          HasSbmParameters(source) ? AttentionKind::kSbm : AttentionKind::kLsh};
}

absl::StatusOr<std::unique_ptr<AttentionPlanner>> MakeUnionPlanner(const PlannerSource& source) {
  std::vector<Part> parts;
  for (AttentionKind kind : UnionPartsOf(source)) {
    Part part;
    part.prefix = absl::StrCat(std::string(AttentionKindName(kind)), ".");
    PlannerSource part_source = source;
    part_source.configured_knobs = PartKnobs(source.configured_knobs, part.prefix);
    absl::StatusOr<std::unique_ptr<AttentionPlanner>> planner =
        MakeAttentionPlanner(kind, part_source);
    if (!planner.ok()) {
      return absl::Status(planner.status().code(),
                          absl::StrCat("union: ", planner.status().message()));
    }
    part.planner = *std::move(planner);
    part.edges = part.planner->edge_planner();
    if (part.edges == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat("union: \"",
                                                     std::string(AttentionKindName(kind)),
                                                     "\" has no plans of token pairs to merge"));
    }
    parts.push_back(std::move(part));
  }
  return std::unique_ptr<AttentionPlanner>(
      std::make_unique<UnionPlanner>(std::move(parts), source.prepended_tokens()));
}

}  // namespace docsparse
