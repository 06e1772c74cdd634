// Goodness-of-fit helpers for the SBM statistical tests: Pearson's
// chi-square with its p-value (regularized incomplete gamma), and the z bound
// the tests use. Every test runs at significance 0.001 with fixed seeds, so
// its outcome is deterministic; a pass says the sampler is not detectably
// wrong at that level.
#ifndef DOCSPARSE_TESTS_MODEL_SBM_STATISTICS_H_
#define DOCSPARSE_TESTS_MODEL_SBM_STATISTICS_H_

#include <cmath>
#include <vector>

namespace docsparse::testing {

inline constexpr double kSignificance = 0.001;
// Two-sided standard-normal quantile for kSignificance.
inline constexpr double kZCritical = 3.2905;

// P(a, x), the regularized lower incomplete gamma function (series for
// x < a + 1, Lentz's continued fraction otherwise; Numerical Recipes 6.2).
inline double RegularizedGammaP(double a, double x) {
  if (x <= 0) return 0;
  const double log_prefix = a * std::log(x) - x - std::lgamma(a);
  if (x < a + 1) {
    double term = 1 / a, sum = term;
    for (int n = 1; n < 10000 && std::fabs(term) > std::fabs(sum) * 1e-15; ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return sum * std::exp(log_prefix);
  }
  const double tiny = 1e-300;
  double b = x + 1 - a, c = 1 / tiny, d = 1 / b, h = d;
  for (int i = 1; i < 10000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::fabs(d) < tiny) d = tiny;
    c = b + an / c;
    if (std::fabs(c) < tiny) c = tiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::fabs(delta - 1) < 1e-15) break;
  }
  return 1 - std::exp(log_prefix) * h;
}

struct ChiSquare {
  double statistic = 0;
  int degrees = 0;
  double p_value = 1;  // P(χ²_degrees >= statistic)
};

inline ChiSquare MakeChiSquare(double statistic, int degrees) {
  return {statistic, degrees, 1 - RegularizedGammaP(degrees / 2.0, statistic / 2.0)};
}

// Pearson's test of counts against a multinomial expectation (same total).
// Adjacent bins are pooled until each pooled bin expects >= min_expected, as
// the chi-square approximation needs; degrees = pooled bins - 1.
inline ChiSquare PearsonChiSquare(const std::vector<double>& observed,
                                  const std::vector<double>& expected, double min_expected) {
  double statistic = 0, o = 0, e = 0;
  int bins = 0;
  for (size_t i = 0; i < observed.size(); ++i) {
    o += observed[i];
    e += expected[i];
    if (e >= min_expected) {
      statistic += (o - e) * (o - e) / e;
      ++bins;
      o = e = 0;
    }
  }
  if (e > 0) {
    statistic += (o - e) * (o - e) / e;  // the remainder, folded into its own bin
    ++bins;
  }
  return MakeChiSquare(statistic, bins - 1);
}

// Independent Bernoulli cells: cell c was seen observed[c] times in `trials`
// trials with success probability q[c]. Σ (O − Nq)² / (Nq(1 − q)) is
// asymptotically χ² with one degree per cell.
inline ChiSquare BernoulliChiSquare(const std::vector<double>& observed,
                                    const std::vector<double>& q, double trials) {
  double statistic = 0;
  for (size_t c = 0; c < observed.size(); ++c) {
    const double mean = trials * q[c];
    statistic += (observed[c] - mean) * (observed[c] - mean) / (mean * (1 - q[c]));
  }
  return MakeChiSquare(statistic, static_cast<int>(observed.size()));
}

}  // namespace docsparse::testing

#endif  // DOCSPARSE_TESTS_MODEL_SBM_STATISTICS_H_
