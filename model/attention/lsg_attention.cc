#include "model/attention/lsg_attention.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <vector>

#include "kernels/bf16_attention_executor.h"
#include "model/attention/block_sparse_item.h"
#include "model/attention/context_buffer.h"
#include "model/attention/lsg_plan_cache.h"
#include "model/attention/lsg_planner.h"
#include "model/attention/lsg_sparse_keys.h"

namespace docsparse {

LsgConfig ApplyLsgKnobs(const LsgConfig& native, const ItemAttentionOptions& options) {
  LsgConfig config = native;
  // Another planner's knobs may share a name (BigBird's block_size).
  if (options.kind.has_value() && *options.kind != AttentionKind::kLsg) return config;
  const AttentionKnobValues& knobs = options.knobs;
  config.block_size = static_cast<int>(KnobOr(knobs, kLsgBlockSizeKnob, config.block_size));
  config.sparse_block_size =
      static_cast<int>(KnobOr(knobs, kLsgSparseBlockSizeKnob, config.sparse_block_size));
  config.sparsity_factor =
      static_cast<int>(KnobOr(knobs, kLsgSparsityFactorKnob, config.sparsity_factor));
  return config;
}

namespace {

using at::indexing::Slice;

class LsgAttention final : public AttentionMechanism {
 public:
  LsgAttention(const LsgConfig& config, int num_threads)
      : config_(config), num_threads_(num_threads) {}

  AttentionKind kind() const override { return AttentionKind::kLsg; }

  at::Tensor Forward(const AttentionInputs& in,
                     std::vector<ItemAttentionCost>* item_costs) const override {
    const int64_t batch = in.query.size(0);
    const auto [bf16, out] = PrepareBlockSparseBatch(in);
    item_costs->assign(batch, ItemAttentionCost{});
    for (int64_t b = 0; b < batch; ++b) {
      const ItemAttentionOptions options =
          in.item_options.empty() ? ItemAttentionOptions{} : in.item_options[b];
      (*item_costs)[b].head_edges =
          ForwardItem(in, b, ApplyLsgKnobs(config_, options), options.seed, bf16, out[b]);
    }
    return out;
  }

 private:
  // Attends sequence b into `out` ([heads, seq, head_dim] view of the
  // context buffer: bf16 with a bf16 executor, else fp32); returns the edges
  // per head.
  std::vector<int64_t> ForwardItem(const AttentionInputs& in, int64_t b, const LsgConfig& config,
                                   uint64_t seed, Bf16AttentionExecutor bf16,
                                   at::Tensor out) const {
    const int64_t heads = in.query.size(1);
    const int64_t seq = in.query.size(2);
    const int32_t global = config_.num_global_tokens;
    const LsgLayout layout =
        LayoutLsgSequence(config, global, static_cast<int32_t>(in.lengths[b] - global));
    const at::Tensor q = in.query[b];
    at::Tensor k = in.key[b];
    at::Tensor v = in.value[b];

    std::vector<uint8_t> valid;
    // [global ; derived ; tokens] where the layout puts them, read in place.
    std::vector<KeyPiece> k_pieces;
    const bool padding_rows = !layout.full && LsgPaddingReachesTokens(config);
    if (!layout.full) {
      const Slice tokens(global, global + layout.padded_tokens);
      at::Tensor derived_k, derived_v;
      if (layout.derived_keys > 0) {
        // Rotations for lsh: a stream per (request seed, layer).
        at::Generator generator =
            at::detail::createCPUGenerator(seed * 1000003ULL + static_cast<uint64_t>(in.layer) + 1);
        LsgDerivedKeys derived =
            DeriveLsgKeys(config, layout, q.index({Slice(), global}), k.index({Slice(), tokens}),
                          v.index({Slice(), tokens}), generator);
        derived_k = derived.keys;
        derived_v = derived.values;
        valid = std::move(derived.valid);
      }
      k_pieces = {{0, k.narrow(1, 0, global), v.narrow(1, 0, global)}};
      if (derived_k.defined()) {
        k_pieces.push_back(KeyPiece{layout.derived_begin(), derived_k, derived_v});
      }
      // The projection may end before the padded tokens do (rows no span
      // reads).
      const int64_t rows = std::min<int64_t>(layout.padded_tokens, k.size(1) - global);
      k_pieces.push_back(
          KeyPiece{layout.token_begin(), k.narrow(1, global, rows), v.narrow(1, global, rows)});
    }
    // A validity that depends on the keys (lsh) makes a plan of this layer
    // only; otherwise it follows from the layout, and so does the plan.
    const std::shared_ptr<const LsgPlan> plan =
        valid.empty() ? plans_.Get(config, layout, static_cast<int>(heads), padding_rows)
                      : std::make_shared<const LsgPlan>(PlanLsgSequence(
                            config, layout, static_cast<int>(heads), valid, padding_rows));
    // Rows past the plan's last block (batch padding) are not written.
    const int64_t planned = plan->query_block_starts.back();
    if (planned < seq) out.narrow(1, planned, seq - planned).zero_();
    const int threads = num_threads_ > 0 ? num_threads_ : at::get_num_threads();
    // q, and k and v of a full layout, are read where the projection left them.
    if (layout.full) {
      RunBlockSparseItem(q, k, v, plan->View(), bf16, threads, out);
    } else {
      RunBlockSparseItem(q, k_pieces, layout.extended_keys(), plan->View(), bf16, threads, out);
    }
    return plan->head_edges;
  }

  LsgConfig config_;
  int num_threads_;
  // Thread-safe; shared by every call (a sequence's plan repeats in every
  // layer).
  mutable LsgPlanCache plans_;
};

}  // namespace

std::unique_ptr<AttentionMechanism> MakeLsgAttention(const LsgConfig& config, int num_threads) {
  return std::make_unique<LsgAttention>(config, num_threads);
}

std::unique_ptr<AttentionMechanism> MakeCheckpointAttention(const std::optional<LsgConfig>& lsg) {
  return lsg.has_value() ? MakeLsgAttention(*lsg) : MakeDenseAttention();
}

}  // namespace docsparse
