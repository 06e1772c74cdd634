// The SBM planner for one batch item at one layer (DESIGN.md, "SBM,
// precisely" and "Budgets"): node memberships from the queries and keys, the
// edge regularization β chosen from the budget, and per head a bipartite
// query-key graph sampled by fastRG (model/attention/sbm_head_sampler.h), CSR by query,
// over the item's real tokens only (padding never becomes a node).
//
//   S  = softmax over all k² entries of C·Cᵀ           (per head, precomputed)
//   Q̂  = σ(MLP(Q)·Cᵀ − β),  K̂ = σ(MLP(K)·Cᵀ − β)
//   p_ij = Q̂_i S K̂_jᵀ;  E[m] = Σ_ij p_ij = Σ_ab S_ab (Σ_i Q̂_ia)(Σ_j K̂_jb)
//
// β from a density target: E[m](β) is decreasing in β and costs O(nk + k²)
// per head to evaluate (column sums of Q̂ and K̂), so β is found by bisection
// on [0, ∞) with Newton steps in log E[m] while they stay inside the bracket
// (converging in a handful of evaluations instead of ~40). Sampling then
// deduplicates, and the expected number of distinct edges is Σ(1 − e^(−p_ij)),
// which is below E[m] where probabilities are large: the target is met on the
// distinct edges (what density counts) by re-solving for E[m] = target / r,
// with r = E[distinct]/E[m] estimated by importance sampling at the current β
// (at most three rounds; one when the graph is sparse enough that r ≈ 1).
#ifndef DOCSPARSE_MODEL_ATTENTION_SBM_PLANNER_H_
#define DOCSPARSE_MODEL_ATTENTION_SBM_PLANNER_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <memory>
#include <vector>

#include "model/attention/sbm_head_sampler.h"
#include "model/attention/sbm_parameters.h"

namespace docsparse {

// MLP(x)·Cᵀ for the queries and keys of one item at one layer, before β.
struct SbmMembershipLogits {
  at::Tensor query;  // [heads, tokens, k], contiguous float32
  at::Tensor key;    // [heads, tokens, k], contiguous float32
};

// query, key: [heads, tokens, head_dim] float32 (real tokens only).
SbmMembershipLogits ComputeSbmMembershipLogits(const SbmLayerParameters& layer,
                                               const at::Tensor& query, const at::Tensor& key);

struct SbmBudget {
  // β when no target is set (0 = the model as calibrated; larger is sparser).
  double edge_regularization = 0;
  // > 0: the layer's expected density (distinct edges over all heads / (heads
  // · tokens²)) is at most this; β >= 0 is solved and edge_regularization is
  // ignored. A model sparser than the target at β = 0 keeps β = 0.
  double target_density = 0;
  // The floor (DESIGN.md "Budgets": every planner's cheapest admissible
  // plan): a β or target that leaves fewer expected distinct edges than this
  // many per query (per head, on average over heads; at most every key) is
  // raised to it. A row with no edge outputs zeros, so below a few edges per
  // query the layer computes next to nothing.
  double min_edges_per_query = 0;
};

// What the planner chose for the layer, before any head is sampled.
struct SbmLayerDecision {
  double beta = 0;
  std::vector<double> head_expected_multigraph_edges;  // [heads] Σ_ij p_ij
  // [heads] Σ_ij (1 − e^(−p_ij)): E[m] times the importance-sampled ratio.
  std::vector<double> head_expected_edges;
  // Work done, for the FLOP count: evaluations of E[m] over every head
  // (each a pass over 2·heads·tokens·k memberships), sampler builds per head,
  // importance samples over all heads.
  int membership_passes = 0;
  int table_builds = 0;
  int64_t importance_samples = 0;
  // The budget's β or target left fewer edges than its floor, and the floor
  // ran instead.
  bool raised_to_floor = false;

