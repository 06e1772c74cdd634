// The content-based patterns as planners (DESIGN.md, "The planner
// contract"): Reformer's LSH and the Routing Transformer's clusters
// (model/attention/lsh_pattern.h, routing_pattern.h). Their plans depend on
// the projections, so they run on the edge executor
// (model/attention/edge_plan.h), and a price before the input is known is
// what the knobs allow: exact for routing (every row has ⌈n/k⌉ keys), an
// upper bound for LSH (rounds that pick the same keys overlap). The cost
// report counts what ran.
#include <algorithm>
#include <cmath>
#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "model/attention/edge_plan.h"
#include "model/attention/knob_lattice.h"
#include "model/attention/lsh_pattern.h"
#include "model/attention/mask_map.h"
#include "model/attention/planner_registry.h"
#include "model/attention/routing_pattern.h"

namespace docsparse {
namespace {

// What distinguishes one content pattern from another.
struct ContentPattern {
  AttentionKind kind;
  std::map<std::string, KnobRange> knobs;
  // One head's list from its queries and keys ([n, head_dim] each).
  std::function<HeadEdgeList(const AttentionKnobValues&, const float* queries, const float* keys,
                             int32_t n, int32_t head_dim, uint64_t seed, int32_t layer,
                             int32_t head)>
      plan_head;
  // Planning work of one head over n tokens.
  std::function<double(const AttentionKnobValues&, int64_t n, int32_t head_dim)> planner_flops;
  // The pairs one head computes over n tokens at most.
  std::function<double(const AttentionKnobValues&, int64_t n)> max_head_edges;
  std::function<absl::Status(const AttentionKnobValues&)> validate;
  std::function<KnobLattice(const AttentionKnobValues&)> lattice;
  std::string floor;
};

class ContentItemEdgePlan final : public ItemEdgePlan {
 public:
  ContentItemEdgePlan(const ContentPattern& pattern, const ItemPlanInput& input)
      : pattern_(pattern),
        query_(input.query.contiguous()),
        key_(input.key.contiguous()),
        knobs_(input.knobs),
        seed_(input.seed),
        layer_(input.layer) {}

  HeadEdgeList Head(int32_t head) override {
    const int32_t n = static_cast<int32_t>(query_.size(1));
    const int32_t head_dim = static_cast<int32_t>(query_.size(2));
    const int64_t offset = int64_t{head} * n * head_dim;
    flops_ += pattern_.planner_flops(knobs_, n, head_dim);
    return pattern_.plan_head(knobs_, query_.data_ptr<float>() + offset,
                              key_.data_ptr<float>() + offset, n, head_dim, seed_, layer_, head);
  }
  double planner_flops() const override { return flops_; }

 private:
  const ContentPattern& pattern_;
  at::Tensor query_, key_;
  AttentionKnobValues knobs_;
  uint64_t seed_;
  int32_t layer_;
  double flops_ = 0;
};

class ContentEdgePlanner final : public EdgePlanner {
 public:
  explicit ContentEdgePlanner(ContentPattern pattern) : pattern_(std::move(pattern)) {}
  const ContentPattern& pattern() const { return pattern_; }
  std::unique_ptr<ItemEdgePlan> PlanItem(const ItemPlanInput& input) const override {
    return std::make_unique<ContentItemEdgePlan>(pattern_, input);
  }

 private:
  ContentPattern pattern_;
};

class ContentPlanner final : public AttentionPlanner {
 public:
  ContentPlanner(ContentPattern pattern, const PlannerSource& source)
      : prepended_(source.prepended_tokens()) {
    ApplyConfiguredNatives(source.configured_knobs, &pattern.knobs);
    edges_ = std::make_shared<ContentEdgePlanner>(std::move(pattern));
  }

  AttentionKind kind() const override { return pattern().kind; }
  std::map<std::string, KnobRange> Knobs() const override { return pattern().knobs; }
  bool samples() const override { return true; }  // seeded rotations or starts
  absl::Status ValidateKnobs(const AttentionKnobValues& knobs) const override {
    return pattern().validate(knobs);
  }

  AttentionPrice Price(const AttentionKnobValues& knobs, const std::vector<int64_t>& tokens,
                       const EncoderShape& shape) const override {
    const AttentionKnobValues all = StartingKnobs(*this, knobs);
    double edges = 0, planner_flops = 0;
    for (int64_t n : tokens) {
      edges += pattern().max_head_edges(all, n + prepended_);
      planner_flops += pattern().planner_flops(all, n + prepended_, shape.head_dim);
    }
    AttentionPrice price = PriceOfLayer(edges * shape.num_heads,
                                        DensePairs(tokens, prepended_) * shape.num_heads, shape);
    price.attention_flops += planner_flops * shape.num_heads * shape.num_layers;
    return price;
  }

  BudgetFit FitBudget(const AttentionCap& cap, const AttentionKnobValues& start,
                      const std::vector<int64_t>& tokens,
                      const EncoderShape& shape) const override {
    return FitOnLattice(
        cap, start, pattern().lattice(start),
        [&](const AttentionKnobValues& knobs) { return Price(knobs, tokens, shape); },
        [&](const AttentionKnobValues& knobs) { return pattern().validate(knobs).ok(); });
  }

  std::string FloorDescription() const override { return pattern().floor; }

