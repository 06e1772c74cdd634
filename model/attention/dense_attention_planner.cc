// Dense attention as a planner: no knobs; every real pair, priced exactly.
#include "model/attention/knob_lattice.h"
#include "model/attention/planner_registry.h"

namespace docsparse {
namespace {

class DensePlanner final : public AttentionPlanner {
 public:
  explicit DensePlanner(int64_t prepended_tokens) : prepended_tokens_(prepended_tokens) {}

  AttentionKind kind() const override { return AttentionKind::kDense; }
  std::map<std::string, KnobRange> Knobs() const override { return {}; }

  AttentionPrice Price(const AttentionKnobValues&, const std::vector<int64_t>& tokens,
                       const EncoderShape& shape) const override {
    AttentionPrice price;
    price.edges = DensePairs(tokens, prepended_tokens_) * shape.num_heads * shape.num_layers;
    price.density = tokens.empty() ? 0 : 1;
    price.attention_flops = 4.0 * shape.head_dim * price.edges;
    return price;
  }

  BudgetFit FitBudget(const AttentionCap& cap, const AttentionKnobValues& start,
                      const std::vector<int64_t>& tokens,
                      const EncoderShape& shape) const override {
    BudgetFit fit{start, Price(start, tokens, shape), true};
    fit.fits = PriceFits(fit.price, cap);
    return fit;
  }

  std::string FloorDescription() const override { return "dense attention"; }

  std::unique_ptr<AttentionMechanism> MakeMechanism() const override {
    return MakeDenseAttention();
  }

 private:
  int64_t prepended_tokens_;
};

}  // namespace

std::unique_ptr<AttentionPlanner> MakeDensePlanner(const PlannerSource& source) {
  return std::make_unique<DensePlanner>(source.prepended_tokens());
}

}  // namespace docsparse
