// SBM attention end to end: on a padded batch with per-item budgets, its
// output equals dense masked attention built with LibTorch from the very
// edges the planner sampled (fp32, max abs error 1e-5), empty rows give
// zeros, padding keys never receive weight, and the reported costs are the
// plan's; a bf16 model's runs the bf16 executor on the same plans.
#include "model/attention/sbm_attention.h"

#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <vector>

#include "kernels/edge_attention_bf16.h"
#include "model/attention/sbm_parameters.h"
#include "model/attention/sbm_planner.h"

namespace docsparse {
namespace {

constexpr int kHeads = 4, kHeadDim = 16, kClusters = 8;

class SbmAttentionTest : public ::testing::Test {
 protected:
  SbmAttentionTest() : parameters_(SbmParameters::Random(2, kHeads, kHeadDim, kClusters, 17)) {
    at::manual_seed(3);
  }

  AttentionInputs MakeInputs(int64_t seq, std::vector<int64_t> lengths, int layer,
                             std::vector<ItemAttentionOptions> options) {
    const int64_t batch = static_cast<int64_t>(lengths.size());
    return AttentionInputs{at::randn({batch, kHeads, seq, kHeadDim}),
                           at::randn({batch, kHeads, seq, kHeadDim}),
                           at::randn({batch, kHeads, seq, kHeadDim}),
                           std::move(lengths),
                           layer,
                           std::move(options)};
  }

  // The plan SbmAttention makes for item b (the planner is a pure function
  // of the inputs and the seed), as a dense [heads, n, n] mask.
  at::Tensor PlanMask(const AttentionInputs& in, int64_t b, std::vector<int64_t>* edges) {
    const int64_t n = in.lengths[b];
    const ItemAttentionOptions options =
        in.item_options.empty() ? ItemAttentionOptions{} : in.item_options[b];
    const SbmMembershipLogits logits = ComputeSbmMembershipLogits(
        parameters_->layer(in.layer), in.query[b].slice(1, 0, n), in.key[b].slice(1, 0, n));
    SbmLayerPlanner planner(logits, parameters_->block_matrix(in.layer));
    planner.Decide({KnobOr(options.knobs, kSbmEdgeRegularizationKnob, 0),
                    KnobOr(options.knobs, kSbmTargetDensityKnob, 0), kSbmMinEdgesPerQuery},
                   SbmLayerKey(options.seed, in.layer));
    at::Tensor mask = at::zeros({kHeads, n, n}, at::kBool);
    for (int h = 0; h < kHeads; ++h) {
      const SbmHeadEdges plan = planner.SampleHead(h);
      edges->push_back(plan.edges());
      for (int64_t i = 0; i < n; ++i) {
        for (int64_t e = plan.row_offsets[i]; e < plan.row_offsets[i + 1]; ++e) {
          mask[h][i][plan.keys[e]] = true;
        }
      }
    }
    return mask;
  }

