#include "model/attention/sbm_planner.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "kernels/sbm_sampling.h"
#include "model/attention/sbm_memberships.h"

namespace docsparse {
namespace {

// Relative tolerance of the β solve on E[m], and of the outer rounds on the
// deduplication ratio: both well inside the 10% a budget promises.
constexpr double kSolveTolerance = 1e-3;
constexpr double kRatioTolerance = 0.01;
constexpr int kMaxRounds = 3;
// Domain separation of the stream labels.
constexpr uint64_t kSbmDomain = 0x53424d2d706c616eULL;  // "SBM-plan"
constexpr uint64_t kImportanceLabel = uint64_t{1} << 63;

}  // namespace

SbmMembershipLogits ComputeSbmMembershipLogits(const SbmLayerParameters& layer,
                                               const at::Tensor& query, const at::Tensor& key) {
  auto logits = [&](const at::Tensor& x) {
    at::Tensor hidden = at::relu(at::linear(x, layer.mlp_in_weight, layer.mlp_in_bias));
    at::Tensor node = at::linear(hidden, layer.mlp_out_weight, layer.mlp_out_bias);
    return at::matmul(node, layer.clusters.transpose(1, 2)).contiguous();
  };
  return {logits(query), logits(key)};
}

double SbmLayerDecision::ExpectedEdges() const {
  double total = 0;
  for (double edges : head_expected_edges) total += edges;
  return total;
}

double SbmLayerDecision::ExpectedDensity(int64_t tokens) const {
  if (tokens == 0 || head_expected_edges.empty()) return 0;
  const double pairs = static_cast<double>(tokens) * static_cast<double>(tokens);
  return ExpectedEdges() / (pairs * static_cast<double>(head_expected_edges.size()));
}

uint64_t SbmLayerKey(uint64_t seed, int layer) {
  return DeriveKey(DeriveKey(seed, kSbmDomain), static_cast<uint64_t>(layer));
}

SbmLayerPlanner::SbmLayerPlanner(const SbmMembershipLogits& logits,
                                 const std::vector<double>& block)
    : logits_(logits),
      block_(block),
      heads_(static_cast<int>(logits.query.size(0))),
      tokens_(logits.query.size(1)),
      k_(static_cast<int>(logits.query.size(2))),
      samplers_(heads_) {}

SbmLayerPlanner::Evaluation SbmLayerPlanner::Evaluate(double beta) const {
  // Column sums and slopes of Q̂ (task 2h) and K̂ (task 2h + 1).
  std::vector<double> sums(static_cast<size_t>(2 * heads_) * k_, 0.0);
  std::vector<double> slopes(sums.size(), 0.0);
  const float* query = logits_.query.data_ptr<float>();
  const float* key = logits_.key.data_ptr<float>();
  const int64_t head_stride = tokens_ * k_;
  at::parallel_for(0, 2 * heads_, 1, [&](int64_t begin, int64_t end) {
    for (int64_t task = begin; task < end; ++task) {
      const float* source = (task % 2 == 0 ? query : key) + (task / 2) * head_stride;
      AddSigmoidColumnSums(source, tokens_, k_, beta, sums.data() + task * k_,
                           slopes.data() + task * k_);
    }
  });
  Evaluation result;
  result.head_edges.resize(heads_);
  for (int h = 0; h < heads_; ++h) {
    const double* cq = sums.data() + (2 * h) * k_;
    const double* ck = sums.data() + (2 * h + 1) * k_;
    const double* sq = slopes.data() + (2 * h) * k_;
    const double* sk = slopes.data() + (2 * h + 1) * k_;
    const double* s = block_.data() + static_cast<size_t>(h) * k_ * k_;
    double edges = 0, slope = 0;
    for (int a = 0; a < k_; ++a) {
      for (int b = 0; b < k_; ++b) {
        edges += s[a * k_ + b] * cq[a] * ck[b];
        // dσ/dβ = −σ(1 − σ) on both sides.
        slope -= s[a * k_ + b] * (sq[a] * ck[b] + cq[a] * sk[b]);
      }
    }
    result.head_edges[h] = edges;
    result.edges += edges;
    result.slope += slope;
  }
  return result;
}

double SbmLayerPlanner::ExpectedMultigraphEdges(int head, double beta) const {
  return Evaluate(beta).head_edges[head];
}

double SbmLayerPlanner::ExpectedMultigraphEdges(double beta) const { return Evaluate(beta).edges; }

double SbmLayerPlanner::Solve(double goal, double lo, Evaluation at_lo, int* passes) const {
  double hi = std::numeric_limits<double>::infinity();
  double beta = lo;
  Evaluation current = std::move(at_lo);
  double step = 1;  // growth of the bracket while no upper end is known
  for (int iteration = 0; iteration < 100; ++iteration) {
    // Newton on log E[m] − log goal: log E[m] is close to linear in β once
    // the memberships are in their exponential tail (slope → −2).
    double candidate = std::numeric_limits<double>::quiet_NaN();
    if (current.edges > 0 && current.slope < 0) {
      candidate = beta - (std::log(current.edges) - std::log(goal)) * current.edges / current.slope;
    }
    if (std::isinf(hi)) {
      if (!(candidate > lo)) candidate = lo + step;
      candidate = std::min(candidate, lo + 64);
      step *= 2;
    } else if (!(candidate > lo && candidate < hi)) {
      candidate = 0.5 * (lo + hi);
    }
    beta = candidate;
    current = Evaluate(beta);
    ++*passes;
    if (std::fabs(current.edges / goal - 1) < kSolveTolerance) return beta;
    if (current.edges > goal) {
      lo = beta;
    } else {
      hi = beta;
    }
    if (hi - lo < 1e-9 * std::max(1.0, std::fabs(hi))) break;
  }
  // Out of steps (E[m] flat to float precision): the sparser end of the
  // bracket meets the cap.
  return std::isinf(hi) ? beta : hi;
}

double SbmLayerPlanner::BuildSamplers(double beta, int round, SbmLayerDecision* decision) {
  const float* query = logits_.query.data_ptr<float>();
  const float* key = logits_.key.data_ptr<float>();
  const int64_t head_stride = tokens_ * k_;
  std::vector<double> ratios(heads_, 1.0);
  at::parallel_for(0, heads_, 1, [&](int64_t begin, int64_t end) {
    for (int64_t h = begin; h < end; ++h) {
      samplers_[h] = SbmHeadSampler::Build(query + h * head_stride, key + h * head_stride, tokens_,
                                           k_, block_.data() + h * k_ * k_, beta);
      const uint64_t stream = DeriveKey(DeriveKey(layer_key_, kImportanceLabel),
                                        static_cast<uint64_t>(round * heads_ + h));
      ratios[h] = samplers_[h]->EstimateDistinctRatio(stream, kImportanceSamples);
    }
  });
  decision->beta = beta;
  decision->head_expected_multigraph_edges.assign(heads_, 0.0);
  decision->head_expected_edges.assign(heads_, 0.0);
  ++decision->table_builds;
  decision->importance_samples += static_cast<int64_t>(heads_) * kImportanceSamples;
  double multigraph = 0, distinct = 0;
  for (int h = 0; h < heads_; ++h) {
    const double edges = samplers_[h]->expected_multigraph_edges();
    decision->head_expected_multigraph_edges[h] = edges;
    decision->head_expected_edges[h] = edges * ratios[h];
    multigraph += edges;
    distinct += edges * ratios[h];
  }
  return multigraph > 0 ? distinct / multigraph : 1.0;
}

SbmLayerDecision SbmLayerPlanner::Decide(const SbmBudget& budget, uint64_t layer_key) {
  layer_key_ = layer_key;
  SbmLayerDecision decision;
  const double pairs = static_cast<double>(tokens_) * static_cast<double>(tokens_);
  // The floor in expected distinct edges over all heads (never above dense).
  const double floor =
      std::min(budget.min_edges_per_query * static_cast<double>(tokens_), pairs) * heads_;
  double target = budget.target_density * pairs * heads_;
  if (!(budget.target_density > 0)) {
    BuildSamplers(budget.edge_regularization, 0, &decision);
    // β as asked, unless it leaves fewer edges than the floor: then the
    // densest β that stays at the floor (solved below).
    if (!(decision.ExpectedEdges() < floor) || budget.edge_regularization <= 0) {
      PrepareSamplers();
      return decision;
    }
    decision.raised_to_floor = true;
    target = floor;
  }
  Evaluation at_zero = Evaluate(0);
  ++decision.membership_passes;
  // A target below the floor is raised to it, where that changes the plan
  // (a model sparser than the target at β = 0 runs β = 0 either way).
  if (target < floor && at_zero.edges > target) {
    decision.raised_to_floor = true;
    target = floor;
  }
  double goal = target;
  double beta = 0;
  for (int round = 0; round < kMaxRounds; ++round) {
    beta = at_zero.edges > goal ? Solve(goal, 0, at_zero, &decision.membership_passes) : 0.0;
    const double ratio = BuildSamplers(beta, round, &decision);
    // Already sparse enough at β = 0, or the expectation of distinct edges
    // is on target: done.
    if (beta == 0 && at_zero.edges * ratio <= target) break;
    const double next_goal = target / ratio;
    if (std::fabs(next_goal / goal - 1) < kRatioTolerance) break;
    goal = next_goal;
  }
  PrepareSamplers();
  return decision;
}

void SbmLayerPlanner::PrepareSamplers() {
  at::parallel_for(0, heads_, 1, [&](int64_t begin, int64_t end) {
    for (int64_t h = begin; h < end; ++h) samplers_[h]->PrepareSampling();
  });
}

uint64_t SbmLayerPlanner::HeadKey(int head) const {
  return DeriveKey(layer_key_, static_cast<uint64_t>(head));
}

SbmHeadEdges SbmLayerPlanner::SampleHead(int head, std::vector<float>* inclusion_bias) {
  const SbmHeadSampler& sampler = *samplers_[head];
  SbmHeadEdges edges = sampler.Sample(HeadKey(head));
  if (inclusion_bias != nullptr) {
    // Edge ij is present with probability π = 1 − e^(−p_ij); weighting it
    // by 1/π (adding −log π to its score) makes the row's softmax a
    // Horvitz-Thompson estimate of the dense one's sums.
    inclusion_bias->resize(edges.keys.size());
    sampler.LogInverseInclusion(edges, inclusion_bias->data());
  }
  samplers_[head].reset();
  return edges;
}

double SbmPlannerFlops(const SbmPlannerWork& w) {
  const double n = static_cast<double>(w.tokens);
  const double d = w.head_dim;
  const double k = w.clusters;
  const double h = w.heads;
  const double memberships = h * (8 * n * d * d + 4 * n * d * k);
  const double passes = w.membership_passes * h * 2 * n * k * 4;
  const double builds = w.table_builds * h * (2 * n * k * 4 + 4 * n * k + 2 * k * k);
  const double importance = static_cast<double>(w.importance_samples) * 2 * (k * k + k);
  const double sampling = 4 * static_cast<double>(w.multigraph_edges);
  return memberships + passes + builds + importance + sampling;
}

}  // namespace docsparse