  // Where the pairs fall depends on the content: the map spreads the priced
  // density evenly.
  std::vector<float> MaskMap(const AttentionKnobValues& knobs, const std::vector<int64_t>& lengths,
                             int resolution, int* cells) const override {
    std::vector<float> map = DenseWindowsMaskMap(lengths, resolution, cells);
    const EncoderShape one_layer{1, 1, 1, 1, 1};
    const double density = Price(knobs, lengths, one_layer).density;
    for (float& cell : map) cell *= static_cast<float>(density);
    return map;
  }

  std::unique_ptr<AttentionMechanism> MakeMechanism() const override {
    return MakeEdgeAttention(pattern().kind, edges_, StartingKnobs(*this, {}));
  }
  std::shared_ptr<const EdgePlanner> edge_planner() const override { return edges_; }

 private:
  const ContentPattern& pattern() const { return edges_->pattern(); }

  std::shared_ptr<const ContentEdgePlanner> edges_;
  int64_t prepended_;
};

LshKnobs LshKnobsOf(const AttentionKnobValues& k) {
  return LshKnobs{IntKnob(k, "buckets"), IntKnob(k, "chunk"), IntKnob(k, "rounds")};
}

ContentPattern Lsh() {
  ContentPattern p;
  p.kind = AttentionKind::kLsh;
  p.knobs = {
      {"buckets", {32, 2, kLshMaxBuckets}},
      {"chunk", {64, 1, 1 << 20}},
      {"rounds", {2, 1, 64}},
  };
  p.plan_head = [](const AttentionKnobValues& k, const float* queries, const float* keys, int32_t n,
                   int32_t head_dim, uint64_t seed, int32_t layer, int32_t head) {
    return PlanLshHead(LshKnobsOf(k), queries, keys, n, head_dim, LshHeadKey(seed, layer, head));
  };
  p.planner_flops = [](const AttentionKnobValues& k, int64_t n, int32_t head_dim) {
    return LshPlannerFlops(LshKnobsOf(k), n, head_dim);
  };
  p.max_head_edges = [](const AttentionKnobValues& k, int64_t n) {
    return LshMaxHeadEdges(LshKnobsOf(k), n);
  };
  p.validate = [](const AttentionKnobValues& k) {
    if (IntKnob(k, "buckets") % 2 != 0) {
      return absl::InvalidArgumentError(absl::StrCat("buckets: ", IntKnob(k, "buckets"),
                                                     " must be even (argmax over [xR; -xR])"));
    }
    return absl::OkStatus();
  };
  p.lattice = [](const AttentionKnobValues& start) {
    KnobLattice lattice;
    lattice["chunk"] = HalvingSteps(start.at("chunk"), 8, start.at("chunk"));
    std::vector<double>& rounds = lattice["rounds"];
    for (double r = start.at("rounds"); r >= 1; r = std::floor(r / 2)) rounds.push_back(r);
    return lattice;
  };
  p.floor = "lsh: one round of 8-key chunks";
  return p;
}

RoutingKnobs RoutingKnobsOf(const AttentionKnobValues& k) {
  return RoutingKnobs{IntKnob(k, "clusters"), IntKnob(k, "iterations")};
}

ContentPattern Routing() {
  ContentPattern p;
  p.kind = AttentionKind::kRouting;
  p.knobs = {
      {"clusters", {16, 1, 1 << 16}},
      {"iterations", {2, 0, 64}},
  };
  p.plan_head = [](const AttentionKnobValues& k, const float* queries, const float* keys, int32_t n,
                   int32_t head_dim, uint64_t seed, int32_t layer, int32_t head) {
    if (n == 0) return HeadEdgeList{{0}, {}, {}};
    const std::vector<float> centroids = FitRoutingCentroids(
        RoutingKnobsOf(k), queries, keys, n, head_dim, RoutingHeadKey(seed, layer, head));
    return RouteHead(centroids, queries, keys, n, head_dim);
  };
  p.planner_flops = [](const AttentionKnobValues& k, int64_t n, int32_t head_dim) {
    return RoutingPlannerFlops(RoutingKnobsOf(k), n, head_dim);
  };
  p.max_head_edges = [](const AttentionKnobValues& k, int64_t n) {
    return static_cast<double>(RoutingKeysPerQuery(RoutingKnobsOf(k), n)) * static_cast<double>(n);
  };
  p.validate = [](const AttentionKnobValues&) { return absl::OkStatus(); };
  p.lattice = [](const AttentionKnobValues& start) {
    // More clusters, fewer keys per query: doublings up to 256 times.
    KnobLattice lattice;
    std::vector<double>& clusters = lattice["clusters"];
    for (double c = start.at("clusters"), i = 0; i <= 8 && c <= (1 << 16); c *= 2, ++i) {
      clusters.push_back(c);
    }
    return lattice;
  };
  p.floor = "routing: 256 times the starting clusters";
  return p;
}

}  // namespace

std::unique_ptr<AttentionPlanner> MakeLshPlanner(const PlannerSource& source) {
  return std::make_unique<ContentPlanner>(Lsh(), source);
}

std::unique_ptr<AttentionPlanner> MakeRoutingPlanner(const PlannerSource& source) {
  return std::make_unique<ContentPlanner>(Routing(), source);
}

}  // namespace docsparse
