// The planner contract (DESIGN.md, "The planner contract"): every attention
// pattern is one AttentionPlanner. It owns what is pattern-specific — its
// knobs by name, their native values and ranges, the price of a plan before
// it runs, the knobs that fit a budget, its mask map, and the mechanism that
// runs its plans — so that server/, the proto and the metrics handle every
// pattern alike. Planners are made by name (model/attention/planner_registry.h).
#ifndef DOCSPARSE_MODEL_ATTENTION_ATTENTION_PLANNER_H_
#define DOCSPARSE_MODEL_ATTENTION_ATTENTION_PLANNER_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "model/attention/attention.h"
#include "model/attention/cost_model.h"

namespace docsparse {

class EdgePlanner;  // model/attention/edge_plan.h

// One knob: its native value and the values a request may set.
struct KnobRange {
  double native = 0;
  double min = 0;
  double max = 0;
  bool integer = true;
};

// The price of one request's plan, before it runs: all its sequences, all
// layers and heads (exact for deterministic planners, the expectation for
// sampling ones).
struct AttentionPrice {
  double edges = 0;
  // edges / dense pairs over real tokens, all heads and layers.
  double density = 0;
  // 4·head_dim per edge plus planner overhead.
  double attention_flops = 0;
};

// A request's cap; at most one is set.
struct AttentionCap {
  std::optional<double> max_density;
  std::optional<double> max_attention_gflops;
};

struct BudgetFit {
  AttentionKnobValues knobs;  // every knob the planner runs with
  AttentionPrice price;
  // False: nothing on the planner's lattice fits the cap; `knobs` is its
  // cheapest plan (the floor), which runs unless the request is strict.
  bool fits = true;
};

class AttentionPlanner {
 public:
  virtual ~AttentionPlanner() = default;

  virtual AttentionKind kind() const = 0;
  std::string_view name() const { return AttentionKindName(kind()); }

  // Every knob, with its native value from the model's config or
  // docsparse.json, and its range. Empty for dense.
  virtual std::map<std::string, KnobRange> Knobs() const = 0;
  // Whether plans sample (so a request's seed matters).
  virtual bool samples() const { return false; }
  // Checks a whole set of knobs (every knob set, each already in range) for
  // combinations the planner cannot run; the message names the knobs.
  virtual absl::Status ValidateKnobs(const AttentionKnobValues& knobs) const;
  // A word the cost report adds to the knobs (LSG: its sparsity type).
  virtual std::string Variant() const { return ""; }

  // The price of running `knobs` (unset knobs native) on sequences of
  // `tokens` tokens each, as the budget sees them (without global tokens the
  // encoder prepends; the planner adds them).
  virtual AttentionPrice Price(const AttentionKnobValues& knobs, const std::vector<int64_t>& tokens,
                               const EncoderShape& shape) const = 0;
  // The knobs closest to `start` (the native values with a request's own
  // knobs over them) whose price fits `cap`; with no cap, `start` itself.
  virtual BudgetFit FitBudget(const AttentionCap& cap, const AttentionKnobValues& start,
                              const std::vector<int64_t>& tokens,
                              const EncoderShape& shape) const = 0;
  // What the floor is, for a strict request's refusal ("lsg: the cheapest
  // block / sparse block / sparsity factor on its lattice").
  virtual std::string FloorDescription() const = 0;

  // Row-major [cells, cells] density of each query-block x key-block cell
  // for documents of `lengths` tokens under `knobs` (mean over heads and
  // windows); sets *cells. Default: dense.
  virtual std::vector<float> MaskMap(const AttentionKnobValues& knobs,
                                     const std::vector<int64_t>& lengths, int resolution,
                                     int* cells) const;

  // The mechanism that runs this planner's plans, reading each item's
  // ItemAttentionOptions::knobs and seed.
  virtual std::unique_ptr<AttentionMechanism> MakeMechanism() const = 0;
  // Its plans as lists of pairs (model/attention/edge_plan.h), which unions
  // of plans merge; null for a planner whose plans are not token pairs
  // (dense, LSG's pooled keys).
  virtual std::shared_ptr<const EdgePlanner> edge_planner() const { return nullptr; }
};

// Checks a request's knobs against `planner`: each name must be one of its
// knobs and each value finite and in range. Errors are INVALID_ARGUMENT
// naming `field_prefix` + the knob ("budget.knobs.window: ...").
absl::Status CheckRequestKnobs(const AttentionPlanner& planner, const AttentionKnobValues& knobs,
                               std::string_view field_prefix);

// Sets the native value of each knob of `knobs` that `configured` names
// (docsparse.json's attention.knobs); names it lacks are left to
// CheckRequestKnobs.
void ApplyConfiguredNatives(const AttentionKnobValues& configured,
                            std::map<std::string, KnobRange>* knobs);

// Every knob's native value, with `overrides` over them.
AttentionKnobValues StartingKnobs(const AttentionPlanner& planner,
                                  const AttentionKnobValues& overrides);

// A sampling seed from a request id when the request brings none: stable
// across processes and versions.
uint64_t SamplingSeedFromRequestId(std::string_view request_id);

// The price of a plan that computes `layer_edges` pairs per layer (all
// heads) against `layer_dense_pairs` dense ones, the same in every layer.
AttentionPrice PriceOfLayer(double layer_edges, double layer_dense_pairs,
                            const EncoderShape& shape);

// Dense pairs of one head over `tokens` sequences of `extra` + n tokens.
double DensePairs(const std::vector<int64_t>& tokens, int64_t extra);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_ATTENTION_PLANNER_H_
