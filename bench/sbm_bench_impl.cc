// `docsparse-bench attention --impl sbm`: SBM attention with random
// (uncalibrated, reference-initialised) parameters, which is what its cost
// depends on: the planner's work is set by n, k and the edges sampled, not
// by what the clusters learned. The case's density is the budget's
// max_density (target_density), solved per call like a request's; 0 runs
// the parameters at β = 0 (natural density ≈ 22%). Sampling is part of the
// timed Forward.
#include "bench/attention_impls.h"
#include "model/attention/sbm_attention.h"
#include "model/attention/sbm_parameters.h"

namespace docsparse::bench {
namespace {

// Clusters per head for the bench: within the paper's range (it uses 128 at
// d_h = 64; our calibrated MiniLM uses fewer at d_h = 32).
constexpr int kBenchClusters = 32;

const bool kSbmRegistered =
    RegisterAttentionImpl("sbm", [](const AttentionCase& c) -> absl::StatusOr<PreparedAttention> {
      std::shared_ptr<const SbmParameters> parameters =
          SbmParameters::Random(1, c.heads, c.head_dim, kBenchClusters, c.seed);
      ItemAttentionOptions options;
      options.knobs[kSbmTargetDensityKnob] = c.density;
      options.seed = c.seed;
      SbmAttentionOptions attention_options;
      attention_options.num_threads = c.threads;
      return PreparedAttention{MakeSbmAttention(std::move(parameters), attention_options), options,
                               0};
    });

}  // namespace
}  // namespace docsparse::bench
