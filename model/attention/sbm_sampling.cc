#include "model/attention/sbm_sampling.h"

#include <algorithm>
#include <cmath>

namespace docsparse {
namespace {

// log(k!) : a table below 64, Stirling's series above (error < 1e-12 there).
// std::lgamma would do, but glibc's writes the global `signgam` and so is not
// safe to call from several threads.
double LogFactorial(int64_t k) {
  static const std::vector<double> table = [] {
    std::vector<double> t(64, 0.0);
    for (int i = 2; i < 64; ++i) t[i] = t[i - 1] + std::log(static_cast<double>(i));
    return t;
  }();
  if (k < 64) return table[k];
  const double x = static_cast<double>(k) + 1;  // log Γ(x)
  const double inv = 1 / x;
  const double inv2 = inv * inv;
  return (x - 0.5) * std::log(x) - x + 0.91893853320467274178 +
         inv * (1.0 / 12 - inv2 * (1.0 / 360 - inv2 * (1.0 / 1260 - inv2 / 1680)));
}

int64_t PoissonBySearch(double mean, CounterRng& rng) {
  // P(X = 0) = e^-mean >= e^-10, so the CDF reaches any u < 1 quickly; the
  // cap only guards against rounding leaving the sum short of u.
  const double u = rng.Uniform();
  double probability = std::exp(-mean);
  double cumulative = probability;
  int64_t x = 0;
  while (u > cumulative && x < 1000) {
    ++x;
    probability *= mean / static_cast<double>(x);
    cumulative += probability;
  }
  return x;
}

// W. Hörmann, "The transformed rejection method for generating Poisson
// random variables", Insurance: Mathematics and Economics 12 (1993).
int64_t PoissonPtrs(double mean, CounterRng& rng) {
  const double slam = std::sqrt(mean);
  const double loglam = std::log(mean);
  const double b = 0.931 + 2.53 * slam;
  const double a = -0.059 + 0.02483 * b;
  const double invalpha = 1.1239 + 1.1328 / (b - 3.4);
  const double vr = 0.9277 - 3.6224 / (b - 2);
  while (true) {
    const double u = rng.Uniform() - 0.5;
    const double v = rng.Uniform();
    const double us = 0.5 - std::fabs(u);
    const int64_t k = static_cast<int64_t>(std::floor((2 * a / us + b) * u + mean + 0.43));
    if (us >= 0.07 && v <= vr) return k;
    if (k < 0 || (us < 0.013 && v > us)) continue;
    if (std::log(v) + std::log(invalpha) - std::log(a / (us * us) + b) <=
        -mean + static_cast<double>(k) * loglam - LogFactorial(k)) {
      return k;
    }
  }
}

}  // namespace

int64_t SamplePoisson(double mean, CounterRng& rng) {
  if (!(mean > 0)) return 0;
  return mean < 10 ? PoissonBySearch(mean, rng) : PoissonPtrs(mean, rng);
}

template <typename T>
void AliasTable::BuildFrom(const T* weights, int32_t size, AliasScratch* scratch) {
  entries_.resize(size);
  double total = 0;
  for (int32_t i = 0; i < size; ++i) total += weights[i];
  if (!(total > 0)) {
    for (int32_t i = 0; i < size; ++i) entries_[i] = {0, 0};
    return;
  }
  // Scaled probabilities (mean 1) sorted into small (< 1) and large (>= 1)
  // stacks, kept in one array: small from the front, large from the back.
  scratch->scaled.resize(size);
  scratch->stack.resize(size);
  double* scaled = scratch->scaled.data();
  int32_t* stack = scratch->stack.data();
  int32_t small_end = 0;
  int32_t large_begin = size;
  const double factor = static_cast<double>(size) / total;
  for (int32_t i = 0; i < size; ++i) {
    scaled[i] = weights[i] * factor;
    // Branch-free: write both ends (they never meet before the last index),
    // advance one.
    const bool small = scaled[i] < 1;
    stack[small_end] = i;
    stack[large_begin - 1] = i;
    small_end += small;
    large_begin -= !small;
  }
  constexpr double kScale = 4294967296.0;  // 2^32
  auto threshold = [&](double p) {
    return static_cast<uint32_t>(std::min(p * kScale, kScale - 1));
  };
  while (small_end > 0 && large_begin < size) {
    const int32_t small = stack[--small_end];
    const int32_t large = stack[large_begin];
    entries_[small] = {threshold(scaled[small]), large};
    scaled[large] -= 1 - scaled[small];
    if (scaled[large] < 1) {
      ++large_begin;
      stack[small_end++] = large;
    }
  }
  // What is left has probability 1 up to rounding: always keep the column.
  for (int32_t i = 0; i < small_end; ++i) entries_[stack[i]] = {0xffffffffu, stack[i]};
  for (int32_t i = large_begin; i < size; ++i) entries_[stack[i]] = {0xffffffffu, stack[i]};
}

void AliasTable::Build(const double* weights, int32_t size, AliasScratch* scratch) {
  BuildFrom(weights, size, scratch);
}

void AliasTable::Build(const float* weights, int32_t size, AliasScratch* scratch) {
  BuildFrom(weights, size, scratch);
}

}  // namespace docsparse
