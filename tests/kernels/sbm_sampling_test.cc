// The planner's random primitives: Poisson variates and alias tables match
// their distributions (chi-square at significance 0.001 with fixed seeds, so
// the tests are deterministic), and the counter-based streams are pure
// functions of their key.
#include "kernels/sbm_sampling.h"

#include <gtest/gtest.h>

#include <cmath>
#include <vector>

#include "tests/model/attention/sbm_statistics.h"

namespace docsparse {
namespace {

TEST(SbmSamplingTest, CounterStreamsArePureFunctionsOfTheKey) {
  CounterRng a(DeriveKey(7, 3)), b(DeriveKey(7, 3)), c(DeriveKey(7, 4));
  for (int i = 0; i < 100; ++i) {
    const uint64_t x = a.Next();
    EXPECT_EQ(x, b.Next());
    EXPECT_NE(x, c.Next());
  }
}

TEST(SbmSamplingTest, PoissonMeansMatchAcrossRegimes) {
  // Both samplers (search below 10, PTRS above) and the switch between them.
  for (double mean : {0.05, 0.7, 3.0, 9.99, 10.0, 37.5, 1000.0, 250000.0}) {
    CounterRng rng(DeriveKey(11, static_cast<uint64_t>(mean * 100)));
    const int draws = 20000;
    double sum = 0;
    for (int i = 0; i < draws; ++i) sum += static_cast<double>(SamplePoisson(mean, rng));
    // The sum of `draws` Poisson(mean) is Poisson(draws·mean).
    const double z = (sum - draws * mean) / std::sqrt(draws * mean);
    EXPECT_LT(std::fabs(z), testing::kZCritical) << "mean " << mean << " z " << z;
  }
  CounterRng rng(1);
  EXPECT_EQ(SamplePoisson(0, rng), 0);
  EXPECT_EQ(SamplePoisson(-1, rng), 0);
}

TEST(SbmSamplingTest, PoissonHistogramsPassChiSquare) {
  for (double mean : {4.0, 30.0}) {
    CounterRng rng(DeriveKey(12, static_cast<uint64_t>(mean)));
    const int draws = 50000;
    // Bins 0..hi-1 plus one tail bin, with expected counts >= 5.
    const int hi = static_cast<int>(mean + 4 * std::sqrt(mean));
    std::vector<double> observed(hi + 1, 0), expected(hi + 1, 0);
    for (int i = 0; i < draws; ++i) {
      const int64_t x = SamplePoisson(mean, rng);
      observed[std::min<int64_t>(x, hi)] += 1;
    }
    double pmf = std::exp(-mean), cdf = 0;
    for (int x = 0; x < hi; ++x) {
      expected[x] = draws * pmf;
      cdf += pmf;
      pmf *= mean / (x + 1);
    }
    expected[hi] = draws * (1 - cdf);
    const testing::ChiSquare chi = testing::PearsonChiSquare(observed, expected, 5.0);
    EXPECT_GT(chi.p_value, testing::kSignificance)
        << "mean " << mean << ": chi2 " << chi.statistic << " df " << chi.degrees;
  }
}

TEST(SbmSamplingTest, AliasTableDrawsFollowWeights) {
  const std::vector<double> weights = {0.5, 0, 3, 1, 0.01, 7, 2, 2, 0.2, 4.29};
  AliasTable table;
  AliasScratch scratch;
  table.Build(weights.data(), static_cast<int32_t>(weights.size()), &scratch);
  CounterRng rng(99);
  const int draws = 200000;
  std::vector<double> observed(weights.size(), 0);
  for (int i = 0; i < draws; ++i)
    observed[table.Draw(static_cast<uint32_t>(rng.Next() >> 32))] += 1;
  EXPECT_EQ(observed[1], 0) << "a zero weight is never drawn";
  double total = 0;
  for (double w : weights) total += w;
  std::vector<double> expected;
  for (double w : weights) expected.push_back(draws * w / total);
  const testing::ChiSquare chi = testing::PearsonChiSquare(observed, expected, 5.0);
  EXPECT_GT(chi.p_value, testing::kSignificance)
      << "chi2 " << chi.statistic << " df " << chi.degrees;
}

TEST(SbmSamplingTest, AliasTableWithOneHeavyColumn) {
  const std::vector<double> weights = {0, 0, 5, 0};
  AliasTable table;
  AliasScratch scratch;
  table.Build(weights.data(), 4, &scratch);
  CounterRng rng(3);
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(table.Draw(static_cast<uint32_t>(rng.Next() >> 32)), 2);
}

}  // namespace
}  // namespace docsparse