  std::shared_ptr<const SbmParameters> parameters_;
  c10::InferenceMode inference_mode_;
};

TEST_F(SbmAttentionTest, EqualsDenseMaskedAttentionFromTheSameEdges) {
  // Item 0: a 5% budget (some rows end up empty); item 1: explicit β; item
  // 2: one token; items 1 and 2 are padded.
  ItemAttentionOptions sparse, regularized, single;
  sparse.knobs[kSbmTargetDensityKnob] = 0.05;
  sparse.seed = 11;
  regularized.knobs[kSbmEdgeRegularizationKnob] = 1.5;
  regularized.seed = 12;
  single.seed = 13;
  const AttentionInputs in = MakeInputs(61, {61, 37, 1}, 1, {sparse, regularized, single});
  std::vector<ItemAttentionCost> costs;
  const at::Tensor got = MakeSbmAttention(parameters_)->Forward(in, &costs);
  ASSERT_EQ(costs.size(), 3u);

  int empty_rows = 0;
  for (int64_t b = 0; b < 3; ++b) {
    const int64_t n = in.lengths[b];
    std::vector<int64_t> edges;
    const at::Tensor mask = PlanMask(in, b, &edges);
    EXPECT_EQ(costs[b].head_edges, edges) << "item " << b;
    ASSERT_EQ(costs[b].head_expected_edges.size(), static_cast<size_t>(kHeads));
    EXPECT_GT(costs[b].planner_flops, 0);

    const at::Tensor q = in.query[b].slice(1, 0, n);
    const at::Tensor k = in.key[b].slice(1, 0, n);
    const at::Tensor v = in.value[b].slice(1, 0, n);
    at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(1.0 * kHeadDim);
    scores.masked_fill_(mask.logical_not(), -std::numeric_limits<float>::infinity());
    const at::Tensor has_edge = mask.any(-1, /*keepdim=*/true);
    const at::Tensor weights = at::where(has_edge, at::softmax(scores, -1), at::zeros_like(scores));
    const at::Tensor want = at::matmul(weights, v);
    empty_rows += has_edge.logical_not().sum().item<int>();
    const double error = (got[b].slice(1, 0, n) - want).abs().max().item<double>();
    EXPECT_LE(error, 1e-5) << "item " << b;
    // Padding queries come back as zeros.
    if (n < 61) {
      EXPECT_EQ(got[b].slice(1, n).abs().max().item<float>(), 0.0f);
    }
  }
  EXPECT_GT(empty_rows, 0) << "the 5% item should have rows without edges";
}

TEST_F(SbmAttentionTest, PaddingKeysGetNoWeight) {
  ItemAttentionOptions options;
  options.seed = 5;
  AttentionInputs in = MakeInputs(30, {30, 20}, 0, {options, options});
  std::vector<ItemAttentionCost> costs;
  const auto attention = MakeSbmAttention(parameters_);
  const at::Tensor before = attention->Forward(in, &costs);
  // Garbage in the padding of item 1 changes nothing in its real rows.
  in.key[1].slice(1, 20).fill_(1e3);
  in.value[1].slice(1, 20).fill_(-1e3);
  in.query[1].slice(1, 20).fill_(7);
  const at::Tensor after = attention->Forward(in, &costs);
  EXPECT_TRUE(at::equal(before[1].slice(1, 0, 20), after[1].slice(1, 0, 20)));
}

TEST_F(SbmAttentionTest, SeedsDecideThePlan) {
  ItemAttentionOptions a, b;
  a.seed = 1;
  b.seed = 2;
  const AttentionInputs first = MakeInputs(50, {50, 50}, 0, {a, a});
  const AttentionInputs same{first.query, first.key, first.value, {50, 50}, 0, {a, b}};
  std::vector<ItemAttentionCost> costs;
  const auto attention = MakeSbmAttention(parameters_);
  const at::Tensor x = attention->Forward(first, &costs);
  const at::Tensor y = attention->Forward(same, &costs);
  EXPECT_TRUE(at::equal(x[0], y[0]));
  EXPECT_FALSE(at::equal(x[1], y[1]));
  // Same inputs for both items of `first` and the same seed: same plan, so
  // the item's position in the batch does not matter.
  const AttentionInputs twins{first.query[0].unsqueeze(0).repeat({2, 1, 1, 1}),
                              first.key[0].unsqueeze(0).repeat({2, 1, 1, 1}),
                              first.value[0].unsqueeze(0).repeat({2, 1, 1, 1}),
                              {50, 50},
                              0,
                              {a, a}};
  const at::Tensor z = attention->Forward(twins, &costs);
  EXPECT_TRUE(at::equal(z[0], z[1]));
  EXPECT_EQ(costs[0].head_edges, costs[1].head_edges);
}

TEST_F(SbmAttentionTest, CostsOrderAsBudgets) {
  // Long enough that 1% is above SBM's floor of 4 edges per query (0.8%).
  const int64_t n = 512;
  std::vector<ItemAttentionOptions> options(3);
  const double targets[] = {0.01, 0.05, 0.15};
  for (int i = 0; i < 3; ++i) {
    options[i].knobs[kSbmTargetDensityKnob] = targets[i];
    options[i].seed = 9;
  }
  AttentionInputs in = MakeInputs(n, {n, n, n}, 0, options);
  // The same document under three budgets.
  for (at::Tensor* x : {&in.query, &in.key, &in.value})
    *x = (*x)[0].unsqueeze(0).repeat({3, 1, 1, 1});
  std::vector<ItemAttentionCost> costs;
  MakeSbmAttention(parameters_)->Forward(in, &costs);
  double previous_edges = 0, previous_flops = 0;
  for (int i = 0; i < 3; ++i) {
    double edges = 0, expected = 0;
    for (int h = 0; h < kHeads; ++h) {
      edges += static_cast<double>(costs[i].head_edges[h]);
      expected += costs[i].head_expected_edges[h];
    }
    const double density = edges / (kHeads * n * n);
    EXPECT_NEAR(density / targets[i], 1, 0.1) << "target " << targets[i];
    EXPECT_NEAR(expected / (kHeads * n * n) / targets[i], 1, 0.02);
    // Attention FLOPs as the cost model counts them: the edges dominate the
    // planner's overhead, which itself varies with the solver's steps.
    const double flops = 4.0 * kHeadDim * edges + costs[i].planner_flops;
    EXPECT_GT(costs[i].planner_flops, 0);
    EXPECT_GT(edges, previous_edges);
    EXPECT_GT(flops, previous_flops);
    previous_edges = edges;
    previous_flops = flops;
  }
}

// A bf16 model's SBM attention (the bf16 edge executor reading q, k and v
// where an interleaved [batch, seq, 3, heads, head_dim] projection left
// them) against the fp32 path on the same bf16 values: the same plans, so
// the same reported edges, and outputs that differ by bf16 rounding only;
// zeros for padding rows and for an empty item.
TEST(SbmAttentionBf16Test, Bf16ModelMatchesFp32OnTheSamePlans) {
  constexpr int kDim = 32;  // the bf16 executor takes whole vectors of bf16 pairs
  if (!EdgeAttentionBf16Available(kDim)) GTEST_SKIP() << "no AVX512-BF16 on this CPU";
  c10::InferenceMode inference_mode;
  const auto parameters = SbmParameters::Random(2, kHeads, kDim, kClusters, 23);
  const std::vector<int64_t> lengths = {150, 97, 0, 1};
  const int64_t batch = 4, seq = 150;
  std::vector<ItemAttentionOptions> options(batch);
  for (int64_t b = 0; b < batch; ++b) {
    options[b].seed = 40 + b;
    options[b].knobs[kSbmTargetDensityKnob] = b == 0 ? 0.3 : 0.1;
  }
  at::manual_seed(5);
  const at::Tensor qkv =
      (at::randn({batch, seq, 3, kHeads, kDim}) * 1.5).to(at::kBFloat16).permute({2, 0, 3, 1, 4});
  AttentionInputs bf16{qkv[0], qkv[1], qkv[2], lengths, 1, options, Precision::kBf16};
  AttentionInputs fp32{
      qkv[0].to(at::kFloat), qkv[1].to(at::kFloat), qkv[2].to(at::kFloat), lengths, 1, options,
      Precision::kFp32};
  const auto attention = MakeSbmAttention(parameters);
  std::vector<ItemAttentionCost> got_costs, want_costs;
  const at::Tensor got = attention->Forward(bf16, &got_costs);
  const at::Tensor want = attention->Forward(fp32, &want_costs);
  EXPECT_EQ(got.scalar_type(), at::kBFloat16);
  const at::Tensor error = (got.to(at::kFloat) - want).abs();
  EXPECT_TRUE((error <= want.abs() * 4.5e-3 + 1e-5).all().item<bool>())
      << "worst " << error.max().item<float>();
  for (int64_t b = 0; b < batch; ++b) {
    EXPECT_EQ(got_costs[b].head_edges, want_costs[b].head_edges) << "item " << b;
    EXPECT_EQ(got[b].slice(1, lengths[b]).abs().sum().item<float>(), 0.0f) << "padding of " << b;
  }
  EXPECT_GT(want.abs().max().item<float>(), 0.1f);
}

TEST_F(SbmAttentionTest, ReportsItsKind) {
  EXPECT_EQ(MakeSbmAttention(parameters_)->kind(), AttentionKind::kSbm);
  EXPECT_EQ(AttentionKindName(AttentionKind::kSbm), "sbm");
}

TEST(SbmAttentionHelpersTest, SeedFromRequestIdIsStableAndSpreads) {
  EXPECT_EQ(SbmSeedFromRequestId("req-1"), SbmSeedFromRequestId("req-1"));
  EXPECT_NE(SbmSeedFromRequestId("req-1"), SbmSeedFromRequestId("req-2"));
  EXPECT_NE(SbmSeedFromRequestId(""), 0u);
}

TEST(SbmAttentionHelpersTest, FlopCapMapsToADensityThatFitsIt) {
  const EncoderShape shape{6, 12, 32, 384, 1536};
  const int64_t tokens = 4096;
  const double dense = 6 * DenseAttentionFlops(tokens, shape);
  const double density = SbmTargetDensityForAttentionFlops(0.1 * dense, tokens, shape, 16);
  EXPECT_GT(density, 0.05);
  EXPECT_LT(density, 0.1);
  EXPECT_EQ(SbmTargetDensityForAttentionFlops(1.0, tokens, shape, 16), 0.0);
  EXPECT_EQ(SbmTargetDensityForAttentionFlops(100 * dense, tokens, shape, 16), 1.0);
}

}  // namespace
}  // namespace docsparse
