// The position patterns end to end through the planner contract: each
// planner made by name, its mechanism run on a padded batch with a request's
// knobs and seeds, against masked softmax attention in double over the
// pattern's own plan (whose masks pattern tests hold to the papers'
// definitions), in fp32 and in bf16; the edges it reports, and its price,
// equal to that mask's.
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>

#include "kernels/bf16_attention_executor.h"
#include "model/attention/bigbird_pattern.h"
#include "model/attention/etc_pattern.h"
#include "model/attention/longformer_pattern.h"
#include "model/attention/pattern_mask_map.h"
#include "model/attention/planner_registry.h"
#include "model/attention/sparse_transformer_pattern.h"
#include "model/attention/star_pattern.h"
#include "tests/model/attention/masked_reference.h"
#include "tests/model/attention/pattern_mask.h"

namespace docsparse {
namespace {

using testing::ExpandPatternPlan;
using testing::PatternMask;

constexpr int kHeads = 3;
constexpr int kHeadDim = 16;
const EncoderShape kShape{4, kHeads, kHeadDim, kHeads* kHeadDim, 4 * kHeads* kHeadDim};

struct PatternCase {
  AttentionKind kind;
  AttentionKnobValues knobs;
  // The pattern's plan for these knobs, straight from its plan function.
  std::function<PatternPlan(int32_t length, uint64_t seed, int32_t layer)> plan;
};

std::vector<PatternCase> Cases() {
  return {
      {AttentionKind::kLongformer,
       {{"window", 8}, {"dilation", 3}, {"dilated_heads", 1}, {"global_tokens", 2}},
       [](int32_t n, uint64_t, int32_t) {
         return PlanLongformer({8, 3, 1, 2}, n, kHeads);
       }},
      {AttentionKind::kBigBird,
       {{"block_size", 5}, {"window_blocks", 3}, {"global_blocks", 1}, {"random_blocks", 2}},
       [](int32_t n, uint64_t seed, int32_t layer) {
         return PlanBigBird({5, 3, 1, 2}, n, kHeads, seed, layer);
       }},
      {AttentionKind::kSparseTransformer,
       {{"stride", 6}, {"summary", 2}, {"fixed_heads", 1}},
       [](int32_t n, uint64_t, int32_t) {
         return PlanSparseTransformer({6, 2, 1}, n, kHeads);
       }},
      {AttentionKind::kStar,
       {{"radius", 2}, {"relay_tokens", 1}},
       [](int32_t n, uint64_t, int32_t) {
         return PlanStar({2, 1}, n, kHeads);
       }},
      {AttentionKind::kEtc,
       {{"global_tokens", 2}, {"radius", 3}, {"hard_g2l", 1}},
       [](int32_t n, uint64_t, int32_t) {
         return PlanEtc({2, 3, true}, n, kHeads);
       }},
  };
}

// softmax(q·kᵀ/√d)·v over each query's allowed keys, in double.
at::Tensor MaskedReference(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                           const PatternMask& mask) {
  return testing::MaskedAttentionReference(q, k, v, mask.allowed, mask.length);
}

class PatternAttentionTest : public ::testing::TestWithParam<Precision> {
 protected:
  c10::InferenceMode inference_mode_;
};

TEST_P(PatternAttentionTest, PaddedBatchMatchesMaskedAttentionOverThePatternsPlan) {
  const Precision precision = GetParam();
  if (precision == Precision::kBf16 && ChooseBf16AttentionExecutor(kHeadDim) == nullptr) {
    GTEST_SKIP() << "no AMX or AVX512-BF16 on this CPU: bf16 runs the fp32 path";
  }
  const std::vector<int64_t> lengths = {37, 61, 1, 50};
  const int64_t seq = 61;
  const int32_t layer = 2;
  PlannerSource source;
  source.shape = kShape;
  for (const PatternCase& c : Cases()) {
    SCOPED_TRACE(std::string(AttentionKindName(c.kind)));
    absl::StatusOr<std::unique_ptr<AttentionPlanner>> planner =
        MakeAttentionPlanner(c.kind, source);
    ASSERT_TRUE(planner.ok()) << planner.status();
    ASSERT_TRUE(CheckRequestKnobs(**planner, c.knobs, "budget.knobs.").ok());
    const std::unique_ptr<AttentionMechanism> mechanism = (*planner)->MakeMechanism();
    EXPECT_EQ(mechanism->kind(), c.kind);

    at::manual_seed(7);
    const at::ScalarType type = precision == Precision::kBf16 ? at::kBFloat16 : at::kFloat;
    AttentionInputs in =
        testing::RandomPaddedBatch(lengths, kHeads, seq, kHeadDim, type, layer, c.knobs, 100);
    in.precision = precision;
    std::vector<ItemAttentionCost> costs;
    const at::Tensor got = mechanism->Forward(in, &costs).to(at::kDouble);
    ASSERT_EQ(costs.size(), lengths.size());
    for (size_t b = 0; b < lengths.size(); ++b) {
      const int32_t n = static_cast<int32_t>(lengths[b]);
      const PatternMask mask = ExpandPatternPlan(c.plan(n, 100 + b, layer));
      ASSERT_TRUE(mask.faults.empty()) << mask.faults.front();
      const at::Tensor want = MaskedReference(in.query[b], in.key[b], in.value[b], mask);
      const double error = (got[b].slice(1, 0, n) - want).abs().max().item<double>();
      EXPECT_LE(error, precision == Precision::kBf16 ? 3e-2 : 1e-5) << "item " << b;
      if (n < seq) {
        EXPECT_EQ(got[b].slice(1, n).abs().max().item<double>(), 0) << "padding rows of " << b;
      }
      EXPECT_EQ(costs[b].head_edges, mask.edges) << "item " << b;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Precisions, PatternAttentionTest,
                         ::testing::Values(Precision::kFp32, Precision::kBf16),
                         [](const auto& info) { return std::string(PrecisionName(info.param)); });

// ModernBERT's scheme against its definition, layer by layer: the
// schedule's full layers (every third from 0 by default, or the
// checkpoint's list) attend to every real token with the ordinary
// projections, the others to |i - j| <= window/2; full_layers 0 puts the
// window on every layer.
TEST(PatternPlannerTest, ModernBertScheduleMatchesItsDefinitionPerLayer) {
  c10::InferenceMode inference_mode;
  const std::vector<int64_t> lengths = {37, 61, 1, 50};
  const int64_t seq = 61;
  const int64_t window = 6;
  for (const std::vector<bool>& schedule :
       {std::vector<bool>{}, std::vector<bool>{false, true, true, false}}) {
    PlannerSource source;
    source.shape = kShape;
    source.full_attention_layers = schedule;
    absl::StatusOr<std::unique_ptr<AttentionPlanner>> planner =
        MakeAttentionPlanner(AttentionKind::kModernBert, source);
    ASSERT_TRUE(planner.ok()) << planner.status();
    const std::unique_ptr<AttentionMechanism> mechanism = (*planner)->MakeMechanism();
    for (int full_layers : {1, 0}) {
      for (int32_t layer = 0; layer < 4; ++layer) {
        SCOPED_TRACE(::testing::Message() << "schedule " << schedule.size() << " full_layers "
                                          << full_layers << " layer " << layer);
        const bool dense =
            full_layers == 1 && (schedule.empty() ? layer % 3 == 0 : bool(schedule[layer]));
        at::manual_seed(layer);
        AttentionInputs in;
        in.query = at::randn({4, kHeads, seq, kHeadDim});
        in.key = at::randn({4, kHeads, seq, kHeadDim});
        in.value = at::randn({4, kHeads, seq, kHeadDim});
        in.lengths = lengths;
        in.layer = layer;
        // Its full layers are not global rows in Longformer's sense: a
        // checkpoint's global projections (a Longformer served with this
        // pattern) must not replace them.
        in.global_projections = [](int64_t) {
          ADD_FAILURE() << "modernbert asked for global projections";
          return ProjectedHeads{};
        };
        ItemAttentionOptions options;
        options.knobs = {{"window", window}, {"full_layers", full_layers}};
        in.item_options.assign(lengths.size(), options);
        std::vector<ItemAttentionCost> costs;
        const at::Tensor got = mechanism->Forward(in, &costs).to(at::kDouble);
        for (size_t b = 0; b < lengths.size(); ++b) {
          const int32_t n = static_cast<int32_t>(lengths[b]);
          PatternMask mask;
          mask.length = n;
          mask.heads = kHeads;
          mask.allowed.assign(static_cast<size_t>(kHeads) * n * n, 0);
          mask.edges.assign(kHeads, 0);
          for (int h = 0; h < kHeads; ++h) {
            for (int32_t i = 0; i < n; ++i) {
              for (int32_t j = 0; j < n; ++j) {
                const bool on = dense || std::abs(i - j) <= window / 2;
                mask.allowed[(static_cast<size_t>(h) * n + i) * n + j] = on;
                mask.edges[h] += on;
              }
            }
          }
          const at::Tensor want = MaskedReference(in.query[b], in.key[b], in.value[b], mask);
          EXPECT_LE((got[b].slice(1, 0, n) - want).abs().max().item<double>(), 1e-5)
              << "item " << b;
          EXPECT_EQ(costs[b].head_edges, mask.edges) << "item " << b;
        }
      }
    }
  }
}

TEST(PatternPlannerTest, PriceIsTheEdgesOfThePlanItRuns) {
  PlannerSource source;
  source.shape = kShape;
  for (const PatternCase& c : Cases()) {
    SCOPED_TRACE(std::string(AttentionKindName(c.kind)));
    const std::unique_ptr<AttentionPlanner> planner = *MakeAttentionPlanner(c.kind, source);
    for (int32_t n : {1, 40, 333}) {
      const PatternMask mask = ExpandPatternPlan(c.plan(n, 0, 0));
      int64_t edges = 0;
      for (int64_t e : mask.edges) edges += e;
      const AttentionPrice price = planner->Price(c.knobs, {n}, kShape);
      EXPECT_DOUBLE_EQ(price.density, static_cast<double>(edges) / (1.0 * n * n * kHeads)) << n;
      EXPECT_DOUBLE_EQ(price.attention_flops, 4.0 * kHeadDim * edges * kShape.num_layers) << n;
    }
  }
}

TEST(PatternPlannerTest, BudgetsMoveTheKnobsAlongTheLatticeAndReportTheFloor) {
  PlannerSource source;
  source.shape = EncoderShape{6, 12, 32, 384, 1536};
  for (AttentionKind kind : {AttentionKind::kLongformer, AttentionKind::kBigBird,
                             AttentionKind::kSparseTransformer, AttentionKind::kStar}) {
    SCOPED_TRACE(std::string(AttentionKindName(kind)));
    const std::unique_ptr<AttentionPlanner> planner = *MakeAttentionPlanner(kind, source);
    const std::vector<int64_t> tokens = {4096};
    const AttentionKnobValues start = StartingKnobs(*planner, {});
    const AttentionPrice native = planner->Price(start, tokens, source.shape);
    AttentionCap half;
    half.max_density = native.density / 2;
    const BudgetFit fit = planner->FitBudget(half, start, tokens, source.shape);
    if (fit.fits) {
      EXPECT_LE(fit.price.density, native.density / 2);
      EXPECT_NE(fit.knobs, start);
    } else {
      // The floor is the cheapest point of the lattice, over the cap.
      EXPECT_GT(fit.price.density, native.density / 2);
      EXPECT_LE(fit.price.density, native.density);
      EXPECT_FALSE(planner->FloorDescription().empty());
    }
    EXPECT_TRUE(planner->ValidateKnobs(fit.knobs).ok());
  }
}

TEST(PatternPlannerTest, KnobsThePatternCannotTakeAreRefusedByName) {
  PlannerSource source;
  source.shape = kShape;
  const auto longformer = *MakeAttentionPlanner(AttentionKind::kLongformer, source);
  const absl::Status odd = CheckRequestKnobs(*longformer, {{"window", 7}}, "budget.knobs.");
  EXPECT_NE(odd.message().find("window: 7 must be even"), std::string::npos) << odd;
  const absl::Status heads =
      CheckRequestKnobs(*longformer, {{"dilated_heads", kHeads + 1}}, "budget.knobs.");
  EXPECT_NE(heads.message().find("budget.knobs.dilated_heads"), std::string::npos) << heads;
  const auto bigbird = *MakeAttentionPlanner(AttentionKind::kBigBird, source);
  EXPECT_FALSE(CheckRequestKnobs(*bigbird, {{"window_blocks", 2}}, "budget.knobs.").ok());
  const auto strided = *MakeAttentionPlanner(AttentionKind::kSparseTransformer, source);
  EXPECT_FALSE(CheckRequestKnobs(*strided, {{"stride", 4}, {"summary", 5}}, "budget.knobs.").ok());
}

// The mask map from the plans equals the one counted from the expanded
// masks, for windows whose lengths do not divide into the grid (the bucket
// edges come from integer division).
TEST(PatternPlannerTest, MaskMapCountsThePlansPairs) {
  const std::vector<int64_t> windows = {97, 61};
  const int resolution = 13;
  for (const PatternCase& c : Cases()) {
    SCOPED_TRACE(std::string(AttentionKindName(c.kind)));
    std::vector<PatternPlan> plans;
    for (int64_t n : windows) plans.push_back(c.plan(static_cast<int32_t>(n), 0, 0));
    int cells = 0;
    const std::vector<float> map = PatternMaskMap(plans, resolution, &cells);
    ASSERT_EQ(cells, resolution);
    const int64_t total = 97 + 61;
    const auto bucket = [&](int64_t p) {
      int b = 0;
      while (b + 1 < cells && (b + 1) * total / cells <= p) ++b;
      return b;
    };
    std::vector<double> pairs(cells * cells, 0);
    int64_t offset = 0;
    for (const PatternPlan& plan : plans) {
      const PatternMask mask = ExpandPatternPlan(plan);
      ASSERT_TRUE(mask.faults.empty()) << mask.faults.front();
      for (int h = 0; h < mask.heads; ++h) {
        for (int q = 0; q < mask.length; ++q) {
          for (int k = 0; k < mask.length; ++k) {
            if (mask.At(h, q, k)) pairs[bucket(offset + q) * cells + bucket(offset + k)] += 1;
          }
        }
      }
      offset += plan.length;
    }
    for (int i = 0; i < cells; ++i) {
      for (int j = 0; j < cells; ++j) {
        const double rows = (i + 1) * total / cells - i * total / cells;
        const double cols = (j + 1) * total / cells - j * total / cells;
        EXPECT_NEAR(map[i * cells + j], pairs[i * cells + j] / (rows * cols * kHeads), 1e-6)
            << i << " " << j;
      }
    }
  }
}

}  // namespace
}  // namespace docsparse
