// `docsparse-bench attention --impl longformer|bigbird|sparse_transformer|star|modernbert|etc|
// lsh|routing|union`: each position and content pattern (and the default union, longformer +
// lsh without an SBM model) through its planner (model/attention/planner_registry.h)
// at its native knobs, or, with a case density, at the knobs its FitBudget
// picks for that max_density. Planning is part of the timed Forward, as in
// serving. Runs on the bench's thread count (LibTorch's, which the bench sets).
// modernbert times one of its sliding layers (its full layers are dense).
#include "bench/attention_impls.h"
#include "model/attention/planner_registry.h"

namespace docsparse::bench {
namespace {

AttentionFactory PatternFactory(AttentionKind kind) {
  return [kind](const AttentionCase& c) -> absl::StatusOr<PreparedAttention> {
    PlannerSource source;
    source.shape = EncoderShape{1, c.heads, c.head_dim, c.heads * c.head_dim, 0};
    source.full_attention_layers = {false};
    absl::StatusOr<std::unique_ptr<AttentionPlanner>> planner = MakeAttentionPlanner(kind, source);
    if (!planner.ok()) return planner.status();
    ItemAttentionOptions options;
    options.seed = c.seed;
    options.knobs = StartingKnobs(**planner, {});
    if (c.density > 0) {
      AttentionCap cap;
      cap.max_density = c.density;
      options.knobs = (*planner)->FitBudget(cap, options.knobs, {c.seq}, source.shape).knobs;
    }
    return PreparedAttention{(*planner)->MakeMechanism(), options, 0};
  };
}

const bool kPatternsRegistered = [] {
  for (AttentionKind kind :
       {AttentionKind::kLongformer, AttentionKind::kBigBird, AttentionKind::kSparseTransformer,
        AttentionKind::kStar, AttentionKind::kModernBert, AttentionKind::kEtc, AttentionKind::kLsh,
        AttentionKind::kRouting, AttentionKind::kUnion}) {
    RegisterAttentionImpl(std::string(AttentionKindName(kind)), PatternFactory(kind));
  }
  return true;
}();

}  // namespace
}  // namespace docsparse::bench
