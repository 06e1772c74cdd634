// convert/lsg_positions.h against the reference's formulas, on tables whose
// rows encode their own index so that every picked row can be checked.
#include "convert/lsg_positions.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace docsparse::convert {
namespace {

using ::testing::HasSubstr;

// Row i is [i, i + 0.5] (float32 holds these exactly up to 2^23).
at::Tensor IndexTable(int64_t rows) {
  at::Tensor index = at::arange(rows, at::kFloat).unsqueeze(1);
  return at::cat({index, index + 0.5}, 1);
}

int64_t RowOf(const at::Tensor& t, int64_t k) {
  return static_cast<int64_t>(t[k][0].item<float>());
}

TEST(OrderGlobalPositionsTest, StridesA512RowTable) {
  absl::StatusOr<at::Tensor> g = OrderGlobalPositions(IndexTable(512), 64);
  ASSERT_TRUE(g.ok()) << g.status();
  ASSERT_EQ(g->sizes(), (std::vector<int64_t>{512, 2}));
  // reshape(8, 64).T: token k is row (k % 8) * 64 + k / 8.
  for (int64_t k = 0; k < 512; ++k) EXPECT_EQ(RowOf(*g, k), (k % 8) * 64 + k / 8) << k;
  EXPECT_EQ(RowOf(*g, 1), 64);
  EXPECT_EQ(RowOf(*g, 8), 1);
}

TEST(OrderGlobalPositionsTest, SubsamplesLargerTablesAndCutsToMultiplesOf512) {
  // 4096 rows: factor 8, every 8th row, stride 64 / 8 = 8, 64 groups.
  absl::StatusOr<at::Tensor> g = OrderGlobalPositions(IndexTable(4096), 64);
  ASSERT_TRUE(g.ok()) << g.status();
  for (int64_t k = 0; k < 512; ++k) EXPECT_EQ(RowOf(*g, k), ((k % 64) * 8 + k / 64) * 8) << k;
  // 600 rows: cut to 512, then as a 512-row table.
  absl::StatusOr<at::Tensor> cut = OrderGlobalPositions(IndexTable(600), 64);
  ASSERT_TRUE(cut.ok()) << cut.status();
  for (int64_t k = 0; k < 512; ++k) EXPECT_EQ(RowOf(*cut, k), (k % 8) * 64 + k / 8) << k;
}

TEST(OrderGlobalPositionsTest, RefusesShortTablesAndImpossibleStrides) {
  absl::StatusOr<at::Tensor> short_table = OrderGlobalPositions(IndexTable(64), 64);
  EXPECT_EQ(short_table.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(short_table.status().message()), HasSubstr("random torch.normal"));
  EXPECT_FALSE(OrderGlobalPositions(IndexTable(512), 3).ok());   // 512 % 3 != 0
  EXPECT_FALSE(OrderGlobalPositions(IndexTable(4096), 4).ok());  // 4 / 8 == 0
  EXPECT_FALSE(OrderGlobalPositions(IndexTable(512), 0).ok());
  EXPECT_TRUE(OrderGlobalPositions(IndexTable(512), 512).ok());
}

TEST(GlobalEmbeddingsTest, AddsBosToTheFirstRowMaskToTheOthersAndTokenType) {
  const at::Tensor positions = IndexTable(512);
  const at::Tensor word =
      at::tensor({0.f, 0.f, 1000.f, 1000.f, 0.f, 0.f, 0.f, 0.f, 0.f, 0.f, -2000.f, -2000.f})
          .reshape({6, 2});
  absl::StatusOr<at::Tensor> g = GlobalEmbeddings(positions, word, /*bos_id=*/1, /*mask_id=*/5,
                                                  at::tensor({0.25f, 0.25f}), 64, std::nullopt);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FLOAT_EQ((*g)[0][0].item<float>(), 0 + 1000 + 0.25f);
  EXPECT_FLOAT_EQ((*g)[1][1].item<float>(), 64.5f - 2000 + 0.25f);
  EXPECT_FLOAT_EQ((*g)[511][0].item<float>(), 511 - 2000 + 0.25f);
  EXPECT_FALSE(GlobalEmbeddings(positions, word, 6, 5, std::nullopt, 64, std::nullopt).ok());
}

TEST(GlobalEmbeddingsTest, KeepsThePreviousFirstRowWhenAsked) {
  const at::Tensor previous = at::full({512, 2}, 7.f);
  const at::Tensor word = at::zeros({3, 2});
  absl::StatusOr<at::Tensor> g =
      GlobalEmbeddings(IndexTable(512), word, 0, 1, std::nullopt, 64, previous);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_FLOAT_EQ((*g)[0][0].item<float>(), 7.f);
  EXPECT_FLOAT_EQ((*g)[1][0].item<float>(), 64.f);
  EXPECT_FLOAT_EQ(previous[1][0].item<float>(), 7.f);  // not modified in place
}

TEST(GlobalEmbeddingsTest, ComputesInTheTablesDtype) {
  const at::Tensor positions = (IndexTable(512) / 7).to(at::kHalf);
  const at::Tensor word = (at::arange(8, at::kFloat).reshape({4, 2}) / 3).to(at::kHalf);
  absl::StatusOr<at::Tensor> g =
      GlobalEmbeddings(positions, word, 2, 3, std::nullopt, 64, std::nullopt);
  ASSERT_TRUE(g.ok()) << g.status();
  EXPECT_EQ(g->scalar_type(), at::kHalf);
  // Each add rounds to half, as torch does in place.
  const at::Tensor expected = positions[64] + word[3];
  EXPECT_TRUE(at::equal((*g)[1], expected));
}

TEST(TilePositionsTest, RepeatsTheTableAfterItsOffsetRows) {
  absl::StatusOr<at::Tensor> plain = TilePositions(IndexTable(512), 0, 1300);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_EQ(plain->size(0), 1300);
  for (int64_t i : {0, 511, 512, 1023, 1024, 1299}) EXPECT_EQ(RowOf(*plain, i), i % 512) << i;

  absl::StatusOr<at::Tensor> offset = TilePositions(IndexTable(514), 2, 2048);
  ASSERT_TRUE(offset.ok()) << offset.status();
  ASSERT_EQ(offset->size(0), 2050);
  EXPECT_EQ(RowOf(*offset, 0), 0);
  EXPECT_EQ(RowOf(*offset, 1), 1);
  for (int64_t i : {2, 513, 514, 515, 2049}) EXPECT_EQ(RowOf(*offset, i), 2 + (i - 2) % 512) << i;
}

TEST(TilePositionsTest, FillsLengthsWhereTheReferenceFallsShort) {
  // The reference cats 60000 / 514 + 1 = 117 copies of 512 rows: 59904 < 60000.
  absl::StatusOr<at::Tensor> t = TilePositions(IndexTable(514), 2, 60000);
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->size(0), 60002);
  EXPECT_EQ(RowOf(*t, 60001), 2 + 59999 % 512);
}

TEST(TilePositionsTest, RefusesToShrinkTheTable) {
  absl::StatusOr<at::Tensor> t = TilePositions(IndexTable(514), 2, 511);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr("smaller than the 512 positions"));
  EXPECT_TRUE(TilePositions(IndexTable(514), 2, 512).ok());
}

}  // namespace
}  // namespace docsparse::convert
