// The mechanisms whose plans are lists of pairs (SBM, with and without its
// inclusion correction; LSH, routing, a union) on CUDA tensors: planned on
// the host from fp32 copies of q and k, attended by the CUDA edge executor on
// the device, against the same mechanism on the CPU on a padded batch with an
// empty item. The plans are the same on both sides (the planners see the same
// fp32 values and seeds), so fp32 agrees to summation order and bf16 to bf16
// rounding. Built only with a CUDA LibTorch (scripts/build --cuda).
#include <ATen/ATen.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <memory>
#include <string>
#include <vector>

#include "model/attention/planner_registry.h"
#include "model/attention/sbm_attention.h"
#include "model/attention/sbm_parameters.h"

namespace docsparse {
namespace {

constexpr int64_t kHeads = 4, kHeadDim = 64, kSeq = 301;

struct Outcome {
  at::Tensor context;  // on the host, fp32
  std::vector<ItemAttentionCost> costs;
};

Outcome Forward(const AttentionMechanism& mechanism, const at::Tensor& q, const at::Tensor& k,
                const at::Tensor& v, const std::vector<int64_t>& lengths,
                const AttentionKnobValues& knobs) {
  AttentionInputs in;
  in.query = q;
  in.key = k;
  in.value = v;
  in.lengths = lengths;
  in.layer = 1;
  for (size_t b = 0; b < lengths.size(); ++b) {
    ItemAttentionOptions options;
    options.knobs = knobs;
    options.seed = 40 + b;
    in.item_options.push_back(options);
  }
  Outcome run;
  run.context = mechanism.Forward(in, &run.costs).to(at::kCPU, at::kFloat);
  return run;
}

struct Case {
  std::string name;
  std::unique_ptr<AttentionMechanism> mechanism;
  AttentionKnobValues knobs;
};

std::vector<Case> Cases() {
  std::vector<Case> cases;
  const auto sbm = SbmParameters::Random(2, kHeads, kHeadDim, 8, 17);
  cases.push_back({"sbm", MakeSbmAttention(sbm, {}), {{kSbmTargetDensityKnob, 0.1}}});
  cases.push_back({"sbm corrected",
                   MakeSbmAttention(sbm, {}),
                   {{kSbmTargetDensityKnob, 0.1}, {kSbmInclusionCorrectionKnob, 1}}});
  PlannerSource source;
  source.shape = EncoderShape{2, kHeads, kHeadDim, kHeads * kHeadDim, 4 * kHeads * kHeadDim};
  for (const auto& [kind, knobs] : std::vector<std::pair<AttentionKind, AttentionKnobValues>>{
           {AttentionKind::kLsh, {{"buckets", 4}, {"chunk", 7}, {"rounds", 2}}},
           {AttentionKind::kRouting, {{"clusters", 5}, {"iterations", 2}}},
           {AttentionKind::kUnion, {{"longformer.window", 4}, {"lsh.chunk", 6}}}}) {
    absl::StatusOr<std::unique_ptr<AttentionPlanner>> planner = MakeAttentionPlanner(kind, source);
    EXPECT_TRUE(planner.ok()) << planner.status();
    if (!planner.ok()) continue;
    cases.push_back({std::string(AttentionKindName(kind)), (*planner)->MakeMechanism(), knobs});
  }
  return cases;
}

TEST(EdgeAttentionDeviceTest, EveryEdgePlannerMatchesTheCpuOnAPaddedBatch) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const c10::InferenceMode inference_mode;
  at::manual_seed(7);
  const at::Tensor q = at::randn({3, kHeads, kSeq, kHeadDim});
  const at::Tensor k = at::randn({3, kHeads, kSeq, kHeadDim});
  const at::Tensor v = at::randn({3, kHeads, kSeq, kHeadDim});
  const std::vector<int64_t> lengths = {kSeq, 173, 0};
  for (const Case& c : Cases()) {
    SCOPED_TRACE(c.name);
    const Outcome want = Forward(*c.mechanism, q, k, v, lengths, c.knobs);
    const Outcome got = Forward(*c.mechanism, q.cuda(), k.cuda(), v.cuda(), lengths, c.knobs);
    // Every row, padding and the empty item included (zeros on both sides).
    EXPECT_LE((got.context - want.context).abs().max().item<double>(), 1e-4);
    ASSERT_EQ(got.costs.size(), want.costs.size());
    for (size_t b = 0; b < want.costs.size(); ++b) {
      EXPECT_EQ(got.costs[b].head_edges, want.costs[b].head_edges) << "item " << b;
    }
    EXPECT_GT(want.costs[0].head_edges[0], 0);
    // bf16 operands: the same plans (the planners see the same bf16 values in
    // fp32), bf16 products on the device against fp32 on the CPU.
    const at::Tensor q16 = q.to(at::kBFloat16), k16 = k.to(at::kBFloat16),
                     v16 = v.to(at::kBFloat16);
    const Outcome want16 = Forward(*c.mechanism, q16, k16, v16, lengths, c.knobs);
    const Outcome got16 =
        Forward(*c.mechanism, q16.cuda(), k16.cuda(), v16.cuda(), lengths, c.knobs);
    EXPECT_LE((got16.context - want16.context).abs().max().item<double>(), 3e-2);
  }
}

}  // namespace
}  // namespace docsparse
