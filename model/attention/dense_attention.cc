#include <ATen/Parallel.h>

#include <cmath>
#include <limits>

#include "kernels/masked_softmax.h"
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

// The fp32 reference: BLAS products, HF's additive mask.
at::Tensor Fp32Context(const AttentionInputs& in, double scale) {
  const int64_t batch = in.query.size(0);
  const int64_t seq = in.query.size(2);
  at::Tensor scores = at::matmul(in.query, in.key.transpose(-1, -2)).mul_(scale);
  // Hugging Face adds finfo(float32).min to padding keys rather than -inf,
  // so a fully padded row stays finite; we do the same for parity.
  at::Tensor positions = at::arange(seq, in.query.options().dtype(at::kLong));
  at::Tensor lengths = at::tensor(in.lengths, at::kLong).unsqueeze(1);
  at::Tensor padding = positions.unsqueeze(0).ge(lengths);  // [batch, seq]
  scores.masked_fill_(padding.view({batch, 1, 1, seq}), std::numeric_limits<float>::lowest());
  return at::matmul(at::softmax(scores, -1), in.value);
}

// A bf16 model: both products in bf16 (oneDNN on AMX or AVX512-BF16), and
// between them one fused pass (kernels/masked_softmax.h) that scales, masks
// and normalises the bf16 scores in fp32 and writes bf16 probabilities in
// place.
at::Tensor Bf16Context(const AttentionInputs& in, float scale) {
  const int64_t batch = in.query.size(0);
  const int64_t heads = in.query.size(1);
  const int64_t seq = in.query.size(2);
  at::Tensor scores =
      at::matmul(in.query.to(at::kBFloat16), in.key.to(at::kBFloat16).transpose(-1, -2))
          .contiguous();  // [batch, heads, seq, seq]
  auto* bits = reinterpret_cast<uint16_t*>(scores.data_ptr<at::BFloat16>());
  const MaskedSoftmaxParams params{bits, bits, in.lengths.data(), heads * seq, seq, scale};
  at::parallel_for(0, batch * heads * seq, 64, [&params](int64_t begin, int64_t end) {
    MaskedSoftmaxBf16Rows(params, begin, end);
  });
  return at::matmul(scores, in.value.to(at::kBFloat16)).to(at::kFloat);
}

class DenseAttention final : public AttentionMechanism {
 public:
  AttentionKind kind() const override { return AttentionKind::kDense; }

  at::Tensor Forward(const AttentionInputs& in,
                     std::vector<ItemAttentionCost>* item_costs) const override {
    const int64_t batch = in.query.size(0);
    const int64_t heads = in.query.size(1);
    const double scale = 1.0 / std::sqrt(static_cast<double>(in.query.size(3)));
    at::Tensor context = in.precision == Precision::kBf16
                             ? Bf16Context(in, static_cast<float>(scale))
                             : Fp32Context(in, scale);

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
