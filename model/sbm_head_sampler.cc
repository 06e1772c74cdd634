#include "model/sbm_head_sampler.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <functional>

#include "model/sbm_memberships.h"

namespace docsparse {
namespace {

// Rows per work item. Fixed (not derived from the thread count) so that the
// output layout, and with the per-row streams the plan, is the same for any
// number of threads.
constexpr int64_t kChunkRows = 64;

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
int32_t DrawLinear(const double* weights, int k, double total, CounterRng& rng) {
  double u = rng.Uniform() * total;
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

struct SbmHeadSampler::Scratch {
  explicit Scratch(int64_t tokens, int k) : bitmap((tokens + 63) / 64, 0), weights(k), copies() {}
  std::vector<uint64_t> bitmap;  // [ceil(tokens / 64)], all zero between rows
  std::vector<double> weights;   // [k]
  std::vector<int32_t> copies;   // the row's keys before deduplication
  AliasTable row_cluster;
  AliasScratch alias_scratch;
};

std::unique_ptr<SbmHeadSampler> SbmHeadSampler::Build(const float* query_logits,
                                                      const float* key_logits, int64_t tokens,
                                                      int k, const double* block, double beta) {
  std::unique_ptr<SbmHeadSampler> s(new SbmHeadSampler());
  s->beta_ = beta;
  s->tokens_ = tokens;
  s->k_ = k;
  s->block_.assign(block, block + static_cast<size_t>(k) * k);
  s->query_membership_.resize(static_cast<size_t>(tokens) * k);
  s->key_membership_t_.resize(static_cast<size_t>(tokens) * k);
  SigmoidMemberships(query_logits, tokens, k, beta, /*transpose=*/false,
                     s->query_membership_.data());
  SigmoidMemberships(key_logits, tokens, k, beta, /*transpose=*/true, s->key_membership_t_.data());

  std::vector<double> key_mass(k, 0.0);  // κ_b
  for (int b = 0; b < k; ++b) {
    const float* column = s->key_membership_t_.data() + static_cast<size_t>(b) * tokens;
    double total = 0;
    for (int64_t j = 0; j < tokens; ++j) total += column[j];
    key_mass[b] = total;
  }
  s->cluster_rate_.assign(k, 0.0);
  std::vector<double> pair_weights(static_cast<size_t>(k) * k);
  for (int a = 0; a < k; ++a) {
    for (int b = 0; b < k; ++b) {
      pair_weights[a * k + b] = block[a * k + b] * key_mass[b];
      s->cluster_rate_[a] += pair_weights[a * k + b];
    }
  }
  s->row_rate_.resize(tokens);
  for (int64_t i = 0; i < tokens; ++i) {
    const float* q = s->query_membership_.data() + i * k;
    double rate = 0;
    for (int a = 0; a < k; ++a) rate += q[a] * s->cluster_rate_[a];
    s->row_rate_[i] = rate;
    s->expected_multigraph_ += rate;
  }

  AliasScratch scratch;
  s->partner_.resize(k);
  for (int a = 0; a < k; ++a) s->partner_[a].Build(pair_weights.data() + a * k, k, &scratch);
  s->row_.Build(s->row_rate_.data(), static_cast<int32_t>(tokens), &scratch);
  s->key_given_cluster_.resize(k);
  SbmHeadSampler* raw = s.get();
  ForEachDynamic<std::pair<std::vector<double>, AliasScratch>>(
      k, [&] { return std::make_pair(std::vector<double>(tokens), AliasScratch()); },
      [&](int64_t b, std::pair<std::vector<double>, AliasScratch>& state) {
        const float* column = raw->key_membership_t_.data() + b * tokens;
        std::copy(column, column + tokens, state.first.begin());
        raw->key_given_cluster_[b].Build(state.first.data(), static_cast<int32_t>(tokens),
                                         &state.second);
      });
  return s;
}

double SbmHeadSampler::EdgeProbability(int64_t query, int64_t key) const {
  const float* q = query_membership_.data() + query * k_;
  double p = 0;
  for (int a = 0; a < k_; ++a) {
    double inner = 0;
    for (int b = 0; b < k_; ++b) {
      inner += block_[a * k_ + b] * key_membership_t_[static_cast<size_t>(b) * tokens_ + key];
    }
    p += q[a] * inner;
  }
  return p;
}

double SbmHeadSampler::EstimateDistinctRatio(uint64_t key, int samples) const {
  if (!(expected_multigraph_ > 0) || samples <= 0) return 1;
  CounterRng rng(key);
  std::vector<double> weights(k_);
  double sum = 0;
  for (int s = 0; s < samples; ++s) {
    const int32_t i = row_.Draw(rng.Next());
    const float* q = query_membership_.data() + static_cast<int64_t>(i) * k_;
    double total = 0;
    for (int a = 0; a < k_; ++a) total += (weights[a] = q[a] * cluster_rate_[a]);
    const int32_t a = DrawLinear(weights.data(), k_, total, rng);
    const int32_t b = partner_[a].Draw(rng.Next());
    const int32_t j = key_given_cluster_[b].Draw(rng.Next());
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
  const float* q = query_membership_.data() + row * k_;
  double total = 0;
  for (int a = 0; a < k_; ++a) total += (scratch.weights[a] = q[a] * cluster_rate_[a]);
  // An alias table over the row's clusters pays off once the row draws about
  // as many copies as there are clusters.
  const bool alias = copies >= k_;
  if (alias) scratch.row_cluster.Build(scratch.weights.data(), k_, &scratch.alias_scratch);
  scratch.copies.resize(copies);
  for (int64_t t = 0; t < copies; ++t) {
    const int32_t a = alias ? scratch.row_cluster.Draw(rng.Next())
                            : DrawLinear(scratch.weights.data(), k_, total, rng);
    const int32_t b = partner_[a].Draw(rng.Next());
    scratch.copies[t] = key_given_cluster_[b].Draw(rng.Next());
  }
  // Deduplicate into ascending order: sort a short row; for a long one set
  // bits in a per-thread bitmap and read them back, O(copies + span / 64).
  if (copies * 256 < tokens_) {
    std::sort(scratch.copies.begin(), scratch.copies.end());
    const auto end = std::unique(scratch.copies.begin(), scratch.copies.end());
    out->insert(out->end(), scratch.copies.begin(), end);
    return copies;
  }
  int32_t lowest = scratch.copies[0], highest = scratch.copies[0];
  uint64_t* bits = scratch.bitmap.data();
  for (int32_t key : scratch.copies) {
    bits[key >> 6] |= uint64_t{1} << (key & 63);
    lowest = std::min(lowest, key);
    highest = std::max(highest, key);
  }
  for (int32_t word = lowest >> 6; word <= highest >> 6; ++word) {
    uint64_t w = bits[word];
    bits[word] = 0;
    while (w != 0) {
      out->push_back(word * 64 + __builtin_ctzll(w));
      w &= w - 1;
    }
  }
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
