#include "model/attention/pattern_attention.h"

#include <ATen/Parallel.h>

#include <algorithm>
#include <cmath>
#include <optional>
#include <utility>

#include "kernels/bf16_attention_executor.h"
#include "model/attention/block_sparse_item.h"

namespace docsparse {
namespace {

BlockSparsePlanView ViewOf(const PatternPlan& plan) {
  return BlockSparsePlanView{plan.num_query_blocks(), plan.query_block_starts.data(),
                             plan.span_offsets.data(), plan.spans.data(),
                             plan.slides.empty() ? nullptr : plan.slides.data()};
}

class PatternAttention final : public AttentionMechanism {
 public:
  PatternAttention(AttentionKind kind, PatternPlanner planner, AttentionKnobValues native,
                   int num_threads)
      : kind_(kind),
        planner_(std::move(planner)),
        native_(std::move(native)),
        num_threads_(num_threads) {}

  AttentionKind kind() const override { return kind_; }

  at::Tensor Forward(const AttentionInputs& in,
                     std::vector<ItemAttentionCost>* item_costs) const override {
    const int64_t batch = in.query.size(0);
    const auto [bf16, out] = PrepareBlockSparseBatch(in);
    item_costs->assign(batch, ItemAttentionCost{});
    std::vector<PatternPlan> plans;
    int64_t global_rows = 0;
    for (int64_t b = 0; b < batch; ++b) {
      const ItemAttentionOptions options =
          in.item_options.empty() ? ItemAttentionOptions{} : in.item_options[b];
      AttentionKnobValues knobs = native_;
      for (const auto& [name, value] : options.knobs) knobs[name] = value;
      const int64_t seq = in.query.size(2);
      const int64_t length = in.lengths[b];
      TORCH_CHECK(length >= 0 && length <= seq, AttentionKindName(kind_), " attention: length ",
                  length, " of item ", b, " outside [0, ", seq, "]");
      plans.push_back(planner_(knobs, static_cast<int32_t>(length),
                               static_cast<int32_t>(in.query.size(1)), options.seed, in.layer));
      global_rows = std::max<int64_t>(global_rows, plans.back().global_rows);
    }
    std::optional<ProjectedHeads> global;
    if (global_rows > 0 && in.global_projections) global = in.global_projections(global_rows);
    for (int64_t b = 0; b < batch; ++b) {
      const PatternPlan& plan = plans[static_cast<size_t>(b)];
      (*item_costs)[b].head_edges = plan.head_edges;
      ForwardItem(in, b, plan, bf16, out[b]);
      if (plan.global_rows > 0 && global.has_value())
        AttendFromGlobalRows(*global, b, plan, out[b]);
    }
    return out;
  }

 private:
  void ForwardItem(const AttentionInputs& in, int64_t b, const PatternPlan& plan,
                   Bf16AttentionExecutor bf16, at::Tensor out) const {
    const int64_t seq = in.query.size(2);
    const int64_t length = plan.length;
    if (length < seq) out.narrow(1, length, seq - length).zero_();
    if (length == 0) return;
    const at::Tensor q = in.query[b];
    at::Tensor k = in.key[b];
    at::Tensor v = in.value[b];
    if (!plan.key_gather.empty()) {
      // [tokens ; copies]: the keys a pattern reaches by stride, made
      // contiguous so each row's are one span.
      const at::Tensor gather =
          at::tensor(plan.key_gather, at::TensorOptions().dtype(at::kLong)).to(k.device());
      k = at::cat({k.narrow(1, 0, length), k.index_select(1, gather)}, 1);
      v = at::cat({v.narrow(1, 0, length), v.index_select(1, gather)}, 1);
    }
    const int threads = num_threads_ > 0 ? num_threads_ : at::get_num_threads();
    if (q.is_cuda()) {
      // The CUDA executors take no sliding spans yet: one query per block.
      const PatternPlan fixed = ExpandSlides(plan);
      RunBlockSparseItem(q, k, v, ViewOf(fixed), nullptr, threads, out);
      return;
    }
    RunBlockSparseItem(q, k, v, ViewOf(plan), bf16, threads, out);
  }

  // Rows [0, global_rows) of item b again, from the global projections:
  // softmax(q_g·k_gᵀ/√d)·v_g over every real token (Longformer's
  // _compute_global_attn_output_from_hidden), in fp32. The executor computed
  // them from the ordinary projections first: g rows of n keys, which a
  // plan without them would save.
  static void AttendFromGlobalRows(const ProjectedHeads& global, int64_t b, const PatternPlan& plan,
                                   at::Tensor out) {
    const int64_t rows = plan.global_rows;
    const int64_t length = plan.length;
    const at::Tensor q = global.query[b].narrow(1, 0, rows).to(at::kFloat);
    const at::Tensor k = global.key[b].narrow(1, 0, length).to(at::kFloat);
    const at::Tensor v = global.value[b].narrow(1, 0, length).to(at::kFloat);
    const double scale = 1.0 / std::sqrt(static_cast<double>(q.size(-1)));
    const at::Tensor probabilities = at::softmax(at::matmul(q, k.transpose(1, 2)).mul_(scale), -1);
    out.narrow(1, 0, rows).copy_(at::matmul(probabilities, v));
  }

  AttentionKind kind_;
  PatternPlanner planner_;
  AttentionKnobValues native_;
  int num_threads_;
};

}  // namespace

std::unique_ptr<AttentionMechanism> MakePatternAttention(AttentionKind kind, PatternPlanner planner,
                                                         AttentionKnobValues native,
                                                         int num_threads) {
  return std::make_unique<PatternAttention>(kind, std::move(planner), std::move(native),
                                            num_threads);
}

}  // namespace docsparse
