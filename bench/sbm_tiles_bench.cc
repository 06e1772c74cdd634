#include "bench/sbm_tiles_bench.h"

#include <ATen/Parallel.h>
#include <c10/core/InferenceMode.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "bench/held_out_text.h"
#include "model/attention/edge_plan.h"
#include "model/attention/planner_registry.h"
#include "model/attention/sbm_attention.h"
#include "model/attention/sbm_parameters.h"
#include "model/attention/sbm_planner.h"
#include "model/checkpoint/hf_config.h"
#include "model/encoder/encoder.h"
#include "model/text/tokenizer_loader.h"

ABSL_FLAG(std::string, tiles_model, "models/minilm-sbm",
          "sbm_tiles: an SBM model folder (with sbm.safetensors)");
ABSL_FLAG(std::vector<std::string>, tiles, std::vector<std::string>({"16x64", "64x64", "128x64"}),
          "sbm_tiles: tile shapes, query rows x keys");
ABSL_DECLARE_FLAG(std::vector<std::string>, seq);
ABSL_DECLARE_FLAG(std::vector<std::string>, density);
ABSL_DECLARE_FLAG(uint64_t, seed);
ABSL_DECLARE_FLAG(int, threads);
ABSL_DECLARE_FLAG(bool, json);

namespace docsparse::bench {
namespace {

struct TileShape {
  int queries = 0;
  int keys = 0;
};

// Touched tiles over all heads of one layer, in token order and by cluster.
struct TileCount {
  double in_order = 0;
  double by_cluster = 0;
  double tiles = 0;
};

// Each token's position once the tokens are sorted by their dominant cluster
// (ties in token order). logits: [tokens, k].
std::vector<int64_t> ClusterOrder(const at::Tensor& logits) {
  const at::Tensor order =
      std::get<1>(at::sort(logits.argmax(1), /*stable=*/true, /*dim=*/0, /*descending=*/false));
  std::vector<int64_t> position(static_cast<size_t>(order.size(0)));
  const int64_t* sorted = order.data_ptr<int64_t>();
  for (int64_t i = 0; i < order.size(0); ++i) position[sorted[i]] = i;
  return position;
}

// The SBM mechanism, counting the tiles item 0's plan touches at every
// layer before it attends. The plan it counts is drawn as the mechanism's
// own (same planner, knobs and seed), so it is the plan the layer runs.
class TileProbe final : public AttentionMechanism {
 public:
  TileProbe(std::shared_ptr<const SbmParameters> parameters, std::vector<TileShape> shapes)
      : parameters_(parameters),
        planner_(MakeSbmEdgePlanner(parameters)),
        attention_(MakeSbmAttention(std::move(parameters))),
        shapes_(std::move(shapes)) {}

  AttentionKind kind() const override { return AttentionKind::kSbm; }

  at::Tensor Forward(const AttentionInputs& in,
                     std::vector<ItemAttentionCost>* item_costs) const override {
    const int64_t n = in.lengths[0];
    ItemPlanInput input;
    input.query = in.query[0].narrow(1, 0, n).to(at::kCPU, at::kFloat).contiguous();
    input.key = in.key[0].narrow(1, 0, n).to(at::kCPU, at::kFloat).contiguous();
    input.layer = in.layer;
    input.seed = in.item_options[0].seed;
    input.knobs = in.item_options[0].knobs;
    const std::unique_ptr<ItemEdgePlan> plan = planner_->PlanItem(input);
    const SbmMembershipLogits logits =
        ComputeSbmMembershipLogits(parameters_->layer(in.layer), input.query, input.key);
    const int heads = static_cast<int>(input.query.size(0));
    std::vector<TileCount> counts(shapes_.size());
    double edges = 0;
    for (int h = 0; h < heads; ++h) {
      const HeadEdgeList list = plan->Head(h);
      edges += static_cast<double>(list.edges());
      const std::vector<int64_t> query_at = ClusterOrder(logits.query[h]);
      const std::vector<int64_t> key_at = ClusterOrder(logits.key[h]);
      for (size_t s = 0; s < shapes_.size(); ++s) {
        const TileShape shape = shapes_[s];
        const int64_t rows = (n + shape.queries - 1) / shape.queries;
        const int64_t columns = (n + shape.keys - 1) / shape.keys;
        std::vector<uint8_t> in_order(rows * columns), by_cluster(rows * columns);
        for (int64_t i = 0; i < n; ++i) {
          for (int64_t e = list.row_offsets[i]; e < list.row_offsets[i + 1]; ++e) {
            const int64_t j = list.keys[e];
            in_order[(i / shape.queries) * columns + j / shape.keys] = 1;
            by_cluster[(query_at[i] / shape.queries) * columns + key_at[j] / shape.keys] = 1;
          }
        }
        for (size_t t = 0; t < in_order.size(); ++t) {
          counts[s].in_order += in_order[t];
          counts[s].by_cluster += by_cluster[t];
        }
        counts[s].tiles += static_cast<double>(rows * columns);
      }
    }
    const double density = edges / (static_cast<double>(heads) * n * n);
    for (size_t s = 0; s < shapes_.size(); ++s) {
      const TileCount& c = counts[s];
      const double fill = edges / (c.by_cluster * shapes_[s].queries * shapes_[s].keys);
      if (absl::GetFlag(FLAGS_json)) {
        std::printf(
            "{\"bench\": \"sbm_tiles\", \"tokens\": %lld, \"target_density\": %s, \"layer\": %d, "
            "\"density\": %.5f, \"tile\": \"%dx%d\", \"touched_in_order\": %.4f, "
            "\"touched_by_cluster\": %.4f, \"fill_by_cluster\": %.4f}\n",
            static_cast<long long>(n), target_.c_str(), in.layer, density, shapes_[s].queries,
            shapes_[s].keys, c.in_order / c.tiles, c.by_cluster / c.tiles, fill);
      } else {
        std::printf(
            "sbm tiles %6lld tokens, target %s, layer %d, density %.4f, %3dx%d tiles: touched "
            "%.3f in order, %.3f by cluster; touched tiles %.3f full\n",
            static_cast<long long>(n), target_.c_str(), in.layer, density, shapes_[s].queries,
            shapes_[s].keys, c.in_order / c.tiles, c.by_cluster / c.tiles, fill);
      }
    }
    std::fflush(stdout);
    return attention_->Forward(in, item_costs);
  }

