// The SBM planner, statistically: over many seeds, sampled edge frequencies
// match 1 − e^(−p_ij) (chi-square), the multigraph edge count averages E[m]
// and the distinct count Σ(1 − e^(−p_ij)) (z-tests), and a max_density target
// is met within 10% relative; and exactly: the plan is bit-identical across
// runs and thread counts, well-formed, and E[m] is Σ p_ij. Significance 0.001
// everywhere, fixed seeds: deterministic, not flaky.
#include "model/attention/sbm_planner.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <functional>
#include <vector>

#include "kernels/sbm_sampling.h"
#include "model/attention/sbm_parameters.h"
#include "tests/model/attention/sbm_statistics.h"

namespace docsparse {
namespace {

// Logits N(mean, spread²) from the counter-based generator, [heads, n, k].
at::Tensor RandomLogits(int heads, int64_t n, int k, double mean, double spread, uint64_t seed) {
  at::Tensor logits = at::empty({heads, n, k}, at::kFloat);
  CounterRng rng(seed);
  float* data = logits.data_ptr<float>();
  for (int64_t i = 0; i < logits.numel(); ++i) {
    const double u = 1 - rng.Uniform(), v = rng.Uniform();
    data[i] =
        static_cast<float>(mean + spread * std::sqrt(-2 * std::log(u)) * std::cos(2 * M_PI * v));
  }
  return logits;
}

// S per head from random clusters scaled by `sharpness` (larger: more
// diagonal, so more concentrated edge probabilities).
std::vector<double> RandomBlocks(int heads, int k, double sharpness, uint64_t seed) {
  at::Tensor clusters = RandomLogits(heads, k, 8, 0, sharpness, seed);
  std::vector<double> blocks(static_cast<size_t>(heads) * k * k);
  for (int h = 0; h < heads; ++h) {
    SbmBlockMatrix(clusters[h].data_ptr<float>(), k, 8, blocks.data() + h * k * k);
  }
  return blocks;
}

struct Problem {
  SbmMembershipLogits logits;
  std::vector<double> blocks;
};

Problem MakeProblem(int heads, int64_t n, int k, double mean, double spread, double sharpness,
                    uint64_t seed) {
  return {{RandomLogits(heads, n, k, mean, spread, DeriveKey(seed, 1)),
           RandomLogits(heads, n, k, mean, spread, DeriveKey(seed, 2))},
          RandomBlocks(heads, k, sharpness, DeriveKey(seed, 3))};
}

// Plans every head of `problem` with `budget` and `seed`.
std::vector<SbmHeadEdges> PlanAll(const Problem& problem, const SbmBudget& budget, uint64_t seed,
                                  SbmLayerDecision* decision = nullptr) {
  SbmLayerPlanner planner(problem.logits, problem.blocks);
  SbmLayerDecision d = planner.Decide(budget, SbmLayerKey(seed, 0));
  if (decision != nullptr) *decision = d;
  std::vector<SbmHeadEdges> heads;
  for (int h = 0; h < planner.num_heads(); ++h) heads.push_back(planner.SampleHead(h));
  return heads;
}

void ExpectWellFormed(const SbmHeadEdges& edges, int64_t n) {
  ASSERT_EQ(static_cast<int64_t>(edges.row_offsets.size()), n + 1);
  EXPECT_EQ(edges.row_offsets[0], 0);
  EXPECT_EQ(edges.row_offsets[n], edges.edges());
  EXPECT_LE(edges.edges(), edges.multigraph_edges);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_LE(edges.row_offsets[i], edges.row_offsets[i + 1]);
    std::vector<int32_t> row(edges.keys.begin() + edges.row_offsets[i],
                             edges.keys.begin() + edges.row_offsets[i + 1]);
    std::sort(row.begin(), row.end());
    for (size_t e = 0; e < row.size(); ++e) {
      ASSERT_GE(row[e], 0);
      ASSERT_LT(row[e], n);
      if (e > 0) {
        ASSERT_LT(row[e - 1], row[e]) << "row " << i << " repeats a key";
      }
    }
  }
}

class SbmPlannerTest : public ::testing::Test {
 protected:
  c10::InferenceMode inference_mode_;
};

TEST_F(SbmPlannerTest, ExpectedMultigraphEdgesIsTheSumOfEdgeProbabilities) {
  const Problem problem = MakeProblem(2, 37, 8, 0.3, 1.5, 1.0, 5);
  SbmLayerPlanner planner(problem.logits, problem.blocks);
  for (double beta : {-1.0, 0.0, 0.7, 3.0}) {
    SbmLayerDecision decision = planner.Decide({beta, 0}, SbmLayerKey(1, 0));
    for (int h = 0; h < 2; ++h) {
      const SbmHeadSampler& sampler = *planner.sampler(h);
      double sum = 0, distinct = 0;
      for (int i = 0; i < 37; ++i) {
        for (int j = 0; j < 37; ++j) {
          const double p = sampler.EdgeProbability(i, j);
          EXPECT_LE(p, 1.0 + 1e-9);
          sum += p;
          distinct += -std::expm1(-p);
        }
      }
      EXPECT_NEAR(planner.ExpectedMultigraphEdges(h, beta) / sum, 1, 1e-5) << beta;
      EXPECT_NEAR(sampler.expected_multigraph_edges() / sum, 1, 1e-5) << beta;
      // The importance-sampled distinct count: within a few percent.
      EXPECT_NEAR(decision.head_expected_edges[h] / distinct, 1, 0.03) << beta;
    }
  }
  // Larger β is sparser.
  EXPECT_GT(planner.ExpectedMultigraphEdges(0.0), planner.ExpectedMultigraphEdges(0.5));
  EXPECT_GT(planner.ExpectedMultigraphEdges(0.5), planner.ExpectedMultigraphEdges(2.0));
}

// The headline statistical test. 10 tokens, 2 heads, 4 clusters, memberships
// spread so that edge probabilities range ~0.05..0.9: 4000 plans with seeds
// 0..3999. Each of the 200 (head, query, key) cells is an independent
// Bernoulli(1 − e^(−p_ij)) per plan.
TEST_F(SbmPlannerTest, SampledEdgeFrequenciesMatchProbabilities) {
  const int heads = 2, n = 10, k = 4, plans = 4000;
  const Problem problem = MakeProblem(heads, n, k, 1.0, 2.0, 1.5, 21);
  std::vector<double> q(heads * n * n), observed(heads * n * n, 0);
  double expected_multigraph = 0, expected_distinct = 0, distinct_variance = 0;
  {
    SbmLayerPlanner planner(problem.logits, problem.blocks);
    planner.Decide({0, 0}, SbmLayerKey(0, 0));
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          const double p = planner.sampler(h)->EdgeProbability(i, j);
          q[(h * n + i) * n + j] = -std::expm1(-p);
          expected_multigraph += p;
          expected_distinct += q[(h * n + i) * n + j];
          distinct_variance += q[(h * n + i) * n + j] * (1 - q[(h * n + i) * n + j]);
        }
      }
    }
  }
  double multigraph_total = 0, distinct_total = 0;
  for (int seed = 0; seed < plans; ++seed) {
    const std::vector<SbmHeadEdges> plan = PlanAll(problem, {0, 0}, seed);
    for (int h = 0; h < heads; ++h) {
      multigraph_total += static_cast<double>(plan[h].multigraph_edges);
      distinct_total += static_cast<double>(plan[h].edges());
      for (int i = 0; i < n; ++i) {
        for (int64_t e = plan[h].row_offsets[i]; e < plan[h].row_offsets[i + 1]; ++e) {
          observed[(h * n + i) * n + plan[h].keys[e]] += 1;
        }
      }
    }
  }
  double min_q = 1, max_q = 0;
  for (double x : q) {
    min_q = std::min(min_q, x);
    max_q = std::max(max_q, x);
  }
  const testing::ChiSquare chi = testing::BernoulliChiSquare(observed, q, plans);
  std::printf("edge frequencies: chi2 = %.2f, df = %d, p = %.4f (q in [%.3f, %.3f])\n",
              chi.statistic, chi.degrees, chi.p_value, min_q, max_q);
  EXPECT_GT(chi.p_value, testing::kSignificance);
  // Σ over plans of m ~ Poisson(plans·E[m]).
  const double z_multigraph =
      (multigraph_total - plans * expected_multigraph) / std::sqrt(plans * expected_multigraph);
  // Distinct edges: a sum of independent Bernoullis per plan.
  const double z_distinct =
      (distinct_total - plans * expected_distinct) / std::sqrt(plans * distinct_variance);
  std::printf(
      "mean multigraph edges %.4f vs E[m] %.4f (z = %.2f); "
      "mean distinct %.4f vs %.4f (z = %.2f)\n",
      multigraph_total / plans, expected_multigraph, z_multigraph, distinct_total / plans,
      expected_distinct, z_distinct);
  EXPECT_LT(std::fabs(z_multigraph), testing::kZCritical);
  EXPECT_LT(std::fabs(z_distinct), testing::kZCritical);
}

