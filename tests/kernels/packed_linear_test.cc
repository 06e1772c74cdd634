// kernels/packed_linear: products over any row count, run as chunks of a few
// compiled row counts, against a double product written out here; the
// compiled products stay bounded however many row counts a server sees; a
// streamed output is the cached one, byte for byte.
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
    // 63 exact remainders and the chunks 64, 128, ..., 2,048.
    EXPECT_LE(linear->compiled_row_counts(), 69u);
    EXPECT_GE(linear->compiled_row_counts(), 63u);
  }
}

// kStreamed goes through its staging buffer only above kStreamedMinBytes:
// 8,969 rows of 2,048 bf16 outputs are 36.7 MB, 35 staging steps and a
// remainder, written one element past an aligned address so that the copy's
// unaligned head and tail run too.
TEST(PackedLinearTest, StreamedOutputIsTheCachedOneByteForByte) {
  constexpr int64_t kIn = 64, kOut = 2048, kRows = 8969;
  ASSERT_GT(kRows * kOut * 2, PackedLinear::kStreamedMinBytes);
  std::mt19937 rng(13);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  std::vector<float> weight(kOut * kIn), bias(kOut);
  for (float& w : weight) w = 0.1f * normal(rng);
  for (float& b : bias) b = normal(rng);
  const auto linear =
      PackedLinear::Create(weight.data(), bias.data(), kOut, kIn, LinearElement::kBf16);
  if (linear == nullptr) GTEST_SKIP() << "no oneDNN bf16 product on this CPU";
  std::vector<uint16_t> x(kRows * kIn);
  for (uint16_t& v : x) {
    const float value = normal(rng);
    uint32_t bits;
    std::memcpy(&bits, &value, sizeof(bits));
    v = static_cast<uint16_t>(bits >> 16);
  }
  std::vector<uint16_t> cached(kRows * kOut);
  linear->Run(x.data(), kRows, cached.data(), PackedLinear::OutputWrite::kCached);
  constexpr uint16_t kGuard = 0xabcd;
  std::vector<uint16_t> streamed(kRows * kOut + 2, kGuard);
  linear->Run(x.data(), kRows, streamed.data() + 1, PackedLinear::OutputWrite::kStreamed);
  EXPECT_EQ(streamed.front(), kGuard);
  EXPECT_EQ(streamed.back(), kGuard);
  EXPECT_EQ(std::memcmp(streamed.data() + 1, cached.data(), cached.size() * sizeof(uint16_t)), 0);
}

}  // namespace
}  // namespace docsparse
