// The position patterns as planners (DESIGN.md, "The planner contract"):
// Longformer, BigBird, Sparse Transformer, Star, ETC and ModernBERT's scheme, each a table of knobs
// (native values and ranges), the pattern's plan function
// (model/attention/*_pattern.h), the checks its knobs need together, and
// the lattice its budgets move on. Priced exactly from the plans they run
// (BigBird's random blocks at seed 0: which blocks are drawn can change a
// partial last block's share, not their number).
#include <algorithm>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/attention/bigbird_pattern.h"
#include "model/attention/edge_plan.h"
#include "model/attention/etc_pattern.h"
#include "model/attention/knob_lattice.h"
#include "model/attention/longformer_pattern.h"
#include "model/attention/pattern_attention.h"
#include "model/attention/pattern_mask_map.h"
#include "model/attention/planner_registry.h"
#include "model/attention/sparse_transformer_pattern.h"
#include "model/attention/star_pattern.h"

namespace docsparse {
namespace {

// What distinguishes one position pattern from another.
struct PatternDescription {
  AttentionKind kind;
  std::map<std::string, KnobRange> knobs;
  PatternPlanner plan;
  // Combinations the plan function cannot take; messages name the knobs.
  std::function<absl::Status(const AttentionKnobValues&)> validate;
  // Candidate values per knob around a starting point.
  std::function<KnobLattice(const AttentionKnobValues&)> lattice;
  bool samples = false;
  std::string floor;
};

// A position pattern's plan, handed out as lists of pairs.
class PatternItemEdgePlan final : public ItemEdgePlan {
 public:
  explicit PatternItemEdgePlan(PatternPlan plan) : plan_(std::move(plan)) {}
  HeadEdgeList Head(int32_t head) override { return PatternHeadEdges(plan_, head); }

 private:
  PatternPlan plan_;
};

class PatternEdgePlanner final : public EdgePlanner {
 public:
  explicit PatternEdgePlanner(PatternPlanner plan) : plan_(std::move(plan)) {}
  std::unique_ptr<ItemEdgePlan> PlanItem(const ItemPlanInput& input) const override {
    return std::make_unique<PatternItemEdgePlan>(
        plan_(input.knobs, static_cast<int32_t>(input.query.size(1)),
              static_cast<int32_t>(input.query.size(0)), input.seed, input.layer));
  }

 private:
  PatternPlanner plan_;
};

class PositionPatternPlanner final : public AttentionPlanner {
 public:
  PositionPatternPlanner(PatternDescription pattern, const PlannerSource& source)
      : pattern_(std::move(pattern)),
        prepended_(source.prepended_tokens()),
        heads_(std::max(1, source.shape.num_heads)) {
    ApplyConfiguredNatives(source.configured_knobs, &pattern_.knobs);
  }

  AttentionKind kind() const override { return pattern_.kind; }
  std::map<std::string, KnobRange> Knobs() const override { return pattern_.knobs; }
  bool samples() const override { return pattern_.samples; }

  absl::Status ValidateKnobs(const AttentionKnobValues& knobs) const override {
    return pattern_.validate(knobs);
  }

  AttentionPrice Price(const AttentionKnobValues& knobs, const std::vector<int64_t>& tokens,
                       const EncoderShape& shape) const override {
    const AttentionKnobValues all = StartingKnobs(*this, knobs);
    std::map<int64_t, int64_t> edges_by_length;  // windows repeat lengths
    double edges = 0;
    for (int64_t n : tokens) {
      const int64_t length = n + prepended_;
      auto [it, added] = edges_by_length.emplace(length, 0);
      if (added) {
        const PatternPlan plan =
            pattern_.plan(all, static_cast<int32_t>(length), shape.num_heads, 0, 0);
        for (int64_t e : plan.head_edges) it->second += e;
      }
      edges += static_cast<double>(it->second);
    }
    return PriceOfLayer(edges, DensePairs(tokens, prepended_) * shape.num_heads, shape);
  }

