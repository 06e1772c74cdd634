#include "model/attention/sbm_attention.h"

#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>

#include "kernels/edge_attention.h"
#include "kernels/sbm_sampling.h"
#include "model/attention/sbm_planner.h"

namespace docsparse {
namespace {

class SbmAttention final : public AttentionMechanism {
 public:
  SbmAttention(std::shared_ptr<const SbmParameters> parameters, SbmAttentionOptions options)
      : parameters_(std::move(parameters)), options_(options) {}

  AttentionKind kind() const override { return AttentionKind::kSbm; }

  at::Tensor Forward(const AttentionInputs& in,
                     std::vector<ItemAttentionCost>* item_costs) const override {
    const int64_t batch = in.query.size(0);
    const int64_t heads = in.query.size(1);
    const int64_t seq = in.query.size(2);
    const int64_t head_dim = in.query.size(3);
    TORCH_CHECK(in.layer >= 0 && in.layer < parameters_->num_layers(), "SBM attention: layer ",
                in.layer, " outside the ", parameters_->num_layers(), " layers of sbm.safetensors");
    TORCH_CHECK(heads == parameters_->num_heads() && head_dim == parameters_->head_dim(),
                "SBM attention: inputs have ", heads, " heads of ", head_dim,
                ", sbm.safetensors has ", parameters_->num_heads(), " of ",
                parameters_->head_dim());
    TORCH_CHECK(static_cast<int64_t>(in.lengths.size()) == batch,
                "SBM attention: ", in.lengths.size(), " lengths for a batch of ", batch);
    TORCH_CHECK(in.item_options.empty() || static_cast<int64_t>(in.item_options.size()) == batch,
                "SBM attention: item_options has ", in.item_options.size(), " entries, batch ",
                batch);
    // On a CUDA device the planner and the edges run on the host for now:
    // q, k and v come down and the context goes back up (correct, not fast;
    // the device's edge kernel and fastRG are not wired in yet).
    const at::Tensor query = in.query.to(at::kCPU, at::kFloat).contiguous();
    const at::Tensor key = in.key.to(at::kCPU, at::kFloat).contiguous();
    const at::Tensor value = in.value.to(at::kCPU, at::kFloat).contiguous();
    at::Tensor context = at::zeros_like(query);
    const SbmLayerParameters& layer = parameters_->layer(in.layer);
    const std::vector<double>& block = parameters_->block_matrix(in.layer);
    const int threads = options_.num_threads > 0 ? options_.num_threads : at::get_num_threads();

    item_costs->assign(batch, ItemAttentionCost{});
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t tokens = in.lengths[b];
      TORCH_CHECK(tokens >= 0 && tokens <= seq, "SBM attention: length ", tokens, " of item ", b,
                  " outside [0, ", seq, "]");
      ItemAttentionCost& cost = (*item_costs)[b];
      cost.head_edges.assign(heads, 0);
      cost.head_expected_edges.assign(heads, 0.0);
      if (tokens == 0) continue;
      const ItemAttentionOptions& options =
          in.item_options.empty() ? options_.defaults : in.item_options[b];
      const double edge_regularization = KnobOr(options.knobs, kSbmEdgeRegularizationKnob, 0);
      const double target_density = KnobOr(options.knobs, kSbmTargetDensityKnob, 0);
      TORCH_CHECK(std::isfinite(edge_regularization) && target_density >= 0 && target_density <= 1,
                  "SBM attention: edge_regularization must be finite and target_density in "
                  "[0, 1], got ",
                  edge_regularization, " and ", target_density);

      const SbmMembershipLogits logits = ComputeSbmMembershipLogits(
          layer, query[b].slice(1, 0, tokens), key[b].slice(1, 0, tokens));
      SbmLayerPlanner planner(logits, block);
      const SbmLayerDecision decision =
          planner.Decide({edge_regularization, target_density, kSbmMinEdgesPerQuery},
                         SbmLayerKey(options.seed, in.layer));
      cost.raised_to_floor = decision.raised_to_floor;
      int64_t multigraph_edges = 0;
      for (int64_t h = 0; h < heads; ++h) {
        const SbmHeadEdges edges = planner.SampleHead(static_cast<int>(h));
        multigraph_edges += edges.multigraph_edges;
        cost.head_edges[h] = edges.edges();
        // One (item, head) at a time keeps one head's edge list alive, not
        // the layer's (hundreds of MB at 16k tokens).
        const EdgeListView view{edges.row_offsets.data(), edges.keys.data(),
                                static_cast<int32_t>(tokens)};
        const int64_t offset = (b * heads + h) * seq * head_dim;
        const EdgeAttentionParams params{query.data_ptr<float>() + offset,
                                         key.data_ptr<float>() + offset,
                                         value.data_ptr<float>() + offset,
                                         context.data_ptr<float>() + offset,
                                         &view,
                                         1,
                                         1,
                                         static_cast<int32_t>(seq),
                                         static_cast<int32_t>(seq),
                                         static_cast<int32_t>(head_dim),
                                         static_cast<float>(1 / std::sqrt(head_dim * 1.0)),
                                         EdgeKernelIsa::kAuto};
        EdgeAttentionCpu(params, threads);
      }
      cost.head_expected_edges = decision.head_expected_edges;
      cost.planner_flops =
          SbmPlannerFlops({tokens, static_cast<int>(heads), static_cast<int>(head_dim),
                           parameters_->num_clusters(), decision.membership_passes,
                           decision.table_builds, decision.importance_samples, multigraph_edges});
    }
    return in.query.is_cpu() ? context : context.to(in.query.device(), in.query.scalar_type());
  }

