#include "model/attention/planner_registry.h"

#include "absl/strings/str_cat.h"
#include "model/attention/attention_switch.h"

namespace docsparse {
namespace {

bool Always(const PlannerSource&) { return true; }
bool HasLsgConfig(const PlannerSource& source) { return source.lsg.has_value(); }

absl::StatusOr<std::unique_ptr<AttentionPlanner>> Dense(const PlannerSource& source) {
  return MakeDensePlanner(source);
}
absl::StatusOr<std::unique_ptr<AttentionPlanner>> Lsg(const PlannerSource& source) {
  return MakeLsgPlanner(source);
}
absl::StatusOr<std::unique_ptr<AttentionPlanner>> Longformer(const PlannerSource& source) {
  return MakeLongformerPlanner(source);
}
absl::StatusOr<std::unique_ptr<AttentionPlanner>> BigBird(const PlannerSource& source) {
  return MakeBigBirdPlanner(source);
}
absl::StatusOr<std::unique_ptr<AttentionPlanner>> SparseTransformer(const PlannerSource& source) {
  return MakeSparseTransformerPlanner(source);
}
absl::StatusOr<std::unique_ptr<AttentionPlanner>> Star(const PlannerSource& source) {
  return MakeStarPlanner(source);
}
absl::StatusOr<std::unique_ptr<AttentionPlanner>> ModernBert(const PlannerSource& source) {
  return MakeModernBertPlanner(source);
}
absl::StatusOr<std::unique_ptr<AttentionPlanner>> Etc(const PlannerSource& source) {
  return MakeEtcPlanner(source);
}
absl::StatusOr<std::unique_ptr<AttentionPlanner>> Lsh(const PlannerSource& source) {
  return MakeLshPlanner(source);
}
absl::StatusOr<std::unique_ptr<AttentionPlanner>> Routing(const PlannerSource& source) {
  return MakeRoutingPlanner(source);
}
bool HasUnionParts(const PlannerSource& source);

struct Registration {
  AttentionKind kind;
  bool (*available)(const PlannerSource&);
  absl::StatusOr<std::unique_ptr<AttentionPlanner>> (*make)(const PlannerSource&);
  // What a model needs for it, for the refusal.
  const char* needs;
};

const Registration kPlanners[] = {
    {AttentionKind::kDense, Always, Dense, ""},
    {AttentionKind::kLsg, HasLsgConfig, Lsg,
     "an LSG checkpoint (config.json with LSG fields; make one with docsparse-convert lsg)"},
    {AttentionKind::kSbm, HasSbmParameters, MakeSbmPlanner,
     "sbm.safetensors in the model folder (make one with docsparse-convert sbm)"},
    {AttentionKind::kLongformer, Always, Longformer, ""},
    {AttentionKind::kBigBird, Always, BigBird, ""},
    {AttentionKind::kSparseTransformer, Always, SparseTransformer, ""},
    {AttentionKind::kStar, Always, Star, ""},
    {AttentionKind::kModernBert, Always, ModernBert, ""},
    {AttentionKind::kEtc, Always, Etc, ""},
    {AttentionKind::kLsh, Always, Lsh, ""},
    {AttentionKind::kRouting, Always, Routing, ""},
    {AttentionKind::kUnion, HasUnionParts, MakeUnionPlanner,
     "every planner its union lists (docsparse.json's attention.union)"},
};

const Registration* Find(AttentionKind kind) {
  for (const Registration& registration : kPlanners) {
    if (registration.kind == kind) return &registration;
  }
  return nullptr;
}

bool HasUnionParts(const PlannerSource& source) {
  for (AttentionKind kind : UnionPartsOf(source)) {
    const Registration* part = Find(kind);
    if (part == nullptr || kind == AttentionKind::kUnion || !part->available(source)) return false;
  }
  return true;
}

}  // namespace

EncoderShape EncoderShapeOf(const EncoderConfig& config) {
  const int intermediate =
      config.modernbert.has_value() ? config.intermediate_size * 3 / 2 : config.intermediate_size;
  return EncoderShape{config.num_layers, config.num_heads, config.head_dim(), config.hidden_size,
                      intermediate};
}

EncoderShape EncoderShapeOf(const BartConfig& config) {
  return EncoderShape{config.num_layers, config.num_heads, config.head_dim(), config.hidden_size,
                      config.intermediate_size};
}

PlannerSource PlannerSourceOf(const EncoderConfig& config) {
  PlannerSource source;
  source.shape = EncoderShapeOf(config);
  source.lsg = config.lsg;
  if (config.modernbert.has_value()) {
    source.full_attention_layers = config.modernbert->global_layers;
  }
  return source;
}

PlannerSource PlannerSourceOf(const BartConfig& config) {
  PlannerSource source;
  source.shape = EncoderShapeOf(config);
  source.lsg = config.lsg;
  return source;
}

NativeAttention NativeBigBirdAttention(const BigBirdFields& bigbird) {
  if (!bigbird.block_sparse) return {AttentionKind::kDense, {}};
  const int block = bigbird.block_size;
  const int random = bigbird.num_random_blocks;
  // transformers' BigBirdBlockSparseAttention at inference
  // (bigbird_pattern.h): first and last block global, a window of 3 blocks,
  // every random block a copy of block 0, and full attention at or below
  // (5 + 2r)·b tokens (BigBirdModel.forward's max_tokens_to_attend).
  return {AttentionKind::kBigBird,
          {{"block_size", block},
           {"window_blocks", 3},
           {"global_blocks", 1},
           {"random_blocks", random},
           {"last_block_global", 1},
           {"random_at_first_block", 1},
           {"dense_up_to", (5 + 2 * random) * block}}};
}

NativeAttention NativeAttentionOf(const EncoderConfig& config) {
  if (config.lsg.has_value()) return {AttentionKind::kLsg, {}};
  if (config.modernbert.has_value()) {
    return {AttentionKind::kModernBert,
            {{"window", config.modernbert->local_attention}, {"full_layers", 1}}};
  }
  if (config.attention_window > 0) {
    return {AttentionKind::kLongformer,
            {{"window", config.attention_window}, {"global_tokens", 1}}};
  }
  if (config.bigbird.has_value()) return NativeBigBirdAttention(*config.bigbird);
  return {AttentionKind::kDense, {}};
}

NativeAttention NativeAttentionOf(const BartConfig& config) {
  if (config.lsg.has_value()) return {AttentionKind::kLsg, {}};
  if (config.attention_window > 0) {
    return {AttentionKind::kLongformer,
            {{"window", config.attention_window}, {"global_tokens", 1}}};
  }
  if (config.bigbird.has_value()) return NativeBigBirdAttention(*config.bigbird);
  return {AttentionKind::kDense, {}};
}

absl::StatusOr<std::unique_ptr<AttentionMechanism>> MakeNativeMechanism(
    const NativeAttention& native, PlannerSource source) {
  source.configured_knobs = native.knobs;
  absl::StatusOr<std::unique_ptr<AttentionPlanner>> planner =
      MakeAttentionPlanner(native.kind, source);
  if (!planner.ok()) return planner.status();
  return (*planner)->MakeMechanism();
}

absl::StatusOr<std::unique_ptr<AttentionPlanner>> MakeAttentionPlanner(
    AttentionKind kind, const PlannerSource& source) {
  const Registration* registration = Find(kind);
  if (registration == nullptr) {
    return absl::UnimplementedError(absl::StrCat(
        "attention kind \"", std::string(AttentionKindName(kind)), "\" is not served yet"));
  }
  if (!registration->available(source)) {
    return absl::FailedPreconditionError(absl::StrCat("attention kind \"",
                                                      std::string(AttentionKindName(kind)),
                                                      "\" needs ", registration->needs));
  }
  absl::StatusOr<std::unique_ptr<AttentionPlanner>> planner = registration->make(source);
  if (!planner.ok()) return planner.status();
  // The configured values are the planner's natives now; checking them as
  // a request's catches unknown names, ranges and combinations alike.
  if (absl::Status knobs =
          CheckRequestKnobs(**planner, source.configured_knobs, "attention.knobs.");
      !knobs.ok()) {
    return knobs;
  }
  return planner;
}

std::vector<AttentionKind> AvailablePlannerKinds(const PlannerSource& source) {
  std::vector<AttentionKind> kinds;
  for (const Registration& registration : kPlanners) {
    if (registration.available(source)) kinds.push_back(registration.kind);
  }
  return kinds;
}

absl::StatusOr<std::unique_ptr<ModelPlanners>> ModelPlanners::Make(AttentionKind native,
                                                                   const PlannerSource& source,
                                                                   bool alternatives) {
  auto planners = std::unique_ptr<ModelPlanners>(new ModelPlanners());
  planners->native_ = native;
  absl::StatusOr<std::unique_ptr<AttentionPlanner>> own = MakeAttentionPlanner(native, source);
  if (!own.ok()) return own.status();
  planners->planners_[native] = *std::move(own);
  PlannerSource others = source;
  others.configured_knobs.clear();
  std::vector<AttentionKind> kinds = {AttentionKind::kDense};
  if (alternatives) kinds = AvailablePlannerKinds(others);
  for (AttentionKind kind : kinds) {
    if (kind == native) continue;
    absl::StatusOr<std::unique_ptr<AttentionPlanner>> planner = MakeAttentionPlanner(kind, others);
    if (!planner.ok()) return planner.status();
    planners->planners_[kind] = *std::move(planner);
  }
  return planners;
}

const AttentionPlanner* ModelPlanners::Find(AttentionKind kind) const {
  const auto it = planners_.find(kind);
  return it == planners_.end() ? nullptr : it->second.get();
}

std::vector<AttentionKind> ModelPlanners::kinds() const {
  std::vector<AttentionKind> kinds = {native_};
  for (const auto& [kind, planner] : planners_) {
    if (kind != native_) kinds.push_back(kind);
  }
  return kinds;
}

std::unique_ptr<AttentionMechanism> ModelPlanners::MakeMechanism() const {
  std::map<AttentionKind, std::unique_ptr<AttentionMechanism>> alternatives;
  for (const auto& [kind, planner] : planners_) {
    if (kind != native_) alternatives[kind] = planner->MakeMechanism();
  }
  return MakeSwitchingAttention(native().MakeMechanism(), std::move(alternatives));
}

}  // namespace docsparse