  double ExpectedEdges() const;
  double ExpectedDensity(int64_t tokens) const;
};

// The stream key of (seed, layer); head h samples with DeriveKey(key, h).
// Independent of the batch and of the item's position in it, so a document
// gets the same plan however it is batched.
uint64_t SbmLayerKey(uint64_t seed, int layer);

// One item at one layer. Not thread-safe (Decide then SampleHead, in order);
// uses at::parallel_for inside, and its result does not depend on the number
// of threads.
class SbmLayerPlanner {
 public:
  // Importance samples per head for each estimate of E[distinct] / E[m].
  static constexpr int kImportanceSamples = 256;

  // Borrows `logits` and `block` ([heads, k, k], S per head) for its lifetime.
  SbmLayerPlanner(const SbmMembershipLogits& logits, const std::vector<double>& block);

  int num_heads() const { return heads_; }
  int64_t tokens() const { return tokens_; }
  int num_clusters() const { return k_; }

  // E[m] at β for one head and summed over heads; O(nk + k²) per head.
  double ExpectedMultigraphEdges(int head, double beta) const;
  double ExpectedMultigraphEdges(double beta) const;

  // Chooses β from the budget and builds every head's sampler at it.
  SbmLayerDecision Decide(const SbmBudget& budget, uint64_t layer_key);
  // Head `head`'s graph at the decided β; frees the head's tables. Call
  // after Decide, once per head.
  // Rows come back ascending. With `inclusion_bias`, it gets −log π_ij per
  // edge (π_ij = 1 − e^(−p_ij), the edge's chance of being drawn).
  SbmHeadEdges SampleHead(int head, std::vector<float>* inclusion_bias = nullptr);
  // The decided head's sampler (null before Decide or after SampleHead or
  // DropHead).
  const SbmHeadSampler* sampler(int head) const { return samplers_[head].get(); }
  // The stream key SampleHead draws head `head` with (for a device sampler
  // drawing the same graph).
  uint64_t HeadKey(int head) const;
  // Frees head `head`'s tables once it was sampled elsewhere (on a device).
  void DropHead(int head) { samplers_[head].reset(); }

 private:
  struct Evaluation {
    double edges = 0;  // Σ_h E[m_h]
    double slope = 0;  // d/dβ of edges (negative)
    std::vector<double> head_edges;
  };
  Evaluation Evaluate(double beta) const;
  // β >= lo with Σ_h E[m_h](β) = goal (relative 1e-3), given F(lo) > goal.
  double Solve(double goal, double lo, Evaluation at_lo, int* passes) const;
  // Builds every head's sampler at β; returns Σ_h E[m_h]·r_h / Σ_h E[m_h]
  // and fills the decision's per-head expectations.
  double BuildSamplers(double beta, int round, SbmLayerDecision* decision);
  // The alias tables sampling needs, for the decided β only.
  void PrepareSamplers();

  const SbmMembershipLogits& logits_;
  const std::vector<double>& block_;
  int heads_ = 0;
  int64_t tokens_ = 0;
  int k_ = 0;
  uint64_t layer_key_ = 0;
  std::vector<std::unique_ptr<SbmHeadSampler>> samplers_;
};

// The planner's FLOP-equivalent operations for one item at one layer, the
// SBM overhead on top of 4·head_dim per attended edge (cost_model.h):
//   memberships (MLP and cluster logits, queries and keys):
//       heads · (8·n·d² + 4·n·d·k)
//   each evaluation of E[m] (σ and two running sums per entry):
//       passes · heads · 2·n·k · 4
//   each sampler build (memberships, column and row rates, alias tables):
//       builds · heads · (2·n·k · 4 + 4·n·k + 2·k²)
//   importance samples: samples · 2·(k² + k)
//   fastRG: 4 per multigraph copy drawn (three alias draws and a dedup step)
// with n real tokens, d = head_dim, k clusters.
struct SbmPlannerWork {
  int64_t tokens = 0;
  int heads = 0;
  int head_dim = 0;
  int clusters = 0;
  int membership_passes = 0;
  int table_builds = 0;
  int64_t importance_samples = 0;
  int64_t multigraph_edges = 0;
};
double SbmPlannerFlops(const SbmPlannerWork& work);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_SBM_PLANNER_H_
