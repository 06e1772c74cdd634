// The planners by name (DESIGN.md, "The planner contract"), and the set a
// model serves: its native planner plus every other one it has what it needs
// for (dense and the position patterns always; LSG with an LSG config; SBM
// with sbm.safetensors in the folder). Adding a pattern: its planner file,
// one line in the table in planner_registry.cc, its tests.
#ifndef DOCSPARSE_MODEL_ATTENTION_PLANNER_REGISTRY_H_
#define DOCSPARSE_MODEL_ATTENTION_PLANNER_REGISTRY_H_

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/attention/attention_planner.h"
#include "model/checkpoint/bart_config.h"
#include "model/checkpoint/hf_config.h"
#include "model/checkpoint/lsg_config.h"

namespace docsparse {

// What a planner may be made from.
struct PlannerSource {
  std::string model_dir;  // SBM reads sbm.safetensors there
  EncoderShape shape;
  // An LSG checkpoint's config: its encoder prepends num_global_tokens to
  // every sequence, which every planner then sees.
  std::optional<LsgConfig> lsg;
  // docsparse.json's attention.knobs: native values of the native planner's
  // knobs, in place of its defaults.
  AttentionKnobValues configured_knobs;
  // ModernBERT's schedule, [num_layers]: which layers attend fully (the
  // modernbert planner); empty: every third from layer 0, ModernBERT's
  // default.
  std::vector<bool> full_attention_layers;
  // docsparse.json's attention.union: the union planner's parts; empty:
  // UnionPartsOf's default.
  std::vector<AttentionKind> union_parts;

  int64_t prepended_tokens() const { return lsg.has_value() ? lsg->num_global_tokens : 0; }
};

// The attention a checkpoint was trained with, and the knobs its config
// fixes: "native" in docsparse.json's attention.kind.
struct NativeAttention {
  AttentionKind kind = AttentionKind::kDense;
  // The native planner's knobs that the checkpoint sets (docsparse.json's
  // attention.knobs go over them).
  AttentionKnobValues knobs;
};
// LSG for an LSG config; Longformer for a Longformer checkpoint (its
// attention_window, and one global token: the first, as
// LongformerForSequenceClassification sets it; 0 gives LongformerModel's
// default of none); ModernBERT's scheme; BigBird's (NativeBigBirdAttention);
// else dense.
NativeAttention NativeAttentionOf(const EncoderConfig& config);
// LSG for an LSG-BART / LSG-Pegasus config; Longformer for LED's encoder
// (as for a Longformer checkpoint); BigBird's for BigBird-Pegasus' encoder;
// else dense.
NativeAttention NativeAttentionOf(const BartConfig& config);
// The bigbird planner with the knobs that reproduce transformers'
// BigBirdBlockSparseAttention at inference (model/attention/bigbird_pattern.h);
// dense for attention_type "original_full".
NativeAttention NativeBigBirdAttention(const BigBirdFields& bigbird);

// Each planner's factory (its own file).
std::unique_ptr<AttentionPlanner> MakeDensePlanner(const PlannerSource& source);
std::unique_ptr<AttentionPlanner> MakeLsgPlanner(const PlannerSource& source);
absl::StatusOr<std::unique_ptr<AttentionPlanner>> MakeSbmPlanner(const PlannerSource& source);
bool HasSbmParameters(const PlannerSource& source);
// The position patterns (model/attention/pattern_planners.cc).
std::unique_ptr<AttentionPlanner> MakeLongformerPlanner(const PlannerSource& source);
std::unique_ptr<AttentionPlanner> MakeBigBirdPlanner(const PlannerSource& source);
std::unique_ptr<AttentionPlanner> MakeSparseTransformerPlanner(const PlannerSource& source);
std::unique_ptr<AttentionPlanner> MakeStarPlanner(const PlannerSource& source);
std::unique_ptr<AttentionPlanner> MakeModernBertPlanner(const PlannerSource& source);
std::unique_ptr<AttentionPlanner> MakeEtcPlanner(const PlannerSource& source);
// The content patterns (model/attention/content_planners.cc).
std::unique_ptr<AttentionPlanner> MakeLshPlanner(const PlannerSource& source);
std::unique_ptr<AttentionPlanner> MakeRoutingPlanner(const PlannerSource& source);
// The union of plans (model/attention/union_planner.cc) over
// UnionPartsOf(source): source.union_parts, else longformer and sbm where
// the model has sbm.safetensors, else longformer and lsh.
absl::StatusOr<std::unique_ptr<AttentionPlanner>> MakeUnionPlanner(const PlannerSource& source);
std::vector<AttentionKind> UnionPartsOf(const PlannerSource& source);

// The shape the cost model prices an encoder by. ModernBERT's GeGLU counts
// as an intermediate of 3/2 its width: Wi makes twice the width, so a layer's
// products cost 3·h·inner per token where BERT's cost 2·h·inner.
EncoderShape EncoderShapeOf(const EncoderConfig& config);
// A summarizer's encoder shape.
EncoderShape EncoderShapeOf(const BartConfig& config);

// The source of a checkpoint's planners: its shape, LSG config and
// ModernBERT schedule.
PlannerSource PlannerSourceOf(const EncoderConfig& config);
PlannerSource PlannerSourceOf(const BartConfig& config);

// The planner `kind` for `source`: FAILED_PRECONDITION when the model lacks
// what it needs, INVALID_ARGUMENT for a configured knob it does not have.
absl::StatusOr<std::unique_ptr<AttentionPlanner>> MakeAttentionPlanner(AttentionKind kind,
                                                                       const PlannerSource& source);

// The mechanism of `native`'s planner with the checkpoint's knobs: what a
// folder runs as published, for code that loads one without its
// docsparse.json (Seq2SeqModel::Create's default, tests, benchmarks).
absl::StatusOr<std::unique_ptr<AttentionMechanism>> MakeNativeMechanism(
    const NativeAttention& native, PlannerSource source);

// The kinds `source` has what it needs for, in enum order.
std::vector<AttentionKind> AvailablePlannerKinds(const PlannerSource& source);

// One model's planners: the native one and the alternatives a request may
// ask for (SparsityBudget.attention).
class ModelPlanners {
 public:
  // `native` and every kind in AvailablePlannerKinds(source); the configured
  // knobs go to the native planner only. `alternatives` false: the native
  // planner and dense only.
  static absl::StatusOr<std::unique_ptr<ModelPlanners>> Make(AttentionKind native,
                                                             const PlannerSource& source,
                                                             bool alternatives = true);

  const AttentionPlanner& native() const { return *planners_.at(native_); }
  // Null when the model does not serve `kind`.
  const AttentionPlanner* Find(AttentionKind kind) const;
  // Native first, then the others in enum order.
  std::vector<AttentionKind> kinds() const;
  // A mechanism running each item with its options' kind (native when
  // unset): model/attention/attention_switch.h over every planner's.
  std::unique_ptr<AttentionMechanism> MakeMechanism() const;

 private:
  AttentionKind native_ = AttentionKind::kDense;
  std::map<AttentionKind, std::unique_ptr<AttentionPlanner>> planners_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_PLANNER_REGISTRY_H_