 private:
  std::shared_ptr<const SbmParameters> parameters_;
  SbmAttentionOptions options_;
};

}  // namespace

std::unique_ptr<AttentionMechanism> MakeSbmAttention(
    std::shared_ptr<const SbmParameters> parameters, SbmAttentionOptions options) {
  return std::make_unique<SbmAttention>(std::move(parameters), options);
}

double SbmFloorDensity(const std::vector<int64_t>& tokens) {
  double floor_edges = 0, pairs = 0;
  for (const int64_t n : tokens) {
    const double square = static_cast<double>(n) * static_cast<double>(n);
    floor_edges += std::min(kSbmMinEdgesPerQuery * static_cast<double>(n), square);
    pairs += square;
  }
  return pairs > 0 ? floor_edges / pairs : 0;
}

uint64_t SbmSeedFromRequestId(std::string_view request_id) {
  uint64_t hash = 0xcbf29ce484222325ULL;
  for (unsigned char c : request_id) {
    hash ^= c;
    hash *= 0x100000001b3ULL;
  }
  return Mix64(hash);
}

double SbmTargetDensityForAttentionFlops(double max_attention_flops, int64_t tokens,
                                         const EncoderShape& shape, int num_clusters) {
  if (tokens <= 0 || shape.num_layers <= 0) return 1;
  constexpr int kTypicalPasses = 8;
  SbmPlannerWork fixed{tokens,
                       shape.num_heads,
                       shape.head_dim,
                       num_clusters,
                       kTypicalPasses,
                       1,
                       static_cast<int64_t>(shape.num_heads) * SbmLayerPlanner::kImportanceSamples,
                       0};
  const double per_layer_cap = max_attention_flops / shape.num_layers;
  const double overhead = SbmPlannerFlops(fixed);
  // Per edge: 4·head_dim in attention plus ~4 to draw it (one copy per edge).
  const double per_density = (4.0 * shape.head_dim + 4.0) * static_cast<double>(tokens) *
                             static_cast<double>(tokens) * shape.num_heads;
  const double density = (per_layer_cap - overhead) / per_density;
  return std::clamp(density, 0.0, 1.0);
}

}  // namespace docsparse