// Row-level alias tables kick in when a row draws at least k copies; check
// frequencies in that regime too (dense memberships, 64 tokens, p_ij up to 1).
TEST_F(SbmPlannerTest, DenseRowsFrequenciesMatchProbabilities) {
  const int n = 64, k = 4, plans = 600;
  const Problem problem = MakeProblem(1, n, k, 3.0, 1.0, 0.3, 22);
  std::vector<double> q(n * n), observed(n * n, 0);
  {
    SbmLayerPlanner planner(problem.logits, problem.blocks);
    planner.Decide({0, 0}, SbmLayerKey(0, 0));
    for (int i = 0; i < n; ++i) {
      for (int j = 0; j < n; ++j)
        q[i * n + j] = -std::expm1(-planner.sampler(0)->EdgeProbability(i, j));
    }
  }
  for (int seed = 0; seed < plans; ++seed) {
    const SbmHeadEdges plan = PlanAll(problem, {0, 0}, 1000 + seed)[0];
    for (int i = 0; i < n; ++i) {
      for (int64_t e = plan.row_offsets[i]; e < plan.row_offsets[i + 1]; ++e) {
        observed[i * n + plan.keys[e]] += 1;
      }
    }
  }
  const testing::ChiSquare chi = testing::BernoulliChiSquare(observed, q, plans);
  std::printf("dense rows: chi2 = %.2f, df = %d, p = %.4f\n", chi.statistic, chi.degrees,
              chi.p_value);
  EXPECT_GT(chi.p_value, testing::kSignificance);
}

