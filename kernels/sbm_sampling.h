// Random-number primitives of the SBM planner: a counter-based generator
// (so every row of every head has its own stream, and a plan does not depend
// on how rows are spread over threads), Poisson variates, and Walker/Vose
// alias tables for O(1) draws from a fixed discrete distribution.
//
// The generator, the Poisson sampler and the alias draw are host and device
// functions: the CUDA fastRG sampler (kernels/sbm_fastrg_cuda.h) runs this very
// code, so that it draws the same edges as the CPU planner for the same seed.
#ifndef DOCSPARSE_KERNELS_SBM_SAMPLING_H_
#define DOCSPARSE_KERNELS_SBM_SAMPLING_H_

#include <math.h>

#include <cstdint>
#include <vector>

#if defined(__CUDACC__)
#define DOCSPARSE_HOST_DEVICE __host__ __device__
#else
#define DOCSPARSE_HOST_DEVICE
#endif

namespace docsparse {

// SplitMix64's output function (Stafford's mix13): a bijection on 64 bits
// with full avalanche, used to derive stream keys and as the generator.
DOCSPARSE_HOST_DEVICE inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// A stream key from a parent key and a label (e.g. seed -> layer -> head ->
// row). Distinct labels give unrelated keys.
DOCSPARSE_HOST_DEVICE inline uint64_t DeriveKey(uint64_t parent, uint64_t label) {
  return Mix64(parent ^ Mix64(label + 0x9e3779b97f4a7c15ULL));
}

// SplitMix64 as a counter-based generator: the t-th output of stream `key` is
// Mix64(key + t·γ), a pure function of (key, t). Passes BigCrush; not
// cryptographic. Cheap to create, so one per row.
class CounterRng {
 public:
  static constexpr uint64_t kGamma = 0x9e3779b97f4a7c15ULL;

  DOCSPARSE_HOST_DEVICE explicit CounterRng(uint64_t key) : state_(key) {}

  DOCSPARSE_HOST_DEVICE uint64_t Next() {
    state_ += kGamma;
    return Mix64(state_);
  }
  // Uniform in [0, 1) with 53 random bits.
  DOCSPARSE_HOST_DEVICE double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }
  // The t-th output from here (t = 1 is the next), without drawing: the
  // stream is a pure function of its counter.
  DOCSPARSE_HOST_DEVICE uint64_t Peek(uint64_t t) const { return Mix64(state_ + t * kGamma); }
  // The counter; CounterRng(counter()) continues this stream.
  DOCSPARSE_HOST_DEVICE uint64_t counter() const { return state_; }

 private:
  uint64_t state_;
};

// log(k!) for k < 64, built once on the host with std::log; the device gets a
// copy, so both sides read the same table.
constexpr int kLogFactorialTableSize = 64;
const double* LogFactorialTable();

// log(k!): the table below 64, Stirling's series above (error < 1e-12 there).
// (std::lgamma would do on the host, but glibc's writes the global `signgam`
// and so is not safe to call from several threads.)
DOCSPARSE_HOST_DEVICE inline double LogFactorial(int64_t k, const double* table) {
  if (k < kLogFactorialTableSize) return table[k];
  const double x = static_cast<double>(k) + 1;  // log Γ(x)
  const double inv = 1 / x;
  const double inv2 = inv * inv;
  return (x - 0.5) * ::log(x) - x + 0.91893853320467274178 +
         inv * (1.0 / 12 - inv2 * (1.0 / 360 - inv2 * (1.0 / 1260 - inv2 / 1680)));
}

