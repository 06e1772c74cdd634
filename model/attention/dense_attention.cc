#include <ATen/Parallel.h>

#include <cmath>
#include <limits>
#include <string>

#include "kernels/bf16_attention_executor.h"
#include "kernels/block_sparse_attention.h"
#include "kernels/block_sparse_attention_amx.h"
#include "kernels/cpu_features.h"
#include "kernels/masked_softmax.h"
#include "model/attention/attention.h"
#include "model/attention/block_sparse_attention_device.h"
#include "model/attention/context_buffer.h"

namespace docsparse {

namespace {

// The fp32 reference: BLAS products, HF's additive mask (on the inputs'
// values in fp32 whatever their type).
at::Tensor Fp32Context(const AttentionInputs& in, double scale) {
  const int64_t batch = in.query.size(0);
  const int64_t seq = in.query.size(2);
  at::Tensor scores =
      at::matmul(in.query.to(at::kFloat), in.key.to(at::kFloat).transpose(-1, -2)).mul_(scale);
  // Hugging Face adds finfo(float32).min to padding keys rather than -inf,
  // so a fully padded row stays finite; we do the same for parity.
  at::Tensor positions = at::arange(seq, in.query.options().dtype(at::kLong));
  at::Tensor lengths = at::tensor(in.lengths, at::kLong).unsqueeze(1);
  at::Tensor padding = positions.unsqueeze(0).ge(lengths);  // [batch, seq]
  scores.masked_fill_(padding.view({batch, 1, 1, seq}), std::numeric_limits<float>::lowest());
  return at::matmul(at::softmax(scores, -1), in.value.to(at::kFloat));
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

// Dense attention as a block-sparse plan for our executors: every query
// block of item b attends to the single span of its real keys [0, length);
// blocks wholly in b's padding get no span (their rows come out as zeros).
struct DensePlan {
  std::vector<int32_t> block_starts;
  std::vector<int32_t> span_offsets{0};
  std::vector<KeySpan> spans;

  DensePlan(const std::vector<int64_t>& lengths, int64_t heads, int64_t seq, int32_t block_rows) {
    for (int64_t start = 0; start < seq; start += block_rows) {
      block_starts.push_back(static_cast<int32_t>(start));
    }
    block_starts.push_back(static_cast<int32_t>(seq));
    const size_t blocks = block_starts.size() - 1;
    for (int64_t length : lengths) {
      for (int64_t h = 0; h < heads; ++h) {
        for (size_t block = 0; block < blocks; ++block) {
          if (block_starts[block] < length) spans.push_back({0, static_cast<int32_t>(length)});
          span_offsets.push_back(static_cast<int32_t>(spans.size()));
        }
      }
    }
  }
  BlockSparsePlanView View() const {
    return {static_cast<int32_t>(block_starts.size() - 1), block_starts.data(), span_offsets.data(),
            spans.data()};
  }
};

// What both executors take: q, k and v in `type` where they lie (no copy
// when they are already in it), the context buffer, and the plan over query
// blocks of `block_rows`.
struct DenseOperands {
  at::Tensor q, k, v, context;
  DensePlan plan;
  int32_t batch, heads, q_len, k_len, head_dim;

  DenseOperands(const AttentionInputs& in, at::ScalarType type, int32_t block_rows)
      : q(in.query.to(type)),
        k(in.key.to(type)),
        v(in.value.to(type)),
        context(ContextBuffer(in.query, type)),
        plan(in.lengths, q.size(1), q.size(2), block_rows),
        batch(static_cast<int32_t>(q.size(0))),
        heads(static_cast<int32_t>(q.size(1))),
        q_len(static_cast<int32_t>(q.size(2))),
        k_len(static_cast<int32_t>(k.size(2))),
        head_dim(static_cast<int32_t>(q.size(3))) {}
};

// A bf16 model on AMX or AVX512-BF16: the bf16 executor reads q, k and v
// where they lie (the projection's interleaved output) and writes a bf16
// context; the score matrix is never materialised. Blocks of 256 queries:
// the executor packs a block's keys once for all its rows (512 tokens at
// d=32 on AMX: 10% faster than blocks of 128; 512 leaves two threads with
// too few blocks to share).
at::Tensor Bf16KernelContext(const AttentionInputs& in, float scale, int num_threads,
                             Bf16AttentionExecutor executor) {
  const DenseOperands o(in, at::kBFloat16, /*block_rows=*/256);
  const auto bits = [](const at::Tensor& t) {
    return reinterpret_cast<uint16_t*>(t.data_ptr<at::BFloat16>());
  };
  Bf16AttentionParams params{bits(o.q),       bits(o.k),
                             bits(o.v),       nullptr,
                             o.batch,         o.heads,
                             o.q_len,         o.k_len,
                             o.head_dim,      scale,
                             LayoutOf4d(o.q), LayoutOf4d(o.k),
                             LayoutOf4d(o.v), LayoutOf4d(o.context)};
  params.out_bf16 = bits(o.context);
  params.stream_out = StreamsContext(o.context);
  executor(params, o.plan.View(), num_threads);
  return o.context;
}

// An fp32 model on a CPU with AVX2 or AVX-512: the block-sparse executor's
// online softmax over the same single spans, reading q, k and v in place
// (BLAS's batched [seq x 32] products and a separate softmax ran at ~70
// GFLOP/s). Blocks of 256 queries transpose each key tile once for more rows:
// attention alone at 512 tokens (AVX-512) ran ~15% faster than with 64.
at::Tensor SimdContext(const AttentionInputs& in, float scale, int num_threads) {
  const DenseOperands o(in, at::kFloat, /*block_rows=*/256);
  const AttentionParams params{o.q.data_ptr<float>(),
                               o.k.data_ptr<float>(),
                               o.v.data_ptr<float>(),
                               o.context.data_ptr<float>(),
                               o.batch,
                               o.heads,
                               o.q_len,
                               o.k_len,
                               o.head_dim,
                               scale,
                               KernelIsa::kAuto,
                               LayoutOf4d(o.q),
                               LayoutOf4d(o.k),
                               LayoutOf4d(o.v),
                               LayoutOf4d(o.context)};
  BlockSparseAttentionCpu(params, o.plan.View(), num_threads);
  return o.context;
}

// On a CUDA device: the CUDA block-sparse executor over the same single
// spans, in the activations' type (tensor cores for bf16/fp16), the context
// copied into the merged-head buffer the CPU paths write.
at::Tensor DeviceContext(const AttentionInputs& in, float scale) {
  const DenseOperands o(in, in.query.scalar_type(), /*block_rows=*/128);
  const absl::StatusOr<at::Tensor> context =
      BlockSparseAttentionOnDevice(o.q, o.k, o.v, o.plan.View(), scale);
  TORCH_CHECK(context.ok(), std::string(context.status().message()));
  o.context.copy_(*context);
  return o.context;
}

class DenseAttention final : public AttentionMechanism {
 public:
  AttentionKind kind() const override { return AttentionKind::kDense; }

  at::Tensor Forward(const AttentionInputs& in,
                     std::vector<ItemAttentionCost>* item_costs) const override {
    const int64_t batch = in.query.size(0);
    const int64_t heads = in.query.size(1);
    const int64_t head_dim = in.query.size(3);
    const double scale = 1.0 / std::sqrt(static_cast<double>(head_dim));
    const int threads = at::get_num_threads();
    at::Tensor context;
    if (in.query.is_cuda()) {
      context = DeviceContext(in, static_cast<float>(scale));
    } else if (in.precision == Precision::kBf16 && HasNativeBf16(HostCpuFeatures())) {
      const Bf16AttentionExecutor executor =
          ChooseBf16AttentionExecutor(static_cast<int32_t>(head_dim));
      context = executor != nullptr
                    ? Bf16KernelContext(in, static_cast<float>(scale), threads, executor)
                    : Bf16Context(in, static_cast<float>(scale));
    } else {
      // fp32, or a bf16 model on a CPU without bf16 products (AVX2 only):
      // its values on the fp32 executor, instead of LibTorch's emulated bf16
      // products.
      context = HostCpuFeatures().avx2_fma && head_dim % 8 == 0
                    ? SimdContext(in, static_cast<float>(scale), threads)
                    : Fp32Context(in, scale);
    }

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