// Rows come back distinct and ascending whichever way the sampler took
// them: very sparse rows (fewer copies than tokens / 256) sorted, denser
// ones read back from the bitmap. 0.2% of 2,048 tokens is ~4 keys a row,
// 5% ~100.
TEST(SbmSampledRowsTest, DistinctAndAscendingAtEveryDensity) {
  c10::InferenceMode inference_mode;
  const Problem problem = MakeProblem(2, 2048, 16, 0.0, 1.0, 1.0, 41);
  for (const double target : {0.002, 0.05}) {
    int64_t rows_seen = 0;
    for (const SbmHeadEdges& edges : PlanAll(problem, {0, target, 0}, 7)) {
      for (size_t i = 0; i + 1 < edges.row_offsets.size(); ++i) {
        const auto begin = edges.keys.begin() + edges.row_offsets[i];
        const auto end = edges.keys.begin() + edges.row_offsets[i + 1];
        ASSERT_TRUE(std::adjacent_find(begin, end, std::greater_equal<int32_t>()) == end)
            << "target " << target << " row " << i;
        rows_seen += end - begin > 1;
      }
    }
    EXPECT_GT(rows_seen, 2048) << "target " << target << ": rows of several keys";
  }
}

// Realised density against max_density targets, on diffuse memberships and
// on concentrated ones (p_ij near 1 inside blocks, where deduplication
// removes a third of the copies and E[m] alone would overshoot the cut).
// The inclusion correction: each drawn edge's bias is −log(1 − e^(−p_ij))
// from the sampler's own probabilities, rows come back sorted, and the
// Horvitz-Thompson sum Σ_{j drawn} 1/π_ij, averaged over plans, is each
// row's key count: the estimate the corrected softmax rests on is unbiased.
class SbmInclusionTest : public ::testing::TestWithParam<int> {
 protected:
  c10::InferenceMode inference_mode_;
};

