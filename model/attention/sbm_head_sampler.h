// fastRG sampling (Rohe, Tao, Tan & Zhang 2018; Cho et al. 2022, Alg. 1) of
// one head's bipartite query-key graph from its SBM, in time linear in the
// number of sampled edges, plus an importance-sampling estimate of the
// expected number of distinct edges.
//
// The multigraph has Poisson(p_ij) copies of edge ij, independently, with
// p_ij = Q̂_i S K̂_jᵀ. Algorithm 1 draws m ~ Poisson(Σ p) and then each copy by
// cluster pair and endpoints. We draw the same process split by query, which
// gives CSR by query directly and lets rows run in parallel:
//   κ_b = Σ_j K̂_jb,  R = Q̂ S                  (R: [n, k], one small GEMM)
//   λ_i = Σ_b R_ib κ_b                         (row rates; Σ_i λ_i = 1ᵀB̄1)
//   m_i ~ Poisson(λ_i)                         (so m = Σ m_i ~ Poisson(Σ p))
//   per copy: b ~ R_ib κ_b / λ_i,  j | b ~ K̂_jb / κ_b
// and P(j | i) = Σ_b R_ib K̂_jb / λ_i = p_ij / λ_i, so row i's copies of ij
// are Poisson(p_ij), independent over j (Poisson thinning): the distribution
// of Algorithm 1. The key side is fastRG's column-normalised K̄ (one alias
// table per cluster); on the query side, summing the query cluster out per
// row (R) leaves two O(1) draws per copy instead of three. Copies are
// deduplicated, so edge ij is present with probability 1 − exp(−p_ij).
//
// Randomness: row i of a head uses the counter-based stream
// DeriveKey(head_key, i), so a plan is a pure function of (memberships,
// block matrix, β, head_key), whatever the number of threads.
#ifndef DOCSPARSE_MODEL_ATTENTION_SBM_HEAD_SAMPLER_H_
#define DOCSPARSE_MODEL_ATTENTION_SBM_HEAD_SAMPLER_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "kernels/sbm_sampling.h"

namespace docsparse {

// One head's sampled graph over its item's real tokens, CSR by query.
struct SbmHeadEdges {
  std::vector<int64_t> row_offsets;  // [tokens + 1]
  // Distinct and ascending within a row.
  std::vector<int32_t> keys;
  int64_t multigraph_edges = 0;  // m = Σ m_i, copies drawn before deduplication

  int64_t edges() const { return static_cast<int64_t>(keys.size()); }
};

// The sampling tables of one head at one β. Immutable after Build; Sample
// and the estimates are const and may run concurrently.
class SbmHeadSampler {
 public:
  // query_logits, key_logits: [tokens, k] = MLP(q)·Cᵀ and MLP(k)·Cᵀ of real
  // tokens only (padding never becomes a node); block: S [k, k]. Borrowed
  // only during the call. O(tokens·k + k²): memberships and rates, enough
  // for the expectations; PrepareSampling adds the key-side alias tables.
  static std::unique_ptr<SbmHeadSampler> Build(const float* query_logits, const float* key_logits,
                                               int64_t tokens, int k, const double* block,
                                               double beta);
  // Builds the k alias tables over keys that Sample needs (O(tokens·k), the
  // dearest part of a build, so the planner pays it only at the final β).
  void PrepareSampling();

  double beta() const { return beta_; }
  int64_t tokens() const { return tokens_; }
  // E[m] = Σ_ij p_ij = Σ_i λ_i.
  double expected_multigraph_edges() const { return expected_multigraph_; }
  // p_ij, exactly (O(k²)); for tests and the importance sampler.
  double EdgeProbability(int64_t query, int64_t key) const;

  // E[distinct edges] / E[m] = E_(i,j)~p/Σp [(1 − e^(−p_ij)) / p_ij],
  // estimated from `samples` pairs drawn as the sampler draws edges (the
  // ratio lies in [0.63, 1], so a few hundred samples give ~1%).
  // Deterministic in `key`. 1 when E[m] = 0.
  double EstimateDistinctRatio(uint64_t key, int samples) const;

  // Draws the graph with streams derived from `head_key`, rows split into
  // fixed chunks run with at::parallel_for. Requires PrepareSampling().
  SbmHeadEdges Sample(uint64_t head_key) const;

  // −log(1 − e^(−p_ij)) for each edge of `edges` (CSR by query over this
  // head's tokens), into `out` [edges.edges()]: the log inverse chance that
  // the sampler draws edge ij. O(k) per edge, rows in parallel.
  void LogInverseInclusion(const SbmHeadEdges& edges, float* out) const;

  // The tables Sample draws from, for sampling on a device
  // (model/attention/sbm_device_sampling.h): λ [tokens], R = Q̂ S [tokens, k],
  // κ [k], and each cluster's alias table over keys (PrepareSampling's).
  int num_clusters() const { return k_; }
  const double* row_rate() const { return row_rate_.data(); }
  const float* row_profile() const { return row_profile_.data(); }
  const double* key_mass() const { return key_mass_.data(); }
  const AliasTable& key_alias(int cluster) const { return key_given_cluster_[cluster]; }
  bool prepared() const { return static_cast<int>(key_given_cluster_.size()) == k_; }

 private:
  SbmHeadSampler() = default;
  // Appends row `row`'s distinct keys to `out`; returns the
  // copies drawn. `scratch` holds per-thread buffers.
  struct Scratch;
  int64_t SampleRow(int64_t row, uint64_t head_key, Scratch& scratch,
                    std::vector<int32_t>* out) const;

  double beta_ = 0;
  int64_t tokens_ = 0;
  int k_ = 0;
  std::vector<float> row_profile_;       // R = Q̂ S [tokens, k]
  std::vector<float> key_membership_t_;  // K̂ᵀ [k, tokens]
  std::vector<double> key_mass_;         // κ [k]
  std::vector<double> row_rate_;         // λ [tokens]
  double expected_multigraph_ = 0;
  std::vector<AliasTable> key_given_cluster_;  // [k]: j | b ∝ K̂_jb
  AliasTable row_;                             // i ∝ λ_i (importance sampling)
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_SBM_HEAD_SAMPLER_H_
