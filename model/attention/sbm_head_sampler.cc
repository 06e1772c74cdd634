#include "model/attention/sbm_head_sampler.h"

#include <ATen/Parallel.h>
#include <immintrin.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>
#include <limits>

#include "kernels/cpu_features.h"
#include "kernels/vector_exp.h"
#include "model/attention/sbm_memberships.h"

namespace docsparse {
namespace {

// Rows per work item. Fixed (not derived from the thread count) so that the
// output layout, and with the per-row streams the plan, is the same for any
// number of threads.
constexpr int64_t kChunkRows = 64;

// Rows of fewer copies than tokens / kSortedRowCopies are sorted; denser
// ones read back from the bitmap, whose scan (a word per 64 tokens) then
// costs less than sorting them. Sorting took a third of SBM's attention at
// 4,096 tokens and 5% density, ~200 keys a row.
constexpr int64_t kSortedRowCopies = 256;

// Runs fn(item, worker_state) for items [0, count) on at::parallel_for's
// threads, handing items out dynamically (rows differ in degree, so static
// ranges would leave threads idle).
template <typename State, typename Fn>
void ForEachDynamic(int64_t count, const std::function<State()>& make_state, Fn fn) {
  std::atomic<int64_t> next{0};
  const int64_t workers = std::max<int64_t>(1, std::min<int64_t>(at::get_num_threads(), count));
  at::parallel_for(0, workers, 1, [&](int64_t begin, int64_t end) {
    for (int64_t w = begin; w < end; ++w) {
      State state = make_state();
      for (int64_t item = next.fetch_add(1); item < count; item = next.fetch_add(1)) {
        fn(item, state);
      }
    }
  });
}

// Draws one index from non-negative weights [k] by a linear scan of the
// cumulative sum: cheaper than building an alias table for a few draws.
int32_t DrawLinear(const double* weights, int k, double total, uint32_t random) {
  double u = random * 0x1.0p-32 * total;
  for (int a = 0; a < k; ++a) {
    if (u < weights[a]) return a;
    u -= weights[a];
  }
  // Rounding left u just above the last weight: take the last positive one.
  for (int a = k - 1; a > 0; --a) {
    if (weights[a] > 0) return a;
  }
  return 0;
}

}  // namespace

#define DOCSPARSE_SBM_AVX2 __attribute__((target("avx2,fma")))

// A row's distribution over key clusters, R_ib κ_b, rebuilt for every row:
// running sums in float, padded with +inf to whole vectors. A draw counts
// the sums at or below u·total (the inverse CDF) with vector compares:
// branch-free, and O(k) additions to build, where an alias table would cost
// a Vose construction per row.
class RowClusterTable {
 public:
  explicit RowClusterTable(int k)
      : k_(k), cumulative_((k + 7) & ~7, std::numeric_limits<float>::infinity()) {}

  void Build(const float* profile, const double* key_mass) {
    float total = 0;
    last_positive_ = 0;
    for (int b = 0; b < k_; ++b) {
      const float weight = static_cast<float>(profile[b] * key_mass[b]);
      total += weight;
      cumulative_[b] = total;
      if (weight > 0) last_positive_ = b;
    }
  }

  const float* cumulative() const { return cumulative_.data(); }
  int padded() const { return static_cast<int>(cumulative_.size()); }
  float total() const { return cumulative_[k_ - 1]; }
  // Rounding can put u·total at the very top; the last cluster with weight
  // is then the right answer.
  int32_t last_positive() const { return last_positive_; }