// k = 4 runs the scalar path, k = 16 the vector one (where the CPU has AVX2).
TEST_P(SbmInclusionTest, InclusionBiasIsLogInverseProbabilityAndUnbiased) {
  const int heads = 2, n = 24, k = GetParam(), plans = 1500;
  const Problem problem = MakeProblem(heads, n, k, 0.0, 2.0, 1.5, 33);
  std::vector<double> probability(heads * n * n);
  {
    SbmLayerPlanner planner(problem.logits, problem.blocks);
    planner.Decide({0.5, 0}, SbmLayerKey(0, 0));
    for (int h = 0; h < heads; ++h) {
      for (int i = 0; i < n; ++i) {
        for (int j = 0; j < n; ++j) {
          probability[(h * n + i) * n + j] = planner.sampler(h)->EdgeProbability(i, j);
        }
      }
    }
  }
  std::vector<double> estimate(heads * n, 0);
  for (int plan = 0; plan < plans; ++plan) {
    SbmLayerPlanner planner(problem.logits, problem.blocks);
    planner.Decide({0.5, 0}, SbmLayerKey(plan, 0));
    for (int h = 0; h < heads; ++h) {
      std::vector<float> bias;
      const SbmHeadEdges edges = planner.SampleHead(h, &bias);
      ASSERT_EQ(bias.size(), edges.keys.size());
      for (int i = 0; i < n; ++i) {
        ASSERT_TRUE(std::is_sorted(edges.keys.begin() + edges.row_offsets[i],
                                   edges.keys.begin() + edges.row_offsets[i + 1]));
        for (int64_t e = edges.row_offsets[i]; e < edges.row_offsets[i + 1]; ++e) {
          const double p = probability[(h * n + i) * n + edges.keys[e]];
          const double want = -std::log(-std::expm1(-p));
          if (plan < 20) {
            ASSERT_NEAR(bias[e], want, 1e-4 * std::max(1.0, want)) << i;
          }
          estimate[h * n + i] += std::exp(static_cast<double>(bias[e]));
        }
      }
    }
  }
  double worst = 0;
  for (double sum : estimate) worst = std::max(worst, std::fabs(sum / plans / n - 1));
  // Each row's estimate has a standard error of a few percent here.
  EXPECT_LT(worst, 0.15);
  double mean = 0;
  for (double sum : estimate) mean += sum / plans / n / estimate.size();
  EXPECT_NEAR(mean, 1, 0.02);
}

INSTANTIATE_TEST_SUITE_P(Clusters, SbmInclusionTest, ::testing::Values(4, 16));

TEST_F(SbmPlannerTest, RealisedDensityMeetsTargetWithinTenPercent) {
  const int heads = 4, k = 16;
  const int64_t n = 400;
  const Problem diffuse = MakeProblem(heads, n, k, 0.5, 1.0, 0.5, 31);
  const Problem concentrated = MakeProblem(heads, n, k, -1.0, 4.0, 4.0, 32);
  for (const Problem* problem : {&diffuse, &concentrated}) {
    // The concentrated model's natural density is ~13%: cap below it.
    const std::vector<double> targets = problem == &diffuse ? std::vector<double>{0.01, 0.05, 0.2}
                                                            : std::vector<double>{0.01, 0.05, 0.1};
    for (double target : targets) {
      for (uint64_t seed : {1, 2, 3}) {
        SbmLayerDecision decision;
        const std::vector<SbmHeadEdges> plan = PlanAll(*problem, {0, target}, seed, &decision);
        double edges = 0;
        for (const SbmHeadEdges& head : plan) {
          ExpectWellFormed(head, n);
          edges += static_cast<double>(head.edges());
        }
        const double realised = edges / (heads * n * n);
        const double expected = decision.ExpectedDensity(n);
        std::printf("%s target %.2f seed %d: beta %.3f expected %.4f realised %.4f\n",
                    problem == &diffuse ? "diffuse" : "concentrated", target,
                    static_cast<int>(seed), decision.beta, expected, realised);
        EXPECT_NEAR(realised / target, 1, 0.10) << "target " << target << " seed " << seed;
        EXPECT_NEAR(expected / target, 1, 0.02) << "target " << target;
        EXPECT_GT(decision.beta, 0);
      }
    }
  }
}

TEST_F(SbmPlannerTest, TargetAboveNaturalDensityKeepsBetaZero) {
  const Problem problem = MakeProblem(2, 50, 8, -2.0, 0.5, 0.5, 41);
  SbmLayerDecision decision;
  PlanAll(problem, {0, 0.9}, 1, &decision);
  EXPECT_EQ(decision.beta, 0);
  EXPECT_LT(decision.ExpectedDensity(50), 0.9);
}

TEST_F(SbmPlannerTest, PlanIsBitIdenticalAcrossRunsAndThreadCounts) {
  const Problem problem = MakeProblem(3, 300, 16, 0.5, 1.5, 1.0, 51);
  const int saved = at::get_num_threads();
  std::vector<std::vector<SbmHeadEdges>> plans;
  std::vector<double> betas;
  for (int threads : {1, 2, 4, 1}) {
    at::set_num_threads(threads);
    SbmLayerDecision decision;
    plans.push_back(PlanAll(problem, {0, 0.05}, 77, &decision));
    betas.push_back(decision.beta);
  }
  at::set_num_threads(saved);
  for (size_t run = 1; run < plans.size(); ++run) {
    EXPECT_EQ(betas[run], betas[0]);
    for (int h = 0; h < 3; ++h) {
      EXPECT_EQ(plans[run][h].row_offsets, plans[0][h].row_offsets) << "run " << run;
      EXPECT_EQ(plans[run][h].keys, plans[0][h].keys) << "run " << run;
      EXPECT_EQ(plans[run][h].multigraph_edges, plans[0][h].multigraph_edges);
    }
  }
  const std::vector<SbmHeadEdges> other = PlanAll(problem, {0, 0.05}, 78);
  EXPECT_NE(other[0].keys, plans[0][0].keys) << "another seed, another graph";
}

