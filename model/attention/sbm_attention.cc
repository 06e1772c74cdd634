#include "model/attention/sbm_attention.h"

#include <c10/util/Exception.h>

#include <algorithm>
#include <cmath>

#include "kernels/sbm_sampling.h"
#include "model/attention/sbm_device_sampling.h"
#include "model/attention/sbm_planner.h"

namespace docsparse {
namespace {

// One item's SBM plan at one layer: the β decision made at construction,
// each head sampled when taken.
class SbmItemEdgePlan final : public ItemEdgePlan {
 public:
  SbmItemEdgePlan(const SbmParameters& parameters, const ItemPlanInput& input)
      : logits_(ComputeSbmMembershipLogits(parameters.layer(input.layer), input.query.contiguous(),
                                           input.key.contiguous())),
        planner_(logits_, parameters.block_matrix(input.layer)),
        head_dim_(static_cast<int>(input.query.size(2))) {
    const double edge_regularization = KnobOr(input.knobs, kSbmEdgeRegularizationKnob, 0);
    const double target_density = KnobOr(input.knobs, kSbmTargetDensityKnob, 0);
    TORCH_CHECK(std::isfinite(edge_regularization) && target_density >= 0 && target_density <= 1,
                "SBM attention: edge_regularization must be finite and target_density in "
                "[0, 1], got ",
                edge_regularization, " and ", target_density);
    correct_ = KnobOr(input.knobs, kSbmInclusionCorrectionKnob, 0) != 0;
    decision_ = planner_.Decide({edge_regularization, target_density, kSbmMinEdgesPerQuery},
                                SbmLayerKey(input.seed, input.layer));
  }

  HeadEdgeList Head(int32_t head) override {
    std::vector<float> bias;
    SbmHeadEdges sampled = planner_.SampleHead(head, correct_ ? &bias : nullptr);
    multigraph_edges_ += sampled.multigraph_edges;
    corrected_edges_ += static_cast<int64_t>(bias.size());
    return HeadEdgeList{std::move(sampled.row_offsets), std::move(sampled.keys), std::move(bias)};
  }
  // On a GPU the head is drawn there (the same graph), unless the inclusion
  // correction asks for its biases, which the host computes from its list.
  std::optional<DeviceHeadEdgeList> HeadOnDevice(int32_t head, at::Device device) override {
    const SbmHeadSampler* sampler = planner_.sampler(head);
    if (correct_ || !device.is_cuda() || sampler == nullptr) return std::nullopt;
    absl::StatusOr<SampledDeviceHead> sampled =
        SampleSbmHeadOnDevice(*sampler, planner_.HeadKey(head), device);
    // Tables the GPU sampler does not take: the host draws the same graph.
    if (!sampled.ok()) return std::nullopt;
    multigraph_edges_ += sampled->multigraph_edges;
    planner_.DropHead(head);
    return std::move(sampled->list);
  }
  double planner_flops() const override {
    // The correction: p_ij (2k) and a log per edge, counted as 4.
    return SbmPlannerFlops({planner_.tokens(), planner_.num_heads(), head_dim_,
                            planner_.num_clusters(), decision_.membership_passes,
                            decision_.table_builds, decision_.importance_samples,
                            multigraph_edges_}) +
           static_cast<double>(corrected_edges_) * (2.0 * planner_.num_clusters() + 4);
  }
  std::vector<double> head_expected_edges() const override { return decision_.head_expected_edges; }
  bool raised_to_floor() const override { return decision_.raised_to_floor; }

 private:
  SbmMembershipLogits logits_;
  SbmLayerPlanner planner_;  // borrows logits_
  SbmLayerDecision decision_;
  int head_dim_;
  int64_t multigraph_edges_ = 0;
  int64_t corrected_edges_ = 0;
  bool correct_ = false;
};

class SbmEdgePlanner final : public EdgePlanner {
 public:
  explicit SbmEdgePlanner(std::shared_ptr<const SbmParameters> parameters)
      : parameters_(std::move(parameters)) {}

  std::unique_ptr<ItemEdgePlan> PlanItem(const ItemPlanInput& input) const override {
    TORCH_CHECK(input.layer >= 0 && input.layer < parameters_->num_layers(),
                "SBM attention: layer ", input.layer, " outside the ", parameters_->num_layers(),
                " layers of sbm.safetensors");
    TORCH_CHECK(input.query.size(0) == parameters_->num_heads() &&
                    input.query.size(2) == parameters_->head_dim(),
                "SBM attention: inputs have ", input.query.size(0), " heads of ",
                input.query.size(2), ", sbm.safetensors has ", parameters_->num_heads(), " of ",
                parameters_->head_dim());
    return std::make_unique<SbmItemEdgePlan>(*parameters_, input);
  }

 private:
  std::shared_ptr<const SbmParameters> parameters_;
};

}  // namespace

std::shared_ptr<const EdgePlanner> MakeSbmEdgePlanner(
    std::shared_ptr<const SbmParameters> parameters) {
  return std::make_shared<SbmEdgePlanner>(std::move(parameters));
}

std::unique_ptr<AttentionMechanism> MakeSbmAttention(
    std::shared_ptr<const SbmParameters> parameters, SbmAttentionOptions options) {
  return MakeEdgeAttention(AttentionKind::kSbm, MakeSbmEdgePlanner(std::move(parameters)),
                           std::move(options.knobs), options.num_threads);
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
