// The content patterns (LSH, routing) and unions of plans end to end
// through the planner contract: each planner made by name, its mechanism run
// on a padded batch with a request's knobs and seeds, against masked softmax
// attention in double over the item's lists (which lsh_pattern_test and
// routing_pattern_test hold to the papers' definitions); the edges it
// reports equal to that mask's. A union's mask is the OR of its parts' and
// each shared pair is counted once. Prices: exact for routing, an upper
// bound for LSH and unions.
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <cmath>

#include "model/attention/edge_plan.h"
#include "model/attention/planner_registry.h"
#include "tests/model/attention/masked_reference.h"

namespace docsparse {
namespace {

constexpr int kHeads = 3;
constexpr int kHeadDim = 16;
const EncoderShape kShape{4, kHeads, kHeadDim, kHeads* kHeadDim, 4 * kHeads* kHeadDim};

struct ItemMask {
  int64_t n = 0;
  std::vector<uint8_t> allowed;  // [heads][n][n]
  std::vector<int64_t> edges;    // [heads]
};

// The lists `planner` makes for one item, as a mask.
ItemMask MaskOf(const AttentionPlanner& planner, const AttentionKnobValues& knobs,
                const at::Tensor& query, const at::Tensor& key, int64_t n, int32_t layer,
                uint64_t seed) {
  ItemPlanInput input;
  input.query = query.narrow(1, 0, n).to(at::kFloat).contiguous();
  input.key = key.narrow(1, 0, n).to(at::kFloat).contiguous();
  input.layer = layer;
  input.seed = seed;
  input.knobs = StartingKnobs(planner, knobs);
  const std::unique_ptr<ItemEdgePlan> plan = planner.edge_planner()->PlanItem(input);
  ItemMask mask;
  mask.n = n;
  mask.allowed.assign(static_cast<size_t>(kHeads) * n * n, 0);
  mask.edges.assign(kHeads, 0);
  for (int32_t h = 0; h < kHeads; ++h) {
    const HeadEdgeList list = plan->Head(h);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t e = list.row_offsets[i]; e < list.row_offsets[i + 1]; ++e) {
        uint8_t& entry = mask.allowed[(h * n + i) * n + list.keys[e]];
        EXPECT_EQ(entry, 0) << "head " << h << " row " << i << " lists key " << list.keys[e]
                            << " twice";
        entry = 1;
        ++mask.edges[h];
      }
    }
  }
  return mask;
}

struct ContentCase {
  AttentionKind kind;
  AttentionKnobValues knobs;
};

class ContentAttentionTest : public ::testing::Test {
 protected:
  c10::InferenceMode inference_mode_;
};

TEST_F(ContentAttentionTest, PaddedBatchMatchesMaskedAttentionOverItsLists) {
  const std::vector<int64_t> lengths = {37, 61, 1, 50};
  const int64_t seq = 61;
  const int32_t layer = 1;
  PlannerSource source;
  source.shape = kShape;
  for (const ContentCase& c : std::vector<ContentCase>{
           {AttentionKind::kLsh, {{"buckets", 4}, {"chunk", 7}, {"rounds", 2}}},
           {AttentionKind::kRouting, {{"clusters", 5}, {"iterations", 2}}},
           {AttentionKind::kUnion, {{"longformer.window", 4}, {"lsh.chunk", 6}}},
       }) {
    SCOPED_TRACE(std::string(AttentionKindName(c.kind)));
    absl::StatusOr<std::unique_ptr<AttentionPlanner>> planner =
        MakeAttentionPlanner(c.kind, source);
    ASSERT_TRUE(planner.ok()) << planner.status();
    ASSERT_TRUE(CheckRequestKnobs(**planner, c.knobs, "budget.knobs.").ok());
    const std::unique_ptr<AttentionMechanism> mechanism = (*planner)->MakeMechanism();
    EXPECT_EQ(mechanism->kind(), c.kind);

    at::manual_seed(11);
    const AttentionInputs in =
        testing::RandomPaddedBatch(lengths, kHeads, seq, kHeadDim, at::kFloat, layer, c.knobs, 500);
    std::vector<ItemAttentionCost> costs;
    const at::Tensor got = mechanism->Forward(in, &costs).to(at::kDouble);
    ASSERT_EQ(costs.size(), lengths.size());
    for (size_t b = 0; b < lengths.size(); ++b) {
      const int64_t n = lengths[b];
      const ItemMask mask = MaskOf(**planner, c.knobs, in.query[b], in.key[b], n, layer, 500 + b);
      const at::Tensor want =
          testing::MaskedAttentionReference(in.query[b], in.key[b], in.value[b], mask.allowed, n);
      EXPECT_LE((got[b].slice(1, 0, n) - want).abs().max().item<double>(), 1e-5) << "item " << b;
      if (n < seq) {
        EXPECT_EQ(got[b].slice(1, n).abs().max().item<double>(), 0) << "item " << b;
      }
      EXPECT_EQ(costs[b].head_edges, mask.edges) << "item " << b;
      EXPECT_GT(costs[b].planner_flops, 0) << "hashing or clustering is work";
      // The price before the input: exact for routing, at least what ran
      // for the others.
      const AttentionPrice price =
          (*planner)->Price(c.knobs, {n}, EncoderShape{1, kHeads, kHeadDim, 0, 0});
      int64_t ran = 0;
      for (int64_t e : mask.edges) ran += e;
      if (c.kind == AttentionKind::kRouting) {
        EXPECT_DOUBLE_EQ(price.edges, static_cast<double>(ran)) << "item " << b;
      } else {
        EXPECT_GE(price.edges, static_cast<double>(ran)) << "item " << b;
      }
    }
  }
}