 private:
  int k_;
  std::vector<float> cumulative_;
  int32_t last_positive_ = 0;
};

// Draws `copies` keys of one row: per copy, one 64-bit word, 32 bits for the
// key cluster b (inverse CDF on the row's table) and 32 for the key j given b
// (alias table). Two passes: the first picks every copy's cluster and
// prefetches the key-table entry it will read (tokens x k x 8 bytes of tables
// do not fit in L2 at long lengths), the second resolves the keys, by then
// mostly in cache. clusters: [copies] scratch; keys receive the uniforms
// first, then the keys.
void DrawCopiesPortable(const RowClusterTable& row, const AliasTable* key_tables, CounterRng& rng,
                        int64_t copies, int32_t* clusters, int32_t* keys) {
  const float* cumulative = row.cumulative();
  const int padded = row.padded();
  const float scale = row.total() * 0x1.0p-32f;
  for (int64_t t = 0; t < copies; ++t) {
    const uint64_t bits = rng.Next();
    const float x = static_cast<float>(static_cast<uint32_t>(bits >> 32)) * scale;
    int32_t b = 0;
    for (int c = 0; c < padded; ++c) b += cumulative[c] <= x;
    clusters[t] = std::min(b, row.last_positive());
    keys[t] = static_cast<int32_t>(static_cast<uint32_t>(bits));
    key_tables[clusters[t]].Prefetch(static_cast<uint32_t>(bits));
  }
  for (int64_t t = 0; t < copies; ++t) {
    keys[t] = key_tables[clusters[t]].Draw(static_cast<uint32_t>(keys[t]));
  }
}

DOCSPARSE_SBM_AVX2 void DrawCopiesAvx2(const RowClusterTable& row, const AliasTable* key_tables,
                                       CounterRng& rng, int64_t copies, int32_t* clusters,
                                       int32_t* keys) {
  const float* cumulative = row.cumulative();
  const int padded = row.padded();
  const float scale = row.total() * 0x1.0p-32f;
  for (int64_t t = 0; t < copies; ++t) {
    const uint64_t bits = rng.Next();
    const __m256 x = _mm256_set1_ps(static_cast<float>(static_cast<uint32_t>(bits >> 32)) * scale);
    int32_t b = 0;
    for (int c = 0; c < padded; c += 8) {
      const __m256 le = _mm256_cmp_ps(_mm256_loadu_ps(cumulative + c), x, _CMP_LE_OQ);
      b += __builtin_popcount(static_cast<unsigned>(_mm256_movemask_ps(le)));
    }
    clusters[t] = std::min(b, row.last_positive());
    keys[t] = static_cast<int32_t>(static_cast<uint32_t>(bits));
    key_tables[clusters[t]].Prefetch(static_cast<uint32_t>(bits));
  }
  for (int64_t t = 0; t < copies; ++t) {
    keys[t] = key_tables[clusters[t]].Draw(static_cast<uint32_t>(keys[t]));
  }
}

struct SbmHeadSampler::Scratch {
  explicit Scratch(int64_t tokens, int k) : bitmap((tokens + 63) / 64, 0), row_cluster(k) {}
  std::vector<uint64_t> bitmap;   // [ceil(tokens / 64)], all zero between rows
  std::vector<int32_t> copies;    // the row's keys before deduplication
  std::vector<int32_t> clusters;  // the copies' key clusters
  RowClusterTable row_cluster;
};

std::unique_ptr<SbmHeadSampler> SbmHeadSampler::Build(const float* query_logits,
                                                      const float* key_logits, int64_t tokens,
                                                      int k, const double* block, double beta) {
  std::unique_ptr<SbmHeadSampler> s(new SbmHeadSampler());
  s->beta_ = beta;
  s->tokens_ = tokens;
  s->k_ = k;
  std::vector<float> query_membership(static_cast<size_t>(tokens) * k);
  s->key_membership_t_.resize(static_cast<size_t>(tokens) * k);
  SigmoidMemberships(query_logits, tokens, k, beta, /*transpose=*/false, query_membership.data());
  SigmoidMemberships(key_logits, tokens, k, beta, /*transpose=*/true, s->key_membership_t_.data());
  const std::vector<float> block_f(block, block + static_cast<size_t>(k) * k);
  s->row_profile_.resize(static_cast<size_t>(tokens) * k);
  MultiplyByBlock(query_membership.data(), tokens, k, block_f.data(), s->row_profile_.data());

  s->key_mass_.assign(k, 0.0);
  for (int b = 0; b < k; ++b) {
    const float* column = s->key_membership_t_.data() + static_cast<size_t>(b) * tokens;
    double total = 0;
    for (int64_t j = 0; j < tokens; ++j) total += column[j];
    s->key_mass_[b] = total;
  }
  s->row_rate_.resize(tokens);
  for (int64_t i = 0; i < tokens; ++i) {
    const float* r = s->row_profile_.data() + i * k;
    double rate = 0;
    for (int b = 0; b < k; ++b) rate += r[b] * s->key_mass_[b];
    s->row_rate_[i] = rate;
    s->expected_multigraph_ += rate;
  }
  AliasScratch scratch;
  s->row_.Build(s->row_rate_.data(), static_cast<int32_t>(tokens), &scratch);
  return s;
}

void SbmHeadSampler::PrepareSampling() {
  if (!key_given_cluster_.empty()) return;
  key_given_cluster_.resize(k_);
  ForEachDynamic<AliasScratch>(
      k_, [] { return AliasScratch(); },
      [&](int64_t b, AliasScratch& scratch) {
        key_given_cluster_[b].Build(key_membership_t_.data() + b * tokens_,
                                    static_cast<int32_t>(tokens_), &scratch);
      });
}

double SbmHeadSampler::EdgeProbability(int64_t query, int64_t key) const {
  const float* r = row_profile_.data() + query * k_;
  double p = 0;
  for (int b = 0; b < k_; ++b) {
    p += static_cast<double>(r[b]) * key_membership_t_[static_cast<size_t>(b) * tokens_ + key];
  }
  return p;
}

namespace {

// −log(1 − e^(−p)): 0 above p = 16 (where it is < 1.2e-7).
float LogInverseInclusionOf(float p) {
  return p > 16 ? 0.0f : -std::log(-std::expm1(-std::max(p, 1e-12f)));
}

// One row's biases: p_ij = r · m_j over k = 8·vectors memberships, eight
// edges at a time through a vector exp and log. For small p, 1 − e^(−p) is
// its series p·(1 − p/2 + p²/6), which keeps the relative precision the
// subtraction would lose.
__attribute__((target("avx2,fma"))) void LogInverseInclusionRowAvx2(const float* r,
                                                                    const float* key_rows, int k,
                                                                    const int32_t* keys,
                                                                    int64_t count, float* out) {
  float p[8];
  for (int64_t start = 0; start < count; start += 8) {
    const int lanes = static_cast<int>(std::min<int64_t>(8, count - start));
    for (int lane = 0; lane < 8; ++lane) {
      if (lane >= lanes) {
        p[lane] = 1;
        continue;
      }
      const float* m = key_rows + static_cast<size_t>(keys[start + lane]) * k;
      __m256 sum = _mm256_mul_ps(_mm256_loadu_ps(r), _mm256_loadu_ps(m));
      for (int b = 8; b < k; b += 8) {
        sum = _mm256_fmadd_ps(_mm256_loadu_ps(r + b), _mm256_loadu_ps(m + b), sum);
      }
      __m128 half = _mm_add_ps(_mm256_castps256_ps128(sum), _mm256_extractf128_ps(sum, 1));
      half = _mm_add_ps(half, _mm_movehl_ps(half, half));
      half = _mm_add_ss(half, _mm_shuffle_ps(half, half, 1));
      p[lane] = std::max(_mm_cvtss_f32(half), 1e-12f);
    }
    const __m256 x = _mm256_loadu_ps(p);
    const __m256 series = _mm256_mul_ps(
        x, _mm256_fmadd_ps(x, _mm256_fmadd_ps(x, _mm256_set1_ps(1.0f / 6), _mm256_set1_ps(-0.5f)),
                           _mm256_set1_ps(1.0f)));
    const __m256 exact =
        _mm256_sub_ps(_mm256_set1_ps(1.0f), Exp256(_mm256_sub_ps(_mm256_setzero_ps(), x)));
    const __m256 small = _mm256_cmp_ps(x, _mm256_set1_ps(0.01f), _CMP_LT_OQ);
    const __m256 inclusion = _mm256_blendv_ps(exact, series, small);
    __m256 bias = _mm256_sub_ps(_mm256_setzero_ps(), Log256(inclusion));
    bias = _mm256_blendv_ps(bias, _mm256_setzero_ps(),
                            _mm256_cmp_ps(x, _mm256_set1_ps(16.0f), _CMP_GT_OQ));
    float result[8];
    _mm256_storeu_ps(result, bias);
    std::copy_n(result, lanes, out + start);
  }
}

}  // namespace

void SbmHeadSampler::LogInverseInclusion(const SbmHeadEdges& edges, float* out) const {
  // Key memberships by token ([tokens, k]) so that each edge reads k
  // contiguous floats.
  std::vector<float> key_rows(static_cast<size_t>(tokens_) * k_);
  for (int b = 0; b < k_; ++b) {
    const float* column = key_membership_t_.data() + static_cast<size_t>(b) * tokens_;
    for (int64_t j = 0; j < tokens_; ++j) key_rows[static_cast<size_t>(j) * k_ + b] = column[j];
  }
  const bool vector = k_ % 8 == 0 && HostCpuFeatures().avx2_fma;
  const int64_t rows = static_cast<int64_t>(edges.row_offsets.size()) - 1;
  at::parallel_for(0, rows, 64, [&](int64_t first, int64_t last) {
    for (int64_t i = first; i < last; ++i) {
      const float* r = row_profile_.data() + i * k_;
      const int64_t begin = edges.row_offsets[i];
      const int64_t count = edges.row_offsets[i + 1] - begin;
      if (vector) {
        LogInverseInclusionRowAvx2(r, key_rows.data(), k_, edges.keys.data() + begin, count,
                                   out + begin);
        continue;
      }
      for (int64_t e = begin; e < begin + count; ++e) {
        const float* m = key_rows.data() + static_cast<size_t>(edges.keys[e]) * k_;
        float p = 0;
        for (int b = 0; b < k_; ++b) p += r[b] * m[b];
        out[e] = LogInverseInclusionOf(p);
      }
    }
  });
}

double SbmHeadSampler::EstimateDistinctRatio(uint64_t key, int samples) const {
  if (!(expected_multigraph_ > 0) || samples <= 0) return 1;
  // j | b by binary search over the key columns' running sums: O(tokens·k)
  // additions to set up, far cheaper than the alias tables sampling needs.
  std::vector<double> cumulative(static_cast<size_t>(k_) * tokens_);
  for (int b = 0; b < k_; ++b) {
    const float* column = key_membership_t_.data() + static_cast<size_t>(b) * tokens_;
    double* sums = cumulative.data() + static_cast<size_t>(b) * tokens_;
    double total = 0;
    for (int64_t j = 0; j < tokens_; ++j) sums[j] = (total += column[j]);
  }
  CounterRng rng(key);
  std::vector<double> weights(k_);
  double sum = 0;
  for (int s = 0; s < samples; ++s) {
    const uint64_t r = rng.Next();
    const int32_t i = row_.Draw(static_cast<uint32_t>(r >> 32));
    const float* profile = row_profile_.data() + static_cast<int64_t>(i) * k_;
    double total = 0;
    for (int b = 0; b < k_; ++b) total += (weights[b] = profile[b] * key_mass_[b]);
    const int32_t b = DrawLinear(weights.data(), k_, total, static_cast<uint32_t>(r));
    const double* sums = cumulative.data() + static_cast<size_t>(b) * tokens_;
    const double u = static_cast<uint32_t>(rng.Next() >> 32) * 0x1.0p-32 * sums[tokens_ - 1];
    const int64_t j =
        std::min<int64_t>(tokens_ - 1, std::upper_bound(sums, sums + tokens_, u) - sums);
    const double p = EdgeProbability(i, j);
    sum += p > 0 ? -std::expm1(-p) / p : 1.0;
  }
  return sum / samples;
}

int64_t SbmHeadSampler::SampleRow(int64_t row, uint64_t head_key, Scratch& scratch,
                                  std::vector<int32_t>* out) const {
  CounterRng rng(DeriveKey(head_key, static_cast<uint64_t>(row)));
  const int64_t copies = SamplePoisson(row_rate_[row], rng);
  if (copies == 0) return 0;
  scratch.row_cluster.Build(row_profile_.data() + row * k_, key_mass_.data());
  scratch.copies.resize(copies);
  scratch.clusters.resize(copies);
  int32_t* keys = scratch.copies.data();
  if (HostCpuFeatures().avx2_fma) {
    DrawCopiesAvx2(scratch.row_cluster, key_given_cluster_.data(), rng, copies,
                   scratch.clusters.data(), keys);
  } else {
    DrawCopiesPortable(scratch.row_cluster, key_given_cluster_.data(), rng, copies,
                       scratch.clusters.data(), keys);
  }
  // Rows go out ascending (edge_plan.h: unions merge them; the executor
  // reads keys in memory order).
  uint64_t* bits = scratch.bitmap.data();
  if (copies * kSortedRowCopies < tokens_) {
    // A very sparse row: keep each key's first copy (test-and-set in the
    // bitmap), clear the bits, sort the few keys: O(copies log copies).
    const size_t first = out->size();
    for (int64_t t = 0; t < copies; ++t) {
      uint64_t& word = bits[keys[t] >> 6];
      const uint64_t bit = uint64_t{1} << (keys[t] & 63);
      if ((word & bit) == 0) out->push_back(keys[t]);
      word |= bit;
    }
    for (size_t e = first; e < out->size(); ++e) bits[(*out)[e] >> 6] = 0;
    std::sort(out->begin() + static_cast<std::ptrdiff_t>(first), out->end());
    return copies;
  }
  // Otherwise set bits and read them back in ascending order,
  // O(copies + span / 64).
  int32_t lowest = keys[0], highest = keys[0];
  for (int64_t t = 0; t < copies; ++t) {
    bits[keys[t] >> 6] |= uint64_t{1} << (keys[t] & 63);
    lowest = std::min(lowest, keys[t]);
    highest = std::max(highest, keys[t]);
  }
  // At most `copies` distinct keys: written through a pointer, not pushed
  // back one by one (a capacity check per edge; 60 million edges a 4,096-token
  // document at 5%).
  const size_t before = out->size();
  out->resize(before + static_cast<size_t>(copies));
  int32_t* write = out->data() + before;
  for (int32_t word = lowest >> 6; word <= highest >> 6; ++word) {
    uint64_t w = bits[word];
    bits[word] = 0;
    while (w != 0) {
      *write++ = word * 64 + __builtin_ctzll(w);
      w &= w - 1;
    }
  }
  out->resize(static_cast<size_t>(write - out->data()));
  return copies;
}

SbmHeadEdges SbmHeadSampler::Sample(uint64_t head_key) const {
  const int64_t chunks = (tokens_ + kChunkRows - 1) / kChunkRows;
  std::vector<std::vector<int32_t>> chunk_keys(chunks);
  std::vector<int64_t> chunk_copies(chunks, 0);
  SbmHeadEdges edges;
  edges.row_offsets.assign(tokens_ + 1, 0);
  const int k = k_;
  const int64_t tokens = tokens_;
  ForEachDynamic<std::unique_ptr<Scratch>>(
      chunks, [&] { return std::make_unique<Scratch>(tokens, k); },
      [&](int64_t chunk, std::unique_ptr<Scratch>& scratch) {
        const int64_t first = chunk * kChunkRows;
        const int64_t last = std::min(tokens, first + kChunkRows);
        std::vector<int32_t>& out = chunk_keys[chunk];
        for (int64_t row = first; row < last; ++row) {
          const size_t before = out.size();
          chunk_copies[chunk] += SampleRow(row, head_key, *scratch, &out);
          edges.row_offsets[row + 1] = static_cast<int64_t>(out.size() - before);
        }
      });
  for (int64_t row = 0; row < tokens_; ++row) edges.row_offsets[row + 1] += edges.row_offsets[row];
  for (int64_t copies : chunk_copies) edges.multigraph_edges += copies;
  edges.keys.resize(edges.row_offsets[tokens_]);
  at::parallel_for(0, chunks, 1, [&](int64_t begin, int64_t end) {
    for (int64_t chunk = begin; chunk < end; ++chunk) {
      if (chunk_keys[chunk].empty()) continue;
      std::memcpy(edges.keys.data() + edges.row_offsets[chunk * kChunkRows],
                  chunk_keys[chunk].data(), chunk_keys[chunk].size() * sizeof(int32_t));
    }
  });
  return edges;
}

}  // namespace docsparse