  void set_target(std::string target) { target_ = std::move(target); }

 private:
  std::shared_ptr<const SbmParameters> parameters_;
  std::shared_ptr<const EdgePlanner> planner_;
  std::unique_ptr<AttentionMechanism> attention_;
  std::vector<TileShape> shapes_;
  std::string target_;
};

}  // namespace

int RunSbmTilesBench() {
  at::set_num_threads(absl::GetFlag(FLAGS_threads));
  std::vector<TileShape> shapes;
  for (const std::string& text : absl::GetFlag(FLAGS_tiles)) {
    const std::vector<std::string> sides = absl::StrSplit(text, 'x');
    TileShape shape;
    if (sides.size() != 2 || !absl::SimpleAtoi(sides[0], &shape.queries) ||
        !absl::SimpleAtoi(sides[1], &shape.keys) || shape.queries < 1 || shape.keys < 1) {
      std::fprintf(stderr, "bad --tiles %s (query rows x keys, e.g. 64x64)\n", text.c_str());
      return 2;
    }
    shapes.push_back(shape);
  }
  const std::string dir = absl::GetFlag(FLAGS_tiles_model);
  const absl::StatusOr<EncoderConfig> config = LoadEncoderConfig(dir + "/config.json");
  if (!config.ok()) {
    std::fprintf(stderr, "%s\n", config.status().ToString().c_str());
    return 1;
  }
  absl::StatusOr<std::shared_ptr<const SbmParameters>> parameters =
      SbmParameters::LoadFromModelDir(dir, EncoderShapeOf(*config));
  absl::StatusOr<std::unique_ptr<Tokenizer>> tokenizer = LoadTokenizer(dir);
  if (!parameters.ok() || !tokenizer.ok()) {
    std::fprintf(stderr, "%s\n",
                 (!parameters.ok() ? parameters.status() : tokenizer.status()).ToString().c_str());
    return 1;
  }
  auto probe = std::make_unique<TileProbe>(*parameters, shapes);
  TileProbe* probe_handle = probe.get();
  absl::StatusOr<std::unique_ptr<Encoder>> encoder =
      Encoder::Create(dir, *config, std::move(probe), Precision::kFp32);
  if (!encoder.ok()) {
    std::fprintf(stderr, "%s\n", encoder.status().ToString().c_str());
    return 1;
  }
  const std::vector<int32_t> text_ids = (*tokenizer)->Encode(HeldOutText());
  const c10::InferenceMode inference_mode;
  for (const std::string& tokens_text : absl::GetFlag(FLAGS_seq)) {
    int64_t tokens = 0;
    if (!absl::SimpleAtoi(tokens_text, &tokens) || tokens < 3 ||
        tokens > (*encoder)->max_sequence_length() ||
        static_cast<size_t>(tokens) > text_ids.size()) {
      std::fprintf(stderr, "bad --seq %s (3 to %lld tokens for this model and text)\n",
                   tokens_text.c_str(),
                   static_cast<long long>(
                       std::min<int64_t>((*encoder)->max_sequence_length(), text_ids.size())));
      return 2;
    }
    // --density's default (0, the planners' native knobs) means nothing to
    // a density target: 1% and 5% then.
    std::vector<std::string> densities = absl::GetFlag(FLAGS_density);
    if (densities == std::vector<std::string>{"0"}) densities = {"0.01", "0.05"};
    for (const std::string& density_text : densities) {
      double density = 0;
      if (!absl::SimpleAtod(density_text, &density) || !(density > 0) || density > 1) {
        std::fprintf(stderr, "bad --density %s (in (0, 1])\n", density_text.c_str());
        return 2;
      }
      EncoderBatch batch;
      batch.sequences.push_back((*tokenizer)->Frame(text_ids, static_cast<size_t>(tokens)));
      ItemAttentionOptions options;
      options.knobs[kSbmTargetDensityKnob] = density;
      options.seed = absl::GetFlag(FLAGS_seed);
      batch.attention_options.push_back(options);
      probe_handle->set_target(density_text);
      const absl::StatusOr<EncoderOutput> output = (*encoder)->Forward(batch, nullptr);
      if (!output.ok()) {
        std::fprintf(stderr, "%s\n", output.status().ToString().c_str());
        return 1;
      }
    }
  }
  return 0;
}

}  // namespace docsparse::bench
