// LSG as a planner: its knobs are the block size, sparse block size and
// sparsity factor of the checkpoint's config (model/attention/lsg_budget.h
// prices and fits them); the sparsity type and global tokens stay as
// converted.
#include "absl/strings/str_cat.h"
#include "model/attention/lsg_attention.h"
#include "model/attention/lsg_budget.h"
#include "model/attention/lsg_mask_map.h"
#include "model/attention/planner_registry.h"

namespace docsparse {
namespace {

class LsgPlanner final : public AttentionPlanner {
 public:
  explicit LsgPlanner(const LsgConfig& config) : config_(config) {}

  AttentionKind kind() const override { return AttentionKind::kLsg; }

  std::map<std::string, KnobRange> Knobs() const override {
    return {
        {kLsgBlockSizeKnob, {static_cast<double>(config_.block_size), 1, 65536}},
        {kLsgSparseBlockSizeKnob, {static_cast<double>(config_.sparse_block_size), 0, 65536}},
        {kLsgSparsityFactorKnob, {static_cast<double>(config_.sparsity_factor), 0, 65536}},
        // Fixed by the checkpoint (its embeddings), reported with the others.
        {"num_global_tokens",
         {static_cast<double>(config_.num_global_tokens),
          static_cast<double>(config_.num_global_tokens),
          static_cast<double>(config_.num_global_tokens)}},
    };
  }

  absl::Status ValidateKnobs(const AttentionKnobValues& knobs) const override {
    return ValidateLsgConfig(Configured(knobs), "lsg knobs");
  }

  std::string Variant() const override {
    return std::string(LsgSparsityName(config_.sparsity_type));
  }

  AttentionPrice Price(const AttentionKnobValues& knobs, const std::vector<int64_t>& tokens,
                       const EncoderShape& shape) const override {
    const LsgConfig config = Configured(knobs);
    double edges = 0;
    for (int64_t n : tokens)
      edges += static_cast<double>(LsgPlannedEdges(config, n, shape.num_heads));
    return PriceOfLayer(edges, DensePairs(tokens, config.num_global_tokens) * shape.num_heads,
                        shape);
  }

  BudgetFit FitBudget(const AttentionCap& cap, const AttentionKnobValues& start,
                      const std::vector<int64_t>& tokens,
                      const EncoderShape& shape) const override {
    const LsgKnobChoice choice = ChooseLsgKnobs(Configured(start), tokens, shape,
                                                LsgCap{cap.max_density, cap.max_attention_gflops});
    BudgetFit fit;
    fit.knobs = start;
    for (const auto& [name, value] : choice.options.knobs) fit.knobs[name] = value;
    fit.price = Price(fit.knobs, tokens, shape);
    fit.fits = choice.fits;
    return fit;
  }

  std::string FloorDescription() const override {
    return "lsg: the cheapest block / sparse block / sparsity factor on its lattice";
  }

  std::vector<float> MaskMap(const AttentionKnobValues& knobs, const std::vector<int64_t>& lengths,
                             int resolution, int* cells) const override {
    return LsgMaskMap(Configured(knobs), lengths, resolution, cells);
  }

  std::unique_ptr<AttentionMechanism> MakeMechanism() const override {
    return MakeLsgAttention(config_);
  }

 private:
  LsgConfig Configured(const AttentionKnobValues& knobs) const {
    ItemAttentionOptions options;
    options.knobs = knobs;
    return ApplyLsgKnobs(config_, options);
  }

  LsgConfig config_;
};

}  // namespace

std::unique_ptr<AttentionPlanner> MakeLsgPlanner(const PlannerSource& source) {
  // docsparse.json's knobs become the native config (checked by the
  // registry against Knobs() and ValidateKnobs).
  ItemAttentionOptions configured;
  configured.knobs = source.configured_knobs;
  return std::make_unique<LsgPlanner>(ApplyLsgKnobs(*source.lsg, configured));
}

}  // namespace docsparse
