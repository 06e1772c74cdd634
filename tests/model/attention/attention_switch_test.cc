// Per-request attention kinds in one batch: each item's output and cost are
// what its mechanism gives it alone, whatever else is in the batch.
#include "model/attention/attention_switch.h"

#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include "model/attention/sbm_attention.h"
#include "model/attention/sbm_parameters.h"

namespace docsparse {
namespace {

constexpr int kHeads = 2, kHeadDim = 8;

std::unique_ptr<AttentionMechanism> MakeSwitch() {
  std::map<AttentionKind, std::unique_ptr<AttentionMechanism>> alternatives;
  alternatives[AttentionKind::kDense] = MakeDenseAttention();
  return MakeSwitchingAttention(MakeSbmAttention(SbmParameters::Random(1, kHeads, kHeadDim, 4, 5)),
                                std::move(alternatives));
}

AttentionInputs Slice(const AttentionInputs& in, int64_t b) {
  const int64_t n = in.lengths[b];
  auto take = [&](const at::Tensor& t) { return t.narrow(0, b, 1).narrow(2, 0, n).contiguous(); };
  return {take(in.query), take(in.key), take(in.value), {n}, in.layer, {in.item_options[b]}};
}

TEST(AttentionSwitchTest, MixedBatchEqualsEachItemAlone) {
  c10::InferenceMode inference;
  at::manual_seed(11);
  const std::unique_ptr<AttentionMechanism> mechanism = MakeSwitch();
  EXPECT_EQ(mechanism->kind(), AttentionKind::kSbm);
  EXPECT_EQ(AvailableAttentionKinds(*mechanism),
            (std::vector<AttentionKind>{AttentionKind::kSbm, AttentionKind::kDense}));

  std::vector<ItemAttentionOptions> options(4);
  options[0].seed = 3;                      // native (SBM)
  options[1].kind = AttentionKind::kDense;  // override
  options[2].kind = AttentionKind::kSbm;    // the native kind, named
  options[2].seed = 4;
  options[3].kind = AttentionKind::kDense;
  const std::vector<int64_t> lengths = {20, 33, 7, 12};
  AttentionInputs in{at::randn({4, kHeads, 33, kHeadDim}),
                     at::randn({4, kHeads, 33, kHeadDim}),
                     at::randn({4, kHeads, 33, kHeadDim}),
                     lengths,
                     0,
                     options};
  std::vector<ItemAttentionCost> costs;
  const at::Tensor context = mechanism->Forward(in, &costs);
  ASSERT_EQ(costs.size(), 4u);

  const std::unique_ptr<AttentionMechanism> dense = MakeDenseAttention();
  for (int64_t b = 0; b < 4; ++b) {
    const AttentionInputs alone = Slice(in, b);
    std::vector<ItemAttentionCost> alone_costs;
    const bool wants_dense = options[b].kind == AttentionKind::kDense;
    const at::Tensor expected =
        wants_dense ? dense->Forward(alone, &alone_costs) : mechanism->Forward(alone, &alone_costs);
    const int64_t n = lengths[b];
    EXPECT_LT((context[b].narrow(1, 0, n) - expected[0]).abs().max().item<float>(), 1e-5) << b;
    EXPECT_EQ(costs[b].head_edges, alone_costs[0].head_edges) << b;
    if (wants_dense) {
      EXPECT_EQ(costs[b].head_edges[0], n * n) << b;
    }
  }
}

TEST(AttentionSwitchTest, AMechanismAloneOffersItsOwnKind) {
  EXPECT_EQ(AvailableAttentionKinds(*MakeDenseAttention()),
            std::vector<AttentionKind>{AttentionKind::kDense});
}

}  // namespace
}  // namespace docsparse
