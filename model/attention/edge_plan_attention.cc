// The mechanism of the planners whose plans are lists of pairs (LSH,
// routing, unions of plans): see MakeEdgeAttention in edge_plan.h.
#include <ATen/Parallel.h>
#include <c10/util/Exception.h>

#include <cmath>
#include <optional>
#include <utility>

#include "kernels/edge_attention.h"
#include "kernels/edge_attention_bf16.h"
#include "model/attention/compute_device.h"
#include "model/attention/context_buffer.h"
#include "model/attention/edge_attention_device.h"
#include "model/attention/edge_plan.h"

namespace docsparse {
namespace {

class EdgePlanAttention final : public AttentionMechanism {
 public:
  EdgePlanAttention(AttentionKind kind, std::shared_ptr<const EdgePlanner> planner,
                    AttentionKnobValues native, int num_threads)
      : kind_(kind),
        planner_(std::move(planner)),
        native_(std::move(native)),
        num_threads_(num_threads) {}

  AttentionKind kind() const override { return kind_; }

  at::Tensor Forward(const AttentionInputs& in,
                     std::vector<ItemAttentionCost>* item_costs) const override {
    const int64_t batch = in.query.size(0);
    const int64_t heads = in.query.size(1);
    const int64_t seq = in.query.size(2);
    const int64_t head_dim = in.query.size(3);
    const std::string_view name = AttentionKindName(kind_);
    TORCH_CHECK(static_cast<int64_t>(in.lengths.size()) == batch, name,
                " attention: ", in.lengths.size(), " lengths for a batch of ", batch);
    TORCH_CHECK(in.item_options.empty() || static_cast<int64_t>(in.item_options.size()) == batch,
                name, " attention: item_options has ", in.item_options.size(), " entries, batch ",
                batch);
    const int threads = num_threads_ > 0 ? num_threads_ : at::get_num_threads();
    const float scale = static_cast<float>(1 / std::sqrt(static_cast<double>(head_dim)));
    // A CUDA model's projections stay on its device: the planners see fp32
    // copies of q and k on the host, the CUDA executor reads the device's.
    const bool on_device = in.query.is_cuda();
    const bool bf16 = in.precision == Precision::kBf16 && in.query.is_cpu() &&
                      in.query.scalar_type() == at::kBFloat16 &&
                      in.key.scalar_type() == at::kBFloat16 &&
                      in.value.scalar_type() == at::kBFloat16 &&
                      EdgeAttentionBf16Available(static_cast<int32_t>(head_dim));
    // The CPU's fp32 executor takes contiguous fp32 operands. The bf16 one
    // reads the projection where it lies and writes the context where the
    // output product reads it.
    const bool in_place = bf16 || on_device;
    const at::Tensor query = in_place ? in.query : in.query.to(at::kCPU, at::kFloat).contiguous();
    const at::Tensor key = in_place ? in.key : in.key.to(at::kCPU, at::kFloat).contiguous();
    const at::Tensor value = in_place ? in.value : in.value.to(at::kCPU, at::kFloat).contiguous();
    at::Tensor context = on_device ? at::empty({batch, heads, seq, head_dim}, in.query.options())
                         : bf16    ? ContextBuffer(in.query, at::kBFloat16)
                                   : at::zeros_like(query);

    item_costs->assign(batch, ItemAttentionCost{});
    for (int64_t b = 0; b < batch; ++b) {
      const int64_t tokens = in.lengths[b];
      TORCH_CHECK(tokens >= 0 && tokens <= seq, name, " attention: length ", tokens, " of item ", b,
                  " outside [0, ", seq, "]");
      ItemAttentionCost& cost = (*item_costs)[b];
      cost.head_edges.assign(heads, 0);
      if (tokens == 0) {
        if (in_place) context[b].zero_();
        continue;
      }
      const ItemAttentionOptions options =
          in.item_options.empty() ? ItemAttentionOptions{} : in.item_options[b];
      ItemPlanInput input;
      // The planners compute in fp32 on the host.
      input.query = HostFloatCopy(query[b].narrow(1, 0, tokens));
      input.key = HostFloatCopy(key[b].narrow(1, 0, tokens));
      input.layer = in.layer;
      input.seed = options.seed;
      input.knobs = native_;
      for (const auto& [knob, value] : options.knobs) input.knobs[knob] = value;
      const std::unique_ptr<ItemEdgePlan> plan = planner_->PlanItem(input);
      // The CUDA kernel takes contiguous heads.
      const at::Tensor item_query = on_device ? query[b].contiguous() : at::Tensor();
      const at::Tensor item_key = on_device ? key[b].contiguous() : at::Tensor();
      const at::Tensor item_value = on_device ? value[b].contiguous() : at::Tensor();
      for (int64_t h = 0; h < heads; ++h) {
        if (on_device) {
          cost.head_edges[h] =
              AttendHeadOnDevice(*plan, static_cast<int32_t>(h), tokens, item_query[h], item_key[h],
                                 item_value[h], scale, context[b][h]);
          continue;
        }
        const HeadEdgeList edges = plan->Head(static_cast<int32_t>(h));
        TORCH_CHECK(edges.rows() == tokens, name, " attention: head ", h, " planned ", edges.rows(),
                    " rows for ", tokens, " tokens");
        cost.head_edges[h] = edges.edges();
        const EdgeListView view{edges.row_offsets.data(), edges.keys.data(),
                                static_cast<int32_t>(tokens),
                                edges.logit_bias.empty() ? nullptr : edges.logit_bias.data()};
        if (bf16) {
          AttendHeadBf16(query[b][h], key[b][h], value[b][h], view, scale, threads, context[b][h]);
          continue;
        }
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
                                         scale,
                                         EdgeKernelIsa::kAuto};
        EdgeAttentionCpu(params, threads);
      }
      cost.planner_flops = plan->planner_flops();
      cost.head_expected_edges = plan->head_expected_edges();
      cost.raised_to_floor = plan->raised_to_floor();
    }
    return in.query.is_cpu() || on_device ? context
                                          : context.to(in.query.device(), in.query.scalar_type());
  }