TEST_F(ContentAttentionTest, UnionIsTheOrOfItsPartsCountedOnce) {
  PlannerSource source;
  source.shape = kShape;
  source.union_parts = {AttentionKind::kLongformer, AttentionKind::kBigBird, AttentionKind::kLsh};
  absl::StatusOr<std::unique_ptr<AttentionPlanner>> union_planner =
      MakeAttentionPlanner(AttentionKind::kUnion, source);
  ASSERT_TRUE(union_planner.ok()) << union_planner.status();
  EXPECT_EQ((*union_planner)->Variant(), "longformer+bigbird+lsh");
  const AttentionKnobValues knobs = {{"longformer.window", 6},  {"longformer.global_tokens", 1},
                                     {"bigbird.block_size", 4}, {"bigbird.random_blocks", 2},
                                     {"lsh.buckets", 4},        {"lsh.chunk", 5}};
  ASSERT_TRUE(CheckRequestKnobs(**union_planner, knobs, "budget.knobs.").ok());
  const std::map<std::string, AttentionKnobValues> part_knobs = {
      {"longformer", {{"window", 6}, {"global_tokens", 1}}},
      {"bigbird", {{"block_size", 4}, {"random_blocks", 2}}},
      {"lsh", {{"buckets", 4}, {"chunk", 5}}}};

  at::manual_seed(3);
  const int64_t n = 45;
  const at::Tensor query = at::randn({kHeads, n, kHeadDim});
  const at::Tensor key = at::randn({kHeads, n, kHeadDim});
  const ItemMask merged = MaskOf(**union_planner, knobs, query, key, n, 2, 77);
  std::vector<uint8_t> either(merged.allowed.size(), 0);
  int64_t part_edges = 0;
  for (const auto& [name, part] : part_knobs) {
    absl::StatusOr<std::unique_ptr<AttentionPlanner>> planner =
        MakeAttentionPlanner(*AttentionKindNamed(name), source);
    ASSERT_TRUE(planner.ok()) << planner.status();
    const ItemMask mask = MaskOf(**planner, part, query, key, n, 2, 77);
    for (size_t e = 0; e < either.size(); ++e) either[e] |= mask.allowed[e];
    for (int64_t edges : mask.edges) part_edges += edges;
  }
  EXPECT_EQ(merged.allowed, either);
  int64_t union_edges = 0;
  for (int64_t edges : merged.edges) union_edges += edges;
  EXPECT_LT(union_edges, part_edges) << "the parts share pairs (bands and global tokens)";
}

TEST_F(ContentAttentionTest, UnionKnobsAreItsPartsPrefixed) {
  PlannerSource source;
  source.shape = kShape;
  source.union_parts = {AttentionKind::kStar, AttentionKind::kRouting};
  source.configured_knobs = {{"routing.clusters", 8}};
  absl::StatusOr<std::unique_ptr<AttentionPlanner>> planner =
      MakeAttentionPlanner(AttentionKind::kUnion, source);
  ASSERT_TRUE(planner.ok()) << planner.status();
  const std::map<std::string, KnobRange> knobs = (*planner)->Knobs();
  EXPECT_EQ(knobs.count("star.radius"), 1u);
  EXPECT_EQ(knobs.count("routing.iterations"), 1u);
  EXPECT_EQ(knobs.at("routing.clusters").native, 8);
  const absl::Status unknown = CheckRequestKnobs(**planner, {{"window", 4}}, "budget.knobs.");
  EXPECT_EQ(unknown.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(unknown.message().find("budget.knobs.window"), std::string::npos) << unknown;

  source.union_parts = {AttentionKind::kLongformer, AttentionKind::kLsg};
  EXPECT_FALSE(MakeAttentionPlanner(AttentionKind::kUnion, source).ok());
}

TEST_F(ContentAttentionTest, UnionFitsACapByItsParts) {
  PlannerSource source;
  source.shape = kShape;
  source.union_parts = {AttentionKind::kLongformer, AttentionKind::kRouting};
  absl::StatusOr<std::unique_ptr<AttentionPlanner>> planner =
      MakeAttentionPlanner(AttentionKind::kUnion, source);
  ASSERT_TRUE(planner.ok()) << planner.status();
  AttentionCap cap;
  cap.max_density = 0.1;
  const BudgetFit fit = (*planner)->FitBudget(cap, StartingKnobs(**planner, {}), {4096}, kShape);
  EXPECT_TRUE(fit.fits);
  EXPECT_LE(fit.price.density, 0.1);
  EXPECT_GT(fit.price.density, 0.05) << "the cap is used, not wasted";
  EXPECT_LT(fit.knobs.at("longformer.window"), 512);
  EXPECT_GE(fit.knobs.at("routing.clusters"), 16);
}

TEST_F(ContentAttentionTest, LshAndRoutingKnobsAreChecked) {
  PlannerSource source;
  source.shape = kShape;
  absl::StatusOr<std::unique_ptr<AttentionPlanner>> lsh =
      MakeAttentionPlanner(AttentionKind::kLsh, source);
  ASSERT_TRUE(lsh.ok());
  const absl::Status odd = CheckRequestKnobs(**lsh, {{"buckets", 7}}, "budget.knobs.");
  EXPECT_EQ(odd.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(odd.message().find("buckets"), std::string::npos) << odd;
  absl::StatusOr<std::unique_ptr<AttentionPlanner>> routing =
      MakeAttentionPlanner(AttentionKind::kRouting, source);
  ASSERT_TRUE(routing.ok());
  EXPECT_FALSE(CheckRequestKnobs(**routing, {{"clusters", 0}}, "budget.knobs.").ok());
}

}  // namespace
}  // namespace docsparse
