// SBM attention (Cho et al., NeurIPS 2022) as an AttentionMechanism: per
// item, layer and head, a query-key graph sampled by the SBM planner
// (model/attention/sbm_planner.h) and a masked softmax over exactly its edges
// (kernels/edge_attention.h). Cost is linear in the sampled edges; no
// n x n matrix is formed.
//
// Per item it reads ItemAttentionOptions (model/attention/attention.h):
//   knobs.target_density > 0   β solved per layer so that the expected
//                              density over the item's real tokens, all
//                              heads, is at most this (max_density budgets;
//                              see SbmTargetDensityForAttentionFlops for FLOP
//                              caps);
//   knobs.edge_regularization  β otherwise (0 = as calibrated, larger =
//                              sparser);
//   knobs.inclusion_correction 1: each sampled edge's score gets
//                              −log π_ij, π_ij = 1 − e^(−p_ij) its chance of
//                              being drawn, so that the row's softmax is a
//                              Horvitz-Thompson estimate of the dense one
//                              (not in the paper; the planner's default);
//                              0 (this mechanism's default): the paper's
//                              softmax over the drawn edges;
//   seed                       the sampling seed (the request's seed, else
//                        SbmSeedFromRequestId): same seed, same document,
//                        same plan, for any batch and thread count.
// Items without options use SbmAttentionOptions' knobs and seed 0.
//
// Per item and layer it reports (ItemAttentionCost):
//   head_edges[h]           distinct edges sampled (real tokens only), what
//                           the executor computed;
//   head_expected_edges[h]  Σ_ij (1 − e^(−p_ij)) at the chosen β, the
//                           expectation of head_edges before sampling;
//   planner_flops           SbmPlannerFlops (model/attention/sbm_planner.h):
//                           memberships, β solve, tables, sampling; with the
//                           correction, 2k + 4 more per edge;
//   raised_to_floor         the budget asked for less than the floor below.
#ifndef DOCSPARSE_MODEL_ATTENTION_SBM_ATTENTION_H_
#define DOCSPARSE_MODEL_ATTENTION_SBM_ATTENTION_H_

#include <cstdint>
#include <memory>
#include <string_view>
#include <vector>

#include "model/attention/attention.h"
#include "model/attention/cost_model.h"
#include "model/attention/edge_plan.h"
#include "model/attention/sbm_parameters.h"

namespace docsparse {

// SBM's knobs (ItemAttentionOptions::knobs).
inline constexpr char kSbmEdgeRegularizationKnob[] = "edge_regularization";
inline constexpr char kSbmTargetDensityKnob[] = "target_density";
// 1: each sampled edge's score gets −log of its inclusion probability, so
// the softmax estimates the keys left out (Horvitz-Thompson); 0: as the paper
// (see below).
inline constexpr char kSbmInclusionCorrectionKnob[] = "inclusion_correction";

struct SbmAttentionOptions {
  // Threads for the planner's and executor's loops; 0 = at::get_num_threads()
  // at each call.
  int num_threads = 0;
  // The knobs of items without ItemAttentionOptions, and under each item's
  // own (those items sample with seed 0).
  AttentionKnobValues knobs;
};

// `parameters` must match the encoder the mechanism is plugged into (layers,
// heads, head_dim; SbmParameters::Load checks that). Forward throws
// c10::Error (which Encoder::Forward turns into a Status) when inputs do not
// match them.
std::unique_ptr<AttentionMechanism> MakeSbmAttention(
    std::shared_ptr<const SbmParameters> parameters, SbmAttentionOptions options = {});

// SBM's plans as lists of pairs (model/attention/edge_plan.h), for unions
// of plans: the same knobs, seeds and cost as MakeSbmAttention's, with the
// planner's keys sorted within each row.
std::shared_ptr<const EdgePlanner> MakeSbmEdgePlanner(
    std::shared_ptr<const SbmParameters> parameters);

// SBM's floor (the cheapest plan it admits; DESIGN.md "Budgets"): a
// budget's β or density target that would leave fewer expected distinct
// edges than this per query (per head, on average) is raised to it, and the
// cost report says the budget was not met. Below it rows go empty (a row
// with no edge outputs zeros) and the layer computes next to nothing: at
// max_density 1e-9 an embedding came out at cosine 0.43 to the unbudgeted
// one. 4 leaves ~2% of rows empty (e^-4), and is 0.8% of a 512-token
// window's pairs: below the 1% where calibrated MiniLM-SBM still keeps a
// cosine of 0.62 (docs/BENCHMARKS.md, SBM calibration), so the budgets that
// table measures all stay admissible.
inline constexpr double kSbmMinEdgesPerQuery = 4;

// The mean density SBM's floor plans for sequences of `tokens` real tokens:
// Σ min(4·n, n²) / Σ n². A max_density below it cannot be met.
double SbmFloorDensity(const std::vector<int64_t>& tokens);

// A sampling seed from a request id when the request brings none (FNV-1a
// then a 64-bit mix): stable across processes and versions.
uint64_t SbmSeedFromRequestId(std::string_view request_id);

// The density target that keeps a whole SBM encoder pass over `tokens` real
// tokens within `max_attention_flops` attention FLOPs (4·head_dim per edge
// plus planner overhead, cost_model.h), assuming the planner's usual work
// (one membership pass per Newton step, ~8 steps, one sampler build, and
// multigraph copies ≈ edges). Returns 0 when even an empty graph exceeds the
// cap (the memberships alone cost more): the caller then runs the sparsest
// plan it allows and reports budget_met = false. Clamped to at most 1.
double SbmTargetDensityForAttentionFlops(double max_attention_flops, int64_t tokens,
                                         const EncoderShape& shape, int num_clusters);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_SBM_ATTENTION_H_
