// Dense attention, on whichever executor this CPU gets (block-sparse
// kernels with one span per query block, or BLAS), against LibTorch's own
// products and softmax in double.
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <cmath>

#include "kernels/cpu_features.h"
#include "model/attention/attention.h"

namespace docsparse {
namespace {

// softmax(q·kᵀ/√d)·v over each item's real keys, in double with LibTorch's
// own products and softmax: independent of the executors dense runs on.
at::Tensor Reference(const AttentionInputs& in) {
  std::vector<at::Tensor> items;
  for (int64_t b = 0; b < in.query.size(0); ++b) {
    const int64_t length = in.lengths[b];
    const at::Tensor q = in.query[b].to(at::kDouble);
    const at::Tensor k = in.key[b].to(at::kDouble).slice(1, 0, length);
    const at::Tensor v = in.value[b].to(at::kDouble).slice(1, 0, length);
    const at::Tensor scores = at::matmul(q, k.transpose(-1, -2)) / std::sqrt(q.size(-1) * 1.0);
    items.push_back(at::matmul(at::softmax(scores, -1), v));
  }
  return at::stack(items);
}

void ExpectRealRowsWithin(const at::Tensor& got, const at::Tensor& want,
                          const std::vector<int64_t>& lengths, double tolerance) {
  for (size_t b = 0; b < lengths.size(); ++b) {
    const at::Tensor diff = (got[b].to(at::kDouble) - want[b]).slice(1, 0, lengths[b]).abs().max();
    EXPECT_LE(diff.item<double>(), tolerance) << "item " << b;
  }
}

TEST(DenseAttentionTest, MatchesDoubleReferenceOnPaddedBatch) {
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
  const at::Tensor got = MakeDenseAttention()->Forward(inputs, &costs);
  ExpectRealRowsWithin(got, Reference(inputs), lengths, 1e-5);
  ASSERT_EQ(costs.size(), 3u);
  EXPECT_EQ(costs[1].head_edges, std::vector<int64_t>(heads, 81));
  EXPECT_EQ(costs[2].head_edges, std::vector<int64_t>(heads, 1));
}

// The encoder hands over views of its projection, [batch, seq, 3, heads,
// head_dim] permuted; blocks of queries past 64 and 128 rows exercise the
// executors' query blocks, and item 1's padding covers whole blocks.
TEST(DenseAttentionTest, ReadsInterleavedProjectionViewsInBothPrecisions) {
  c10::InferenceMode inference_mode;
  at::manual_seed(9);
  const int64_t batch = 2, heads = 3, seq = 300, head_dim = 32;
  const std::vector<int64_t> lengths = {300, 70};
  const at::Tensor projection =
      at::randn({batch, seq, 3, heads, head_dim}).permute({2, 0, 3, 1, 4});
  AttentionInputs fp32{projection[0], projection[1], projection[2], lengths, 0, {}};
  ASSERT_FALSE(fp32.query.is_contiguous());
  const at::Tensor want = Reference(fp32);
  std::vector<ItemAttentionCost> costs;
  ExpectRealRowsWithin(MakeDenseAttention()->Forward(fp32, &costs), want, lengths, 1e-5);

  const at::Tensor projection16 = projection.to(at::kBFloat16);
  AttentionInputs bf16{projection16[0], projection16[1], projection16[2], lengths, 0, {},
                       Precision::kBf16};
  // Inputs, probabilities and outputs rounded to 8 mantissa bits.
  ExpectRealRowsWithin(MakeDenseAttention()->Forward(bf16, &costs), want, lengths, 0.05);
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
  const at::Tensor got = MakeDenseAttention()->Forward(bf16, &costs).to(at::kFloat);
  for (int64_t b = 0; b < batch; ++b) {
    const int64_t length = fp32.lengths[b];
    const at::Tensor diff = (got[b] - want[b]).slice(1, 0, length).abs();
    // Inputs and probabilities rounded to 8 mantissa bits: outputs of
    // magnitude ~1 move by a few 2^-8; a wrong mask or scale moves them by ~1.
    EXPECT_LT(diff.max().item<double>(), 0.05) << "item " << b;
    if (HasNativeBf16(HostCpuFeatures())) {
      EXPECT_GT(diff.max().item<double>(), 0.0) << "the bf16 path did not run";
    } else {
      // Without bf16 products (AVX2 only) a bf16 model's attention runs the
      // fp32 executor on its values.
      EXPECT_EQ(diff.max().item<double>(), 0.0) << "item " << b;
    }
  }
}

}  // namespace
}  // namespace docsparse
