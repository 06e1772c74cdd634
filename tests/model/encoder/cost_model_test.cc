#include "model/attention/cost_model.h"

#include <gtest/gtest.h>

#include "model/encoder/encoder.h"
#include "tests/common/fixture_paths.h"

namespace docsparse {
namespace {

EncoderBatch Batch(std::vector<std::vector<int32_t>> sequences) {
  EncoderBatch batch;
  batch.sequences = std::move(sequences);
  return batch;
}

// hidden 4, intermediate 8, 2 layers, 2 heads of dim 2.
constexpr EncoderShape kSmall{/*num_layers=*/2, /*num_heads=*/2, /*head_dim=*/2,
                              /*hidden=*/4, /*intermediate=*/8};

TEST(CostModelTest, FlopsMatchAHandCount) {
  // Per token and layer: q, k, v and output projections are 4 matrix-vector
  // products of 4x4 = 4 * (2 * 16) = 128 FLOPs; the feed-forward is 4->8->4,
  // 2 * 32 + 2 * 32 = 128. Three tokens, two layers: 3 * 2 * 256 = 1536.
  EXPECT_DOUBLE_EQ(EncoderLinearFlops(3, kSmall), 1536);
  // Per head and layer, 3 tokens: 9 scores of 2 multiply-adds (36 FLOPs) and
  // 9 weighted value rows of dimension 2 (36 FLOPs): 72. Two heads: 144.
  EXPECT_DOUBLE_EQ(DenseAttentionFlops(3, kSmall), 144);

  CostAccount account(kSmall);
  account.AddSequence(3, 5);
  for (int layer = 0; layer < 2; ++layer) account.AddAttention(layer, {{9, 9}, 0, {}});
  EXPECT_EQ(account.TotalEdges(), 36);
  EXPECT_DOUBLE_EQ(account.AttentionFlops(), 288);
  EXPECT_DOUBLE_EQ(account.TotalFlops(), 1536 + 288);
  EXPECT_DOUBLE_EQ(account.DenseEquivalentFlops(), 1536 + 288);
  EXPECT_DOUBLE_EQ(account.MeanDensity(), 1.0);
  EXPECT_EQ(account.input_tokens(), 3);
  EXPECT_EQ(account.padded_tokens(), 5);
}

TEST(CostModelTest, SparseEdgesGiveDensityAndSaving) {
  CostAccount account(kSmall);
  account.AddSequence(4, 4);
  account.AddAttention(0, {{8, 4}, 10, {}});
  account.AddAttention(1, {{16, 0}, 0, {}});
  EXPECT_DOUBLE_EQ(account.HeadDensity(0, 0), 0.5);
  EXPECT_DOUBLE_EQ(account.HeadDensity(0, 1), 0.25);
  EXPECT_DOUBLE_EQ(account.HeadDensity(1, 0), 1.0);
  EXPECT_DOUBLE_EQ(account.HeadDensity(1, 1), 0.0);
  EXPECT_DOUBLE_EQ(account.MeanDensity(), 28.0 / 64.0);
  EXPECT_DOUBLE_EQ(account.AttentionFlops(), 4 * 2 * 28 + 10);
  EXPECT_LT(account.TotalFlops(), account.DenseEquivalentFlops());
}

TEST(CostModelTest, MergeAddsWindows) {
  CostAccount a(kSmall), b(kSmall);
  a.AddSequence(3, 3);
  a.AddAttention(0, {{9, 9}, 0, {}});
  b.AddSequence(2, 3);
  b.AddAttention(0, {{4, 4}, 0, {}});
  a.Merge(b);
  EXPECT_EQ(a.input_tokens(), 5);
  EXPECT_EQ(a.padded_tokens(), 6);
  EXPECT_EQ(a.sequences(), 2);
  EXPECT_EQ(a.HeadEdges(0, 1), 13);
  EXPECT_DOUBLE_EQ(a.HeadDensity(0, 0), 1.0);
}

TEST(CostModelTest, EncoderForwardCountsDenseEdges) {
  auto config = LoadEncoderConfig(testing::FixturePath("tiny_encoders/bert/config.json"));
  ASSERT_TRUE(config.ok()) << config.status();
  auto encoder =
      Encoder::Create(testing::FixturePath("tiny_encoders/bert"), *config, MakeDenseAttention());
  ASSERT_TRUE(encoder.ok()) << encoder.status();
  CostAccount cost((*encoder)->shape());
  ASSERT_TRUE((*encoder)->Forward(Batch({{2, 5, 6, 3}, {2, 7, 3}}), &cost).ok());
  const EncoderShape shape = (*encoder)->shape();
  EXPECT_EQ(cost.TotalEdges(), (16 + 9) * shape.num_heads * shape.num_layers);
  EXPECT_EQ(cost.padded_tokens(), 8);
  EXPECT_DOUBLE_EQ(
      cost.AttentionFlops(),
      (DenseAttentionFlops(4, shape) + DenseAttentionFlops(3, shape)) * shape.num_layers);
}

}  // namespace
}  // namespace docsparse
