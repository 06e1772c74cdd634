// SBM as a planner: its knobs are β (edge_regularization) and a density
// target solved per layer (target_density); sampled, so priced in
// expectation, and with a floor of kSbmMinEdgesPerQuery expected edges per
// query (model/attention/sbm_attention.h).
#include <algorithm>
#include <filesystem>
#include <limits>

#include "absl/strings/str_cat.h"
#include "model/attention/knob_lattice.h"
#include "model/attention/planner_registry.h"
#include "model/attention/sbm_attention.h"

namespace docsparse {
namespace {

// β may be any finite number: a huge one leaves the floor, which runs.
constexpr double kAnyFinite = std::numeric_limits<double>::max();

class SbmPlanner final : public AttentionPlanner {
 public:
  SbmPlanner(std::shared_ptr<const SbmParameters> parameters, AttentionKnobValues configured)
      : parameters_(std::move(parameters)), configured_(std::move(configured)) {}

  AttentionKind kind() const override { return AttentionKind::kSbm; }
  bool samples() const override { return true; }

  std::map<std::string, KnobRange> Knobs() const override {
    return {
        {kSbmEdgeRegularizationKnob,
         {KnobOr(configured_, kSbmEdgeRegularizationKnob, 0), -kAnyFinite, kAnyFinite, false}},
        {kSbmTargetDensityKnob, {KnobOr(configured_, kSbmTargetDensityKnob, 0), 0, 1, false}},
        // On by default when served: it keeps far more of the dense
        // output at the same density (docs/BENCHMARKS.md); 0 is the paper's.
        {kSbmInclusionCorrectionKnob,
         {KnobOr(configured_, kSbmInclusionCorrectionKnob, 1), 0, 1, true}},
    };
  }

  // With a density target, what it allows; without one the density depends
  // on the memberships, so the plan is priced as dense (an upper bound).
  AttentionPrice Price(const AttentionKnobValues& knobs, const std::vector<int64_t>& tokens,
                       const EncoderShape& shape) const override {
    const double target = KnobOr(knobs, kSbmTargetDensityKnob, 0);
    AttentionPrice price;
    price.density = tokens.empty() ? 0 : (target > 0 ? target : 1);
    price.edges = DensePairs(tokens, 0) * price.density * shape.num_heads * shape.num_layers;
    price.attention_flops = 4.0 * shape.head_dim * price.edges;
    return price;
  }

  BudgetFit FitBudget(const AttentionCap& cap, const AttentionKnobValues& start,
                      const std::vector<int64_t>& tokens,
                      const EncoderShape& shape) const override {
    BudgetFit fit{start, {}, true};
    const double floor = SbmFloorDensity(tokens);
    double target = KnobOr(start, kSbmTargetDensityKnob, 0);
    if (cap.max_density) target = *cap.max_density;
    if (cap.max_attention_gflops) {
      int64_t total = 0;
      for (int64_t n : tokens) total += n;
      target = SbmTargetDensityForAttentionFlops(*cap.max_attention_gflops * 1e9, total, shape,
                                                 parameters_->num_clusters());
    }
    const bool capped = cap.max_density || cap.max_attention_gflops;
    if (capped) {
      // Below the floor the sampler raises each layer to it and reports so
      // (raised_to_floor); the fit prices the floor, what will run.
      fit.fits = target >= floor;
      fit.knobs[kSbmTargetDensityKnob] = target > 0 ? target : 1e-9;
      AttentionKnobValues priced = fit.knobs;
      priced[kSbmTargetDensityKnob] = std::max(target, floor);
      fit.price = Price(priced, tokens, shape);
      return fit;
    }
    fit.price = Price(fit.knobs, tokens, shape);
    return fit;
  }

  std::string FloorDescription() const override {
    return absl::StrCat("sbm: at least ", kSbmMinEdgesPerQuery, " expected edges per query");
  }

  std::unique_ptr<AttentionMechanism> MakeMechanism() const override {
    SbmAttentionOptions options;
    options.knobs = StartingKnobs(*this, {});
    return MakeSbmAttention(parameters_, options);
  }
  std::shared_ptr<const EdgePlanner> edge_planner() const override {
    return MakeSbmEdgePlanner(parameters_);
  }

 private:
  std::shared_ptr<const SbmParameters> parameters_;
  AttentionKnobValues configured_;  // docsparse.json's
};

}  // namespace

absl::StatusOr<std::unique_ptr<AttentionPlanner>> MakeSbmPlanner(const PlannerSource& source) {
  absl::StatusOr<std::shared_ptr<const SbmParameters>> parameters =
      SbmParameters::LoadFromModelDir(source.model_dir, source.shape);
  if (!parameters.ok()) return parameters.status();
  return std::unique_ptr<AttentionPlanner>(
      std::make_unique<SbmPlanner>(*std::move(parameters), source.configured_knobs));
}

bool HasSbmParameters(const PlannerSource& source) {
  return !source.model_dir.empty() &&
         std::filesystem::exists(std::filesystem::path(source.model_dir) /
                                 SbmParameters::kFileName);
}

}  // namespace docsparse