  BudgetFit FitBudget(const AttentionCap& cap, const AttentionKnobValues& start,
                      const std::vector<int64_t>& tokens,
                      const EncoderShape& shape) const override {
    return FitOnLattice(
        cap, start, pattern_.lattice(start),
        [&](const AttentionKnobValues& knobs) { return Price(knobs, tokens, shape); },
        [&](const AttentionKnobValues& knobs) { return pattern_.validate(knobs).ok(); });
  }

  std::string FloorDescription() const override { return pattern_.floor; }

  std::vector<float> MaskMap(const AttentionKnobValues& knobs, const std::vector<int64_t>& lengths,
                             int resolution, int* cells) const override {
    const AttentionKnobValues all = StartingKnobs(*this, knobs);
    std::vector<PatternPlan> plans;
    for (int64_t n : lengths) {
      // Every head: dilation and head splits make them differ, and the
      // map averages them.
      plans.push_back(pattern_.plan(all, static_cast<int32_t>(n), heads_, 0, 0));
    }
    return PatternMaskMap(plans, resolution, cells);
  }

  std::unique_ptr<AttentionMechanism> MakeMechanism() const override {
    return MakePatternAttention(pattern_.kind, pattern_.plan, StartingKnobs(*this, {}));
  }
  // Longformer's global rows take the ordinary projections in this form
  // (a union has no place for a checkpoint's query_global).
  std::shared_ptr<const EdgePlanner> edge_planner() const override {
    return std::make_shared<PatternEdgePlanner>(pattern_.plan);
  }

 private:
  PatternDescription pattern_;
  int64_t prepended_;
  int heads_;
};

// A knob's halvings down to `min` and the starting value.
std::vector<double> Down(const AttentionKnobValues& start, const char* name, double min) {
  return HalvingSteps(start.at(name), min, start.at(name));
}

// A band's knob "window" (w/2 tokens on each side) must be even.
absl::Status WindowIsEven(const AttentionKnobValues& k) {
  if (IntKnob(k, "window") % 2 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("window: ", IntKnob(k, "window"), " must be even (w/2 tokens on each side)"));
  }
  return absl::OkStatus();
}

// The window's halvings down to 8 that stay even.
std::vector<double> EvenWindowHalvings(const AttentionKnobValues& start) {
  std::vector<double> windows;
  for (double w : HalvingSteps(start.at("window"), 8, start.at("window"))) {
    if (static_cast<int64_t>(w) % 2 == 0) windows.push_back(w);
  }
  return windows;
}

PatternDescription Longformer(int heads) {
  PatternDescription p;
  p.kind = AttentionKind::kLongformer;
  p.knobs = {
      {"window", {512, 2, 1 << 20}},
      {"dilation", {1, 1, 1 << 16}},
      {"dilated_heads", {0, 0, static_cast<double>(heads)}},
      {"global_tokens", {1, 0, 1 << 16}},
  };
  p.plan = [](const AttentionKnobValues& k, int32_t length, int32_t heads, uint64_t, int32_t) {
    return PlanLongformer(
        LongformerKnobs{IntKnob(k, "window"), IntKnob(k, "dilation"),
                        std::min(IntKnob(k, "dilated_heads"), heads), IntKnob(k, "global_tokens")},
        length, heads);
  };
  p.validate = WindowIsEven;
  p.lattice = [](const AttentionKnobValues& start) {
    return KnobLattice{{"window", EvenWindowHalvings(start)}};
  };
  p.floor = "longformer: the narrowest window on its lattice (8 tokens), global tokens kept";
  return p;
}

PatternDescription BigBird() {
  PatternDescription p;
  p.kind = AttentionKind::kBigBird;
  p.knobs = {
      {"block_size", {64, 1, 1 << 16}},
      {"window_blocks", {3, 1, 1 << 10}},
      {"global_blocks", {1, 0, 1 << 10}},
      {"random_blocks", {3, 0, 1 << 10}},
      // transformers' layout and inference quirks (bigbird_pattern.h); a
      // BigBird checkpoint's native plan sets all three.
      {"last_block_global", {0, 0, 1}},
      {"random_at_first_block", {0, 0, 1}},
      {"dense_up_to", {0, 0, 1 << 30}},
  };
  p.plan = [](const AttentionKnobValues& k, int32_t length, int32_t heads, uint64_t seed,
              int32_t layer) {
    return PlanBigBird(
        BigBirdKnobs{IntKnob(k, "block_size"), IntKnob(k, "window_blocks"),
                     IntKnob(k, "global_blocks"), IntKnob(k, "random_blocks"),
                     IntKnob(k, "last_block_global") != 0, IntKnob(k, "random_at_first_block") != 0,
                     IntKnob(k, "dense_up_to")},
        length, heads, seed, layer);
  };
  p.validate = [](const AttentionKnobValues& k) {
    if (IntKnob(k, "window_blocks") % 2 != 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("window_blocks: ", IntKnob(k, "window_blocks"),
                       " must be odd (the own block and as many on each side)"));
    }
    return absl::OkStatus();
  };
  p.lattice = [](const AttentionKnobValues& start) {
    KnobLattice lattice;
    lattice["block_size"] = Down(start, "block_size", 16);
    std::vector<double>& random = lattice["random_blocks"];
    for (double r = start.at("random_blocks"); r >= 1; r = std::floor(r / 2)) random.push_back(r);
    random.push_back(0);
    // A short document under a cap: the block pattern instead of full
    // attention.
    lattice["dense_up_to"] = {start.at("dense_up_to")};
    if (start.at("dense_up_to") > 0) lattice["dense_up_to"].push_back(0);
    return lattice;
  };
  p.samples = true;
  p.floor =
      "bigbird: 16-token blocks, no random blocks, no full attention on short documents, window "
      "and global blocks kept";
  return p;
}

