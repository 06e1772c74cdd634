#include <cmath>
#include <limits>

#include "model/attention/attention.h"

namespace docsparse {

std::string_view AttentionKindName(AttentionKind kind) {
  switch (kind) {
    case AttentionKind::kDense:
      return "dense";
    case AttentionKind::kLsg:
      return "lsg";
    case AttentionKind::kSbm:
      return "sbm";
  }
  return "unknown";
}

namespace {

class DenseAttention final : public AttentionMechanism {
 public:
  AttentionKind kind() const override { return AttentionKind::kDense; }

  at::Tensor Forward(const AttentionInputs& in,
                     std::vector<ItemAttentionCost>* item_costs) const override {
    const int64_t batch = in.query.size(0);
    const int64_t heads = in.query.size(1);
    const int64_t seq = in.query.size(2);
    const double scale = 1.0 / std::sqrt(static_cast<double>(in.query.size(3)));
    // A bf16 model multiplies in bf16 (AMX or AVX512-BF16 through oneDNN);
    // the scores come back to fp32 before the mask and the softmax.
    const bool bf16 = in.precision == Precision::kBf16;
    const auto product = [bf16](const at::Tensor& a, const at::Tensor& b) {
      if (!bf16) return at::matmul(a, b);
      return at::matmul(a.to(at::kBFloat16), b.to(at::kBFloat16)).to(at::kFloat);
    };
    at::Tensor scores = product(in.query, in.key.transpose(-1, -2)).mul_(scale);
    // Hugging Face adds finfo(float32).min to padding keys rather than -inf,
    // so a fully padded row stays finite; we do the same for parity.
    at::Tensor positions = at::arange(seq, in.query.options().dtype(at::kLong));
    at::Tensor lengths = at::tensor(in.lengths, at::kLong).unsqueeze(1);
    at::Tensor padding = positions.unsqueeze(0).ge(lengths);  // [batch, seq]
    scores.masked_fill_(padding.view({batch, 1, 1, seq}), std::numeric_limits<float>::lowest());
    at::Tensor context = product(at::softmax(scores, -1), in.value);

    item_costs->assign(batch, ItemAttentionCost{});
    for (int64_t b = 0; b < batch; ++b) {
      (*item_costs)[b].head_edges.assign(heads, in.lengths[b] * in.lengths[b]);
    }
    return context;
  }
};

}  // namespace

std::unique_ptr<AttentionMechanism> MakeDenseAttention() {
  return std::make_unique<DenseAttention>();
}

}  // namespace docsparse