 private:
  // One head on the CUDA device where q, k and v lie ([seq, head_dim] each,
  // contiguous), its list made there if the plan can, else planned on the
  // host and copied up; returns the head's edges.
  static int64_t AttendHeadOnDevice(ItemEdgePlan& plan, int32_t head, int64_t tokens,
                                    const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                                    float scale, at::Tensor out) {
    absl::Status status;
    int64_t edges = 0;
    int32_t rows = 0;
    if (std::optional<DeviceHeadEdgeList> listed = plan.HeadOnDevice(head, q.device())) {
      rows = listed->rows();
      edges = listed->edges;
      if (rows == tokens) status = EdgeAttentionHeadOnDevice(q, k, v, *listed, scale, out);
    } else {
      const HeadEdgeList list = plan.Head(head);
      rows = list.rows();
      edges = list.edges();
      if (rows == tokens) status = EdgeAttentionHeadOnDevice(q, k, v, list, scale, out);
    }
    TORCH_CHECK(rows == tokens, "edge attention: head ", head, " planned ", rows, " rows for ",
                tokens, " tokens");
    TORCH_CHECK(status.ok(), "edge attention, head ", head, ": ", status.ToString());
    return edges;
  }

  // One head's [seq, head_dim] bf16 rows, read and written where they lie.
  static void AttendHeadBf16(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                             const EdgeListView& view, float scale, int threads, at::Tensor out) {
    const auto bits = [](const at::Tensor& t) {
      return reinterpret_cast<const uint16_t*>(t.data_ptr<at::BFloat16>());
    };
    const auto rows = [](const at::Tensor& t) {
      TORCH_CHECK(t.stride(1) == 1, "attention operand: head_dim must be contiguous");
      return RowLayout{0, 0, t.stride(0)};
    };
    EdgeAttentionBf16Params params{bits(q),
                                   bits(k),
                                   bits(v),
                                   reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>()),
                                   &view,
                                   1,
                                   1,
                                   static_cast<int32_t>(q.size(0)),
                                   static_cast<int32_t>(k.size(0)),
                                   static_cast<int32_t>(q.size(1)),
                                   scale,
                                   rows(q),
                                   rows(k),
                                   rows(v),
                                   rows(out)};
    EdgeAttentionCpuBf16(params, threads);
  }

  AttentionKind kind_;
  std::shared_ptr<const EdgePlanner> planner_;
  AttentionKnobValues native_;
  int num_threads_;
};

}  // namespace

std::unique_ptr<AttentionMechanism> MakeEdgeAttention(AttentionKind kind,
                                                      std::shared_ptr<const EdgePlanner> planner,
                                                      AttentionKnobValues native, int num_threads) {
  return std::make_unique<EdgePlanAttention>(kind, std::move(planner), std::move(native),
                                             num_threads);
}

}  // namespace docsparse
