// Random-number primitives of the SBM planner: a counter-based generator
// (so every row of every head has its own stream, and a plan does not depend
// on how rows are spread over threads), Poisson variates, and Walker/Vose
// alias tables for O(1) draws from a fixed discrete distribution.
#ifndef DOCSPARSE_MODEL_ATTENTION_SBM_SAMPLING_H_
#define DOCSPARSE_MODEL_ATTENTION_SBM_SAMPLING_H_

#include <cstdint>
#include <vector>

namespace docsparse {

// SplitMix64's output function (Stafford's mix13): a bijection on 64 bits
// with full avalanche, used to derive stream keys and as the generator.
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// A stream key from a parent key and a label (e.g. seed -> layer -> head ->
// row). Distinct labels give unrelated keys.
inline uint64_t DeriveKey(uint64_t parent, uint64_t label) {
  return Mix64(parent ^ Mix64(label + 0x9e3779b97f4a7c15ULL));
}

// SplitMix64 as a counter-based generator: the t-th output of stream `key` is
// Mix64(key + t·γ), a pure function of (key, t). Passes BigCrush; not
// cryptographic. Cheap to create, so one per row.
class CounterRng {
 public:
  explicit CounterRng(uint64_t key) : state_(key) {}

  uint64_t Next() {
    state_ += 0x9e3779b97f4a7c15ULL;
    return Mix64(state_);
  }
  // Uniform in [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(Next() >> 11) * 0x1.0p-53; }

 private:
  uint64_t state_;
};

// A Poisson(mean) variate: inversion by sequential search below mean 10,
// Hörmann's PTRS transformed rejection (1993, as in NumPy) above, so the cost
// is O(1) expected for any mean. mean <= 0 gives 0.
int64_t SamplePoisson(double mean, CounterRng& rng);

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
    const uint64_t scaled = static_cast<uint64_t>(u) * entries_.size();
    const int32_t column = static_cast<int32_t>(scaled >> 32);
    const Entry& entry = entries_[column];
    // Branch-free select: keep-or-alias is a coin flip the branch predictor
    // cannot learn, and mispredicting it cost more than the table lookup.
    const int32_t keep = -static_cast<int32_t>(static_cast<uint32_t>(scaled) < entry.threshold);
    return (column & keep) | (entry.alias & ~keep);
  }

 private:
  template <typename T>
  void BuildFrom(const T* weights, int32_t size, AliasScratch* scratch);

  struct Entry {
    uint32_t threshold;  // P(keep column) · 2^32, saturated
    int32_t alias;
  };
  std::vector<Entry> entries_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_SBM_SAMPLING_H_