PatternDescription SparseTransformer(int heads) {
  PatternDescription p;
  p.kind = AttentionKind::kSparseTransformer;
  p.knobs = {
      {"stride", {128, 1, 1 << 20}},
      {"summary", {8, 1, 1 << 20}},
      {"fixed_heads", {static_cast<double>(heads / 2), 0, static_cast<double>(heads)}},
  };
  p.plan = [](const AttentionKnobValues& k, int32_t length, int32_t heads, uint64_t, int32_t) {
    return PlanSparseTransformer(SparseTransformerKnobs{IntKnob(k, "stride"), IntKnob(k, "summary"),
                                                        std::min(IntKnob(k, "fixed_heads"), heads)},
                                 length, heads);
  };
  p.validate = [](const AttentionKnobValues& k) {
    if (IntKnob(k, "summary") > IntKnob(k, "stride")) {
      return absl::InvalidArgumentError(absl::StrCat("summary: ", IntKnob(k, "summary"),
                                                     " exceeds stride ", IntKnob(k, "stride")));
    }
    return absl::OkStatus();
  };
  p.lattice = [](const AttentionKnobValues& start) {
    // The strided heads' density, (2l + n/l) / n, falls as l moves toward
    // √(n/2) from either side: the lattice goes both ways.
    KnobLattice lattice;
    const double l = start.at("stride");
    lattice["stride"] = {l};
    for (double f : {0.5, 0.25, 2.0, 4.0}) {
      if (l * f >= 1) lattice["stride"].push_back(std::floor(l * f));
    }
    lattice["summary"] = Down(start, "summary", 1);
    return lattice;
  };
  p.floor = "sparse_transformer: the stride and summary on its lattice with the fewest pairs";
  return p;
}

PatternDescription Star() {
  PatternDescription p;
  p.kind = AttentionKind::kStar;
  p.knobs = {
      {"radius", {1, 1, 1 << 20}},
      {"relay_tokens", {1, 0, 1 << 16}},
  };
  p.plan = [](const AttentionKnobValues& k, int32_t length, int32_t heads, uint64_t, int32_t) {
    return PlanStar(StarKnobs{IntKnob(k, "radius"), IntKnob(k, "relay_tokens")}, length, heads);
  };
  p.validate = [](const AttentionKnobValues&) { return absl::OkStatus(); };
  p.lattice = [](const AttentionKnobValues& start) {
    return KnobLattice{{"radius", Down(start, "radius", 1)}};
  };
  p.floor = "star: radius 1 (a band of 3) and the relay tokens";
  return p;
}