TEST_F(SbmPlannerTest, EdgeRegularizationMakesGraphsSparser) {
  const Problem problem = MakeProblem(2, 200, 8, 0.5, 1.0, 1.0, 61);
  int64_t previous = -1;
  for (double beta : {4.0, 2.0, 1.0, 0.0}) {
    int64_t edges = 0;
    for (const SbmHeadEdges& head : PlanAll(problem, {beta, 0}, 3)) {
      ExpectWellFormed(head, 200);
      edges += head.edges();
    }
    EXPECT_GT(edges, previous) << "beta " << beta;
    previous = edges;
  }
}

// A budget below the floor (min_edges_per_query) runs the floor instead and
// says so; at or above it, or at β = 0, the budget runs as asked.
TEST_F(SbmPlannerTest, BudgetsBelowTheFloorRunTheFloor) {
  const int heads = 2;
  const int64_t n = 400;
  const Problem problem = MakeProblem(heads, n, 16, 0.5, 1.0, 0.5, 81);
  const double floor_edges = 8.0 * n * heads;
  for (const SbmBudget& budget :
       {SbmBudget{0, 1e-9, 8}, SbmBudget{1e300, 0, 8}, SbmBudget{60.0, 0, 8}}) {
    SbmLayerDecision decision;
    int64_t edges = 0;
    for (const SbmHeadEdges& head : PlanAll(problem, budget, 5, &decision)) {
      ExpectWellFormed(head, n);
      edges += head.edges();
    }
    EXPECT_TRUE(decision.raised_to_floor) << budget.edge_regularization;
    EXPECT_NEAR(decision.ExpectedEdges() / floor_edges, 1, 0.02) << budget.edge_regularization;
    // Realised: within 10% of the floor (3,200 expected edges per head).
    EXPECT_NEAR(static_cast<double>(edges) / floor_edges, 1, 0.1) << budget.edge_regularization;
  }
  // Without a floor, the same β computes next to nothing.
  SbmLayerDecision unfloored;
  int64_t edges = 0;
  for (const SbmHeadEdges& head : PlanAll(problem, {60.0, 0, 0}, 5, &unfloored)) {
    edges += head.edges();
  }
  EXPECT_FALSE(unfloored.raised_to_floor);
  EXPECT_LT(static_cast<double>(edges), 0.01 * floor_edges);
  // Budgets above the floor, and β = 0, are untouched.
  for (const SbmBudget& budget : {SbmBudget{0, 0.05, 8}, SbmBudget{0, 0, 8}}) {
    SbmLayerDecision decision;
    PlanAll(problem, budget, 5, &decision);
    EXPECT_FALSE(decision.raised_to_floor) << budget.target_density;
    EXPECT_GT(decision.ExpectedEdges(), floor_edges);
  }
}

TEST_F(SbmPlannerTest, SingleTokenAndVanishingMemberships) {
  const Problem one = MakeProblem(2, 1, 8, 0.0, 1.0, 1.0, 71);
  for (const SbmHeadEdges& head : PlanAll(one, {0, 0}, 1)) ExpectWellFormed(head, 1);
  // Memberships ~e^-100: no edges, no crash.
  const Problem empty = MakeProblem(2, 30, 8, -100.0, 0.1, 1.0, 72);
  for (const SbmHeadEdges& head : PlanAll(empty, {0, 0}, 1)) {
    ExpectWellFormed(head, 30);
    EXPECT_EQ(head.edges(), 0);
  }
}

TEST_F(SbmPlannerTest, PlannerFlopsFollowTheFormula) {
  SbmPlannerWork work{100, 2, 16, 8, 3, 1, 512, 1000};
  const double expected = 2 * (8 * 100 * 16 * 16 + 4 * 100 * 16 * 8) + 3 * 2 * 2 * 100 * 8 * 4 +
                          2 * (2 * 100 * 8 * 4 + 4 * 100 * 8 + 2 * 64) + 512 * 2 * (64 + 8) +
                          4 * 1000;
  EXPECT_DOUBLE_EQ(SbmPlannerFlops(work), expected);
}

}  // namespace
}  // namespace docsparse
