// kernels/packed_linear: products over any row count, run as chunks of a few
// compiled row counts, against a double product written out here; the
// compiled products stay bounded however many row counts a server sees; the
// staged pieces make up the whole product.
#include "kernels/packed_linear.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

namespace docsparse {
namespace {

struct Problem {
  int64_t in = 48;
  int64_t out = 40;
  std::vector<float> weight;  // [out, in]
  std::vector<float> bias;    // [out]
};

Problem MakeProblem(std::mt19937& rng) {
  Problem p;
  std::normal_distribution<float> normal(0.0f, 1.0f);
  p.weight.resize(p.in * p.out);
  for (float& w : p.weight) w = 0.1f * normal(rng);
  p.bias.resize(p.out);
  for (float& b : p.bias) b = normal(rng);
  return p;
}

// Max |y - (x·Wᵀ + b)| over rows, the product in double.
double MaxError(const Problem& p, const std::vector<float>& x, const std::vector<float>& y,
                int64_t rows) {
  double worst = 0;
  for (int64_t r = 0; r < rows; ++r) {
    for (int64_t o = 0; o < p.out; ++o) {
      double sum = p.bias[o];
      for (int64_t i = 0; i < p.in; ++i) {
        sum += static_cast<double>(x[r * p.in + i]) * p.weight[o * p.in + i];
      }
      worst = std::max(worst, std::abs(sum - y[r * p.out + o]));
    }
  }
  return worst;
}

TEST(PackedLinearTest, EveryRowCountMatchesTheDoubleProduct) {
  std::mt19937 rng(11);
  const Problem p = MakeProblem(rng);
  const auto linear =
      PackedLinear::Create(p.weight.data(), p.bias.data(), p.out, p.in, LinearElement::kFp32);
  ASSERT_NE(linear, nullptr);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  // Below, at and across the chunk sizes (64 ... 2,048): one chunk, several,
  // and a remainder of every kind.
  for (int64_t rows : {1, 63, 64, 65, 127, 700, 1000, 2047, 2048, 2049, 4097, 6000}) {
    std::vector<float> x(rows * p.in), y(rows * p.out, NAN);
    for (float& v : x) v = normal(rng);
    linear->Run(x.data(), rows, y.data());
    EXPECT_LT(MaxError(p, x, y, rows), 1e-4) << rows << " rows";
  }
}

// int8 products run in chunks of at most 512 rows, each quantized,
// multiplied and scaled back in turn: every row of a product across several
// chunks (and a remainder) has the bits it has computed alone (its scale is
// its own and its int32 sums are exact), and is close to the double product.
TEST(PackedLinearTest, Int8RowsAcrossChunksHaveTheBitsTheyHaveAlone) {
  std::mt19937 rng(14);
  const Problem p = MakeProblem(rng);
  const auto linear = PackedLinear::Create(p.weight.data(), p.bias.data(), p.out, p.in,
                                           LinearElement::kFp32, LinearWeights::kInt8);
  ASSERT_NE(linear, nullptr);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  const int64_t rows = 1300;  // 512 + 512 + 256 + 20
  std::vector<float> x(rows * p.in), y(rows * p.out, NAN), alone(p.out, NAN);
  for (float& v : x) v = normal(rng);
  linear->Run(x.data(), rows, y.data());
  for (int64_t r = 0; r < rows; r += 37) {
    linear->Run(x.data() + r * p.in, 1, alone.data());
    for (int64_t o = 0; o < p.out; ++o) {
      ASSERT_EQ(y[r * p.out + o], alone[o]) << "row " << r << " output " << o;
    }
  }
  EXPECT_LT(MaxError(p, x, y, rows), 0.1);
}

TEST(PackedLinearTest, CompiledProductsStayBoundedOverManyRowCounts) {
  std::mt19937 rng(12);
  const Problem p = MakeProblem(rng);
  for (LinearWeights weights : {LinearWeights::kElementType, LinearWeights::kInt8}) {
    const auto linear = PackedLinear::Create(p.weight.data(), p.bias.data(), p.out, p.in,
                                             LinearElement::kFp32, weights);
    ASSERT_NE(linear, nullptr);
    std::uniform_int_distribution<int64_t> length(1, 5000);
    std::vector<float> x(5000 * p.in, 0.5f), y(5000 * p.out);
    for (int call = 0; call < 300; ++call) linear->Run(x.data(), length(rng), y.data());
    for (int64_t rows = 1; rows <= 200; ++rows) linear->Run(x.data(), rows, y.data());
    if (linear->implementation() == "docsparse:int8_gemm_avx2") {
      // int8 on a CPU without int32 dot products: no oneDNN product at all.
      EXPECT_EQ(linear->compiled_row_counts(), 0u);
      continue;
    }
    // 63 exact remainders and the chunks 64, 128, ..., 2,048.
    EXPECT_LE(linear->compiled_row_counts(), 69u);
    EXPECT_GE(linear->compiled_row_counts(), 63u);
  }
}

// RunStaged hands over kStagingRows rows at a time, in order, the last piece
// shorter; together they are Run's product, byte for byte.
TEST(PackedLinearTest, StagedPiecesAreTheWholeProduct) {
  std::mt19937 rng(13);
  const Problem p = MakeProblem(rng);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (LinearElement element : {LinearElement::kFp32, LinearElement::kBf16}) {
    const auto linear = PackedLinear::Create(p.weight.data(), p.bias.data(), p.out, p.in, element);
    if (linear == nullptr) continue;  // bf16 without AVX-512
    const int64_t bytes = element == LinearElement::kBf16 ? 2 : 4;
    EXPECT_EQ(linear->in_row_bytes(), p.in * bytes);
    EXPECT_EQ(linear->out_row_bytes(), p.out * bytes);
    for (int64_t rows :
         {int64_t{1}, PackedLinear::kStagingRows, 3 * PackedLinear::kStagingRows + 45}) {
      std::vector<float> values(rows * p.in);
      for (float& v : values) v = normal(rng);
      std::vector<uint16_t> bf16(values.size());
      for (size_t i = 0; i < values.size(); ++i) {
        uint32_t bits;
        std::memcpy(&bits, &values[i], sizeof(bits));
        bf16[i] = static_cast<uint16_t>(bits >> 16);
      }
      const void* x = element == LinearElement::kBf16 ? static_cast<const void*>(bf16.data())
                                                      : static_cast<const void*>(values.data());
      std::vector<uint8_t> whole(rows * p.out * bytes), pieces(whole.size(), 0xab);
      linear->Run(x, rows, whole.data());
      int64_t next = 0;
      linear->RunStaged(x, rows, [&](const void* staged, int64_t first, int64_t count) {
        EXPECT_EQ(first, next);
        EXPECT_EQ(count, std::min(PackedLinear::kStagingRows, rows - first));
        std::memcpy(pieces.data() + first * p.out * bytes, staged, count * p.out * bytes);
        next = first + count;
      });
      EXPECT_EQ(next, rows);
      EXPECT_EQ(pieces, whole) << rows << " rows";
    }
  }
}

}  // namespace
}  // namespace docsparse