DOCSPARSE_HOST_DEVICE inline int64_t PoissonBySearch(double mean, CounterRng& rng) {
  // P(X = 0) = e^-mean >= e^-10, so the CDF reaches any u < 1 quickly; the
  // cap only guards against rounding leaving the sum short of u.
  const double u = rng.Uniform();
  double probability = ::exp(-mean);
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
DOCSPARSE_HOST_DEVICE inline int64_t PoissonPtrs(double mean, CounterRng& rng,
                                                 const double* log_factorials) {
  const double slam = ::sqrt(mean);
  const double loglam = ::log(mean);
  const double b = 0.931 + 2.53 * slam;
  const double a = -0.059 + 0.02483 * b;
  const double invalpha = 1.1239 + 1.1328 / (b - 3.4);
  const double vr = 0.9277 - 3.6224 / (b - 2);
  while (true) {
    const double u = rng.Uniform() - 0.5;
    const double v = rng.Uniform();
    const double us = 0.5 - ::fabs(u);
    const int64_t k = static_cast<int64_t>(::floor((2 * a / us + b) * u + mean + 0.43));
    if (us >= 0.07 && v <= vr) return k;
    if (k < 0 || (us < 0.013 && v > us)) continue;
    if (::log(v) + ::log(invalpha) - ::log(a / (us * us) + b) <=
        -mean + static_cast<double>(k) * loglam - LogFactorial(k, log_factorials)) {
      return k;
    }
  }
}

// A Poisson(mean) variate: inversion by sequential search below mean 10,
// Hörmann's PTRS transformed rejection (1993, as in NumPy) above, so the cost
// is O(1) expected for any mean. mean <= 0 gives 0. `log_factorials` is
// LogFactorialTable() or its device copy.
DOCSPARSE_HOST_DEVICE inline int64_t SamplePoisson(double mean, CounterRng& rng,
                                                   const double* log_factorials) {
  if (!(mean > 0)) return 0;
  return mean < 10 ? PoissonBySearch(mean, rng) : PoissonPtrs(mean, rng, log_factorials);
}

inline int64_t SamplePoisson(double mean, CounterRng& rng) {
  return SamplePoisson(mean, rng, LogFactorialTable());
}

// One column of an alias table: keep it with probability threshold / 2^32,
// else take `alias`.
struct AliasEntry {
  uint32_t threshold;  // P(keep column) · 2^32, saturated
  int32_t alias;
};

// One draw from the alias table `entries` [size] with a 32-bit uniform u: u·size
// picks the column (integer part) and its fractional part, uniform given the
// column, accepts the column or takes its alias (probabilities resolved to
// ~size·2^-32).
DOCSPARSE_HOST_DEVICE inline int32_t DrawAlias(const AliasEntry* entries, int32_t size,
                                               uint32_t u) {
  const uint64_t scaled = static_cast<uint64_t>(u) * static_cast<uint64_t>(size);
  const int32_t column = static_cast<int32_t>(scaled >> 32);
  const AliasEntry entry = entries[column];
  // Branch-free select: keep-or-alias is a coin flip the branch predictor
  // cannot learn, and mispredicting it cost more than the table lookup.
  const int32_t keep = -static_cast<int32_t>(static_cast<uint32_t>(scaled) < entry.threshold);
  return (column & keep) | (entry.alias & ~keep);
}

// Buffers AliasTable::Build needs; reused across builds so that building a
// table per row does not allocate.
struct AliasScratch {
  std::vector<int32_t> stack;
  std::vector<double> scaled;
};

// Walker's alias method with Vose's construction: O(n) to build from n
// non-negative weights, O(1) per draw from one 64-bit random word. Weights
// need not be normalised; all-zero weights make every draw return 0 (callers
// never draw from an empty distribution).
class AliasTable {
 public:
  AliasTable() = default;
  // `weights` [size], size >= 1.
  void Build(const double* weights, int32_t size, AliasScratch* scratch);
  void Build(const float* weights, int32_t size, AliasScratch* scratch);

  int32_t size() const { return static_cast<int32_t>(entries_.size()); }

  // One draw from a 32-bit uniform u: u·size picks the column (integer
  // part) and its fractional part, uniform given the column, accepts the
  // column or takes its alias (probabilities resolved to ~size·2^-32). Two
  // draws per 64-bit random word keep the generator off the critical path.
  // Starts loading the entry Draw(u) will read (large tables miss cache).
  void Prefetch(uint32_t u) const {
    __builtin_prefetch(&entries_[(static_cast<uint64_t>(u) * entries_.size()) >> 32]);
  }

  int32_t Draw(uint32_t u) const {
    return DrawAlias(entries_.data(), static_cast<int32_t>(entries_.size()), u);
  }
  // The columns, for copying the table to a device.
  const AliasEntry* entries() const { return entries_.data(); }

 private:
  template <typename T>
  void BuildFrom(const T* weights, int32_t size, AliasScratch* scratch);

  using Entry = AliasEntry;
  std::vector<Entry> entries_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_SBM_SAMPLING_H_
