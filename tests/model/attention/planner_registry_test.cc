// The planner contract (model/attention/attention_planner.h,
// planner_registry.h): every planner made by name, its knobs checked by
// name and range, its budget fits priced by its own Price, and the lattice
// search they share.
#include "model/attention/planner_registry.h"

#include <gtest/gtest.h>

#include "model/attention/knob_lattice.h"

namespace docsparse {
namespace {

const EncoderShape kMiniLm{6, 12, 32, 384, 1536};

PlannerSource PlainEncoder() {
  PlannerSource source;
  source.shape = kMiniLm;
  return source;
}

PlannerSource LsgEncoder() {
  PlannerSource source = PlainEncoder();
  source.lsg = LsgConfig{};
  return source;
}

TEST(PlannerRegistryTest, EveryAvailableKindIsMadeAndNamesItself) {
  for (const PlannerSource& source : {PlainEncoder(), LsgEncoder()}) {
    for (AttentionKind kind : AvailablePlannerKinds(source)) {
      absl::StatusOr<std::unique_ptr<AttentionPlanner>> planner =
          MakeAttentionPlanner(kind, source);
      ASSERT_TRUE(planner.ok()) << AttentionKindName(kind) << ": " << planner.status();
      EXPECT_EQ((*planner)->kind(), kind);
      EXPECT_EQ(AttentionKindNamed((*planner)->name()), kind);
      EXPECT_NE((*planner)->MakeMechanism(), nullptr);
    }
  }
}

TEST(PlannerRegistryTest, MissingParametersAndUnknownConfiguredKnobsAreRefusedByName) {
  absl::StatusOr<std::unique_ptr<AttentionPlanner>> lsg =
      MakeAttentionPlanner(AttentionKind::kLsg, PlainEncoder());
  EXPECT_EQ(lsg.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(lsg.status().message().find("LSG checkpoint"), std::string::npos) << lsg.status();

  absl::StatusOr<std::unique_ptr<AttentionPlanner>> sbm =
      MakeAttentionPlanner(AttentionKind::kSbm, PlainEncoder());
  EXPECT_EQ(sbm.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(sbm.status().message().find("sbm.safetensors"), std::string::npos) << sbm.status();

  PlannerSource source = LsgEncoder();
  source.configured_knobs = {{"window", 64}};
  absl::StatusOr<std::unique_ptr<AttentionPlanner>> unknown =
      MakeAttentionPlanner(AttentionKind::kLsg, source);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.status().message().find("attention.knobs.window: not a knob of lsg"),
            std::string::npos)
      << unknown.status();

  // A combination LSG cannot run: the factor must divide the block.
  source.configured_knobs = {{"sparsity_factor", 3}};
  EXPECT_EQ(MakeAttentionPlanner(AttentionKind::kLsg, source).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(PlannerRegistryTest, ConfiguredKnobsBecomeTheNativeValues) {
  PlannerSource source = LsgEncoder();
  source.configured_knobs = {{"block_size", 64}};
  absl::StatusOr<std::unique_ptr<AttentionPlanner>> lsg =
      MakeAttentionPlanner(AttentionKind::kLsg, source);
  ASSERT_TRUE(lsg.ok()) << lsg.status();
  EXPECT_EQ((*lsg)->Knobs().at("block_size").native, 64);
  const BudgetFit fit = (*lsg)->FitBudget({}, StartingKnobs(**lsg, {}), {4000}, kMiniLm);
  EXPECT_EQ(fit.knobs.at("block_size"), 64);
}

TEST(PlannerRegistryTest, RequestKnobsAreCheckedByNameAndRange) {
  absl::StatusOr<std::unique_ptr<AttentionPlanner>> lsg =
      MakeAttentionPlanner(AttentionKind::kLsg, LsgEncoder());
  ASSERT_TRUE(lsg.ok());
  EXPECT_TRUE(CheckRequestKnobs(**lsg, {{"block_size", 64}}, "budget.knobs.").ok());
  const absl::Status unknown = CheckRequestKnobs(**lsg, {{"beta", 1}}, "budget.knobs.");
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("budget.knobs.beta: not a knob of lsg attention (block_size"),
            std::string::npos)
      << unknown;
  const absl::Status fraction = CheckRequestKnobs(**lsg, {{"block_size", 1.5}}, "budget.knobs.");
  EXPECT_NE(fraction.message().find("budget.knobs.block_size: 1.5 must be an integer in"),
            std::string::npos)
      << fraction;
  EXPECT_FALSE(CheckRequestKnobs(**lsg, {{"block_size", 0}}, "budget.knobs.").ok());
  // Fixed by the checkpoint: only its own value passes.
  EXPECT_TRUE(CheckRequestKnobs(**lsg, {{"num_global_tokens", 1}}, "budget.knobs.").ok());
  EXPECT_FALSE(CheckRequestKnobs(**lsg, {{"num_global_tokens", 2}}, "budget.knobs.").ok());

  const std::unique_ptr<AttentionPlanner> dense = MakeDensePlanner(PlainEncoder());
  const absl::Status none = CheckRequestKnobs(*dense, {{"window", 8}}, "budget.knobs.");
  EXPECT_NE(none.message().find("not a knob of dense attention (it has none)"), std::string::npos)
      << none;
}

// tests/fuzz/request_bytes_fuzz.cc found combinations refused in the
// planner's own words ("lsg knobs: field 'sparsity_factor': 17 is out of
// range [0, block_size=4]", "window: 63 must be even"), without the request
// field every other refusal starts with.
TEST(PlannerRegistryTest, CombinationsAreRefusedUnderTheirField) {
  absl::StatusOr<std::unique_ptr<AttentionPlanner>> lsg =
      MakeAttentionPlanner(AttentionKind::kLsg, LsgEncoder());
  ASSERT_TRUE(lsg.ok());
  const absl::Status factor =
      CheckRequestKnobs(**lsg, {{"block_size", 4}, {"sparsity_factor", 17}}, "budget.knobs.");
  EXPECT_EQ(factor.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(factor.message().rfind("budget.knobs: ", 0), 0u) << factor;
  EXPECT_NE(factor.message().find("sparsity_factor"), std::string::npos) << factor;

  const std::unique_ptr<AttentionPlanner> longformer = MakeLongformerPlanner(PlainEncoder());
  const absl::Status odd = CheckRequestKnobs(*longformer, {{"window", 63}}, "budget.knobs.");
  EXPECT_EQ(odd.message().rfind("budget.knobs: window: 63 must be even", 0), 0u) << odd;

  PlannerSource source = LsgEncoder();
  source.configured_knobs = {{"sparsity_factor", 3}};
  const absl::Status configured = MakeAttentionPlanner(AttentionKind::kLsg, source).status();
  EXPECT_EQ(configured.message().rfind("attention.knobs: ", 0), 0u) << configured;
}

// A knob name is whatever the client sent: echoed whole, a 2,000-byte one
// gave a 2 KB refusal (tests/fuzz/request_bytes_fuzz.cc holds refusals to
// 1 KiB; gRPC clients drop trailers over 8 KiB), and "a: b" forged the
// "field: problem" form.
TEST(PlannerRegistryTest, KnobNamesThatAreNotNamesAreQuotedAndCut) {
  const std::unique_ptr<AttentionPlanner> dense = MakeDensePlanner(PlainEncoder());
  const absl::Status long_name =
      CheckRequestKnobs(*dense, {{std::string(2000, 'x'), 1}}, "budget.knobs.");
  EXPECT_EQ(long_name.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(long_name.message().rfind("budget.knobs: 'xxxx", 0), 0u) << long_name;
  EXPECT_LT(long_name.message().size(), 200u) << long_name;
  const absl::Status colon = CheckRequestKnobs(*dense, {{"a: b", 1}}, "budget.knobs.");
  EXPECT_EQ(colon.message(), "budget.knobs: 'a: b' is not a knob of dense attention (it has none)");
}

TEST(PlannerRegistryTest, FitsArePricedByThePlannersOwnPrice) {
  for (const PlannerSource& source : {PlainEncoder(), LsgEncoder()}) {
    for (AttentionKind kind : AvailablePlannerKinds(source)) {
      const std::unique_ptr<AttentionPlanner> planner = *MakeAttentionPlanner(kind, source);
      const std::vector<int64_t> tokens = {3000, 511};
      const AttentionKnobValues start = StartingKnobs(*planner, {});
      const BudgetFit free = planner->FitBudget({}, start, tokens, kMiniLm);
      EXPECT_TRUE(free.fits) << planner->name();
      EXPECT_EQ(free.knobs, start) << planner->name();
      for (double cap : {0.5, 0.05, 0.005}) {
        AttentionCap density;
        density.max_density = cap;
        const BudgetFit fit = planner->FitBudget(density, start, tokens, kMiniLm);
        const AttentionPrice price = planner->Price(fit.knobs, tokens, kMiniLm);
        EXPECT_DOUBLE_EQ(price.density, fit.price.density) << planner->name() << " " << cap;
        if (fit.fits) {
          EXPECT_LE(fit.price.density, cap) << planner->name();
        }
      }
    }
  }
}

TEST(PlannerRegistryTest, DenseFitsOnlyCapsItMeets) {
  const std::unique_ptr<AttentionPlanner> dense = MakeDensePlanner(PlainEncoder());
  AttentionCap cap;
  cap.max_density = 0.5;
  EXPECT_FALSE(dense->FitBudget(cap, {}, {100}, kMiniLm).fits);
  cap.max_density = 1;
  EXPECT_TRUE(dense->FitBudget(cap, {}, {100}, kMiniLm).fits);
  // 4·d per pair, every head and layer.
  EXPECT_DOUBLE_EQ(dense->Price({}, {100}, kMiniLm).attention_flops, 4.0 * 32 * 100 * 100 * 12 * 6);
}

TEST(KnobLatticeTest, HalvingStepsAndClosestFit) {
  EXPECT_EQ(HalvingSteps(512, 32, 1024), (std::vector<double>{512, 256, 128, 64, 32, 1024}));
  EXPECT_EQ(HalvingSteps(3, 1, 4), (std::vector<double>{3, 1}));
  EXPECT_EQ(HalvingSteps(0, 0, 8), (std::vector<double>{0}));

  // Price = a·b / 100: the closest fits to (8, 8) under 0.2 are two
  // halvings away (8·2, 2·8 or 4·4), never three (8·1, 2·4).
  const auto price = [](const AttentionKnobValues& k) {
    AttentionPrice p;
    p.density = k.at("a") * k.at("b") / 100;
    return p;
  };
  AttentionCap cap;
  cap.max_density = 0.2;
  const BudgetFit fit =
      FitOnLattice(cap, {{"a", 8}, {"b", 8}},
                   {{"a", HalvingSteps(8, 1, 8)}, {"b", HalvingSteps(8, 1, 8)}}, price);
  EXPECT_TRUE(fit.fits);
  EXPECT_EQ(fit.knobs.at("a") * fit.knobs.at("b"), 16);
  EXPECT_LE(fit.price.density, 0.2);

  cap.max_density = 0.001;
  const BudgetFit floor =
      FitOnLattice(cap, {{"a", 8}, {"b", 8}},
                   {{"a", HalvingSteps(8, 1, 8)}, {"b", HalvingSteps(8, 1, 8)}}, price);
  EXPECT_FALSE(floor.fits);
  EXPECT_EQ(floor.knobs.at("a"), 1);
  EXPECT_EQ(floor.knobs.at("b"), 1);
}

}  // namespace
}  // namespace docsparse
