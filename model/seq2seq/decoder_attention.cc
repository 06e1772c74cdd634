#include "model/seq2seq/decoder_attention.h"

#include <ATen/Parallel.h>

#include <cstdint>
#include <vector>

#include "kernels/bf16_attention_executor.h"
#include "kernels/block_sparse_attention.h"
#include "kernels/cpu_features.h"
#include "model/attention/context_buffer.h"

namespace docsparse {
namespace {

// The executors' plan for a step: without `causal` one query block whose
// rows all see every key; with it one block per query row, row i seeing keys
// [0, k_len - q_len + i].
struct StepPlan {
  std::vector<int32_t> block_starts;
  std::vector<int32_t> span_offsets{0};
  std::vector<KeySpan> spans;

  StepPlan(int64_t batch_heads, int32_t q_len, int32_t k_len, bool causal) {
    const int32_t blocks = causal ? q_len : 1;
    for (int32_t b = 0; b < blocks; ++b) block_starts.push_back(b);
    block_starts.push_back(q_len);
    for (int64_t bh = 0; bh < batch_heads; ++bh) {
      for (int32_t b = 0; b < blocks; ++b) {
        spans.push_back({0, causal ? k_len - q_len + b + 1 : k_len});
        span_offsets.push_back(static_cast<int32_t>(spans.size()));
      }
    }
  }
  BlockSparsePlanView View() const {
    return {static_cast<int32_t>(block_starts.size() - 1), block_starts.data(), span_offsets.data(),
            spans.data()};
  }
};

uint16_t* Bf16Bits(const at::Tensor& t) {
  return reinterpret_cast<uint16_t*>(t.data_ptr<at::BFloat16>());
}

}  // namespace

bool DecoderAttentionInPlace(at::ScalarType type, at::Device device, int64_t head_dim) {
  if (!device.is_cpu()) return false;
  if (type == at::kFloat) return true;
  return type == at::kBFloat16 &&
         ChooseBf16AttentionExecutor(static_cast<int32_t>(head_dim)) != nullptr;
}

void AttendInPlace(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                   const at::Tensor& out, double scale, bool causal) {
  TORCH_CHECK(q.dim() == 4 && k.dim() == 4 && v.dim() == 4 && out.dim() == 4,
              "decoder attention: operands must be [batch, heads, len, head_dim]");
  TORCH_CHECK(k.sizes() == v.sizes() && out.sizes() == q.sizes() && q.size(0) == k.size(0) &&
                  q.size(1) == k.size(1) && q.size(3) == k.size(3),
              "decoder attention: operand shapes disagree");
  TORCH_CHECK(!causal || k.size(2) >= q.size(2),
              "decoder attention: fewer keys than causal queries");
  TORCH_CHECK(DecoderAttentionInPlace(q.scalar_type(), q.device(), q.size(3)) &&
                  k.scalar_type() == q.scalar_type() && v.scalar_type() == q.scalar_type() &&
                  out.scalar_type() == q.scalar_type(),
              "decoder attention: no in-place executor for these operands");
  const auto batch = static_cast<int32_t>(q.size(0));
  const auto heads = static_cast<int32_t>(q.size(1));
  const auto q_len = static_cast<int32_t>(q.size(2));
  const auto k_len = static_cast<int32_t>(k.size(2));
  const auto head_dim = static_cast<int32_t>(q.size(3));
  const StepPlan plan(int64_t{batch} * heads, q_len, k_len, causal);
  const int threads = at::get_num_threads();
  if (q.scalar_type() == at::kFloat) {
    const AttentionParams params{q.data_ptr<float>(),
                                 k.data_ptr<float>(),
                                 v.data_ptr<float>(),
                                 out.data_ptr<float>(),
                                 batch,
                                 heads,
                                 q_len,
                                 k_len,
                                 head_dim,
                                 static_cast<float>(scale),
                                 KernelIsa::kAuto,
                                 LayoutOf4d(q),
                                 LayoutOf4d(k),
                                 LayoutOf4d(v),
                                 LayoutOf4d(out)};
    BlockSparseAttentionCpu(params, plan.View(), threads);
    return;
  }
  Bf16AttentionParams params{
      Bf16Bits(q),   Bf16Bits(k),   Bf16Bits(v),   nullptr,        batch,
      heads,         q_len,         k_len,         head_dim,       static_cast<float>(scale),
      LayoutOf4d(q), LayoutOf4d(k), LayoutOf4d(v), LayoutOf4d(out)};
  params.out_bf16 = Bf16Bits(out);
  ChooseBf16AttentionExecutor(head_dim)(params, plan.View(), threads);
}

}  // namespace docsparse
