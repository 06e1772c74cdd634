// The LibTorch dense attention against the kernels/ block-sparse executor
// given one span over each item's real keys: two independent
// implementations of the same masked softmax.
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/block_sparse_attention.h"
#include "model/attention/attention.h"

namespace docsparse {
namespace {

TEST(DenseAttentionTest, MatchesBlockSparseKernelOnPaddedBatch) {
  c10::InferenceMode inference_mode;
  at::manual_seed(7);
  const int64_t batch = 3, heads = 4, seq = 23, head_dim = 16;
  const std::vector<int64_t> lengths = {23, 9, 1};
  AttentionInputs inputs{at::randn({batch, heads, seq, head_dim}),
                         at::randn({batch, heads, seq, head_dim}),
                         at::randn({batch, heads, seq, head_dim}),
                         lengths,
                         0,
                         {}};
  std::vector<ItemAttentionCost> costs;
  const at::Tensor got = MakeDenseAttention()->Forward(inputs, &costs).contiguous();

  // One query block covering all queries, one span over each item's real keys.
  std::vector<int32_t> block_starts = {0, static_cast<int32_t>(seq)};
  std::vector<int32_t> offsets = {0};
  std::vector<KeySpan> spans;
  for (int64_t length : lengths) {
    for (int64_t h = 0; h < heads; ++h) {
      spans.push_back({0, static_cast<int32_t>(length)});
      offsets.push_back(static_cast<int32_t>(spans.size()));
    }
  }
  at::Tensor want = at::empty_like(inputs.query);
  AttentionParams params{inputs.query.data_ptr<float>(), inputs.key.data_ptr<float>(),
                         inputs.value.data_ptr<float>(), want.data_ptr<float>(),
                         static_cast<int32_t>(batch),    static_cast<int32_t>(heads),
                         static_cast<int32_t>(seq),      static_cast<int32_t>(seq),
                         static_cast<int32_t>(head_dim), 1.0f / std::sqrt(16.0f)};
  BlockSparseAttentionCpu(params, {1, block_starts.data(), offsets.data(), spans.data()}, 2);
  for (int64_t b = 0; b < batch; ++b) {
    const at::Tensor real_got = got[b].slice(1, 0, lengths[b]);
    const at::Tensor real_want = want[b].slice(1, 0, lengths[b]);
    EXPECT_LE((real_got - real_want).abs().max().item<double>(), 1e-5) << "item " << b;
  }
  ASSERT_EQ(costs.size(), 3u);
  EXPECT_EQ(costs[1].head_edges, std::vector<int64_t>(heads, 81));
  EXPECT_EQ(costs[2].head_edges, std::vector<int64_t>(heads, 1));
}

TEST(DenseAttentionTest, Bf16ProductsStayWithinBf16RoundingOfFp32) {
  c10::InferenceMode inference_mode;
  at::manual_seed(11);
  const int64_t batch = 2, heads = 3, seq = 37, head_dim = 32;
  AttentionInputs fp32{at::randn({batch, heads, seq, head_dim}),
                       at::randn({batch, heads, seq, head_dim}),
                       at::randn({batch, heads, seq, head_dim}),
                       {37, 20},
                       0,
                       {}};
  AttentionInputs bf16 = fp32;
  bf16.precision = Precision::kBf16;
  std::vector<ItemAttentionCost> costs;
  const at::Tensor want = MakeDenseAttention()->Forward(fp32, &costs);
  const at::Tensor got = MakeDenseAttention()->Forward(bf16, &costs);
  ASSERT_EQ(got.scalar_type(), at::kFloat);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t length = fp32.lengths[b];
    const at::Tensor diff = (got[b] - want[b]).slice(1, 0, length).abs();
    // Inputs and probabilities rounded to 8 mantissa bits: outputs of
    // magnitude ~1 move by a few 2^-8; a wrong mask or scale moves them by ~1.
    EXPECT_LT(diff.max().item<double>(), 0.05) << "item " << b;
    EXPECT_GT(diff.max().item<double>(), 0.0) << "the bf16 path did not run";
  }
}

}  // namespace
}  // namespace docsparse