// ModernBERT's scheme: its full-attention layers dense, the others a
// sliding window |i - j| <= window/2 (Longformer's window without global
// tokens). full_layers 0 runs the window on every layer: the budget's lever
// below the dense layers' share.
PatternDescription ModernBert(std::vector<bool> full_attention_layers) {
  PatternDescription p;
  p.kind = AttentionKind::kModernBert;
  p.knobs = {
      {"window", {128, 2, 1 << 20}},
      {"full_layers", {1, 0, 1}},
  };
  p.plan = [full = std::move(full_attention_layers)](const AttentionKnobValues& k, int32_t length,
                                                     int32_t heads, uint64_t, int32_t layer) {
    const bool dense =
        IntKnob(k, "full_layers") == 1 &&
        (full.empty() ? layer % 3 == 0 : layer < static_cast<int32_t>(full.size()) && full[layer]);
    if (dense) {
      // Every token global: one block of every row over every key. Not
      // global rows in Longformer's sense: no projections of their own.
      PatternPlan plan = PlanLongformer(LongformerKnobs{2, 1, 0, length}, length, heads);
      plan.global_rows = 0;
      return plan;
    }
    return PlanLongformer(LongformerKnobs{IntKnob(k, "window"), 1, 0, 0}, length, heads);
  };
  p.validate = WindowIsEven;
  p.lattice = [](const AttentionKnobValues& start) {
    return KnobLattice{{"window", EvenWindowHalvings(start)},
                       {"full_layers", {start.at("full_layers"), 0}}};
  };
  p.floor = "modernbert: the narrowest window on its lattice (8 tokens) on every layer";
  return p;
}

// ETC: the global input is an LSG checkpoint's prepended global tokens
// where it has them (a separate input, as in ETC), else the first token.
PatternDescription Etc(int64_t prepended) {
  PatternDescription p;
  p.kind = AttentionKind::kEtc;
  p.knobs = {
      {"global_tokens", {static_cast<double>(std::max<int64_t>(1, prepended)), 0, 1 << 16}},
      {"radius", {256, 0, 1 << 20}},
      {"hard_g2l", {1, 0, 1}},
  };
  p.plan = [](const AttentionKnobValues& k, int32_t length, int32_t heads, uint64_t, int32_t) {
    return PlanEtc(
        EtcKnobs{IntKnob(k, "global_tokens"), IntKnob(k, "radius"), IntKnob(k, "hard_g2l") != 0},
        length, heads);
  };
  p.validate = [](const AttentionKnobValues&) { return absl::OkStatus(); };
  p.lattice = [](const AttentionKnobValues& start) {
    return KnobLattice{{"radius", Down(start, "radius", 4)}};
  };
  p.floor = "etc: radius 4, the global tokens kept";
  return p;
}

std::unique_ptr<AttentionPlanner> Make(PatternDescription pattern, const PlannerSource& source) {
  return std::make_unique<PositionPatternPlanner>(std::move(pattern), source);
}

}  // namespace

std::unique_ptr<AttentionPlanner> MakeLongformerPlanner(const PlannerSource& source) {
  return Make(Longformer(source.shape.num_heads), source);
}

std::unique_ptr<AttentionPlanner> MakeBigBirdPlanner(const PlannerSource& source) {
  return Make(BigBird(), source);
}

std::unique_ptr<AttentionPlanner> MakeSparseTransformerPlanner(const PlannerSource& source) {
  return Make(SparseTransformer(source.shape.num_heads), source);
}

std::unique_ptr<AttentionPlanner> MakeModernBertPlanner(const PlannerSource& source) {
  return Make(ModernBert(source.full_attention_layers), source);
}

std::unique_ptr<AttentionPlanner> MakeStarPlanner(const PlannerSource& source) {
  return Make(Star(), source);
}

std::unique_ptr<AttentionPlanner> MakeEtcPlanner(const PlannerSource& source) {
  return Make(Etc(source.prepended_tokens()), source);
}

}  // namespace docsparse
