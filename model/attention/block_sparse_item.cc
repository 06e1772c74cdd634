#include "model/attention/block_sparse_item.h"

#include <cmath>
#include <string>

#include "kernels/block_sparse_attention.h"
#include "kernels/key_segments.h"
#include "model/attention/block_sparse_attention_device.h"
#include "model/attention/context_buffer.h"

namespace docsparse {
namespace {

// A bf16 tensor's storage as the kernels take it.
const uint16_t* Bf16Bits(const at::Tensor& tensor) {
  return reinterpret_cast<const uint16_t*>(tensor.data_ptr<at::BFloat16>());
}

// The pieces as one [heads, k_len, d] sequence on their device, zeros
// between them, for the device executor. On the CPU every executor reads the
// pieces where they lie instead (key segments).
at::Tensor AssemblePieces(const std::vector<KeyPiece>& pieces, int32_t k_len, bool values) {
  const auto rows = [values](const KeyPiece& piece) -> const at::Tensor& {
    return values ? piece.v : piece.k;
  };
  const at::Tensor& first = rows(pieces.front());
  at::Tensor out = at::zeros({first.size(0), k_len, first.size(2)}, first.options());
  for (const KeyPiece& piece : pieces) {
    out.narrow(1, piece.begin, rows(piece).size(1)).copy_(rows(piece));
  }
  return out;
}

// The pieces as key segments of `Element` (the kernels' type for `Storage`,
// LibTorch's), converted where they are not in it; `keep` holds the
// tensors the segments point into.
template <typename Element, typename Storage>
std::vector<KeySegmentOf<Element>> SegmentsOf(const std::vector<KeyPiece>& pieces,
                                              std::vector<at::Tensor>* keep) {
  const at::ScalarType type = c10::CppTypeToScalarType<Storage>::value;
  std::vector<KeySegmentOf<Element>> segments;
  for (const KeyPiece& piece : pieces) {
    keep->push_back(piece.k.to(type));
    keep->push_back(piece.v.to(type));
    const at::Tensor& k = (*keep)[keep->size() - 2];
    const at::Tensor& v = keep->back();
    segments.push_back({piece.begin, static_cast<int32_t>(k.size(1)),
                        reinterpret_cast<const Element*>(k.data_ptr<Storage>()),
                        reinterpret_cast<const Element*>(v.data_ptr<Storage>()), LayoutOf3d(k),
                        LayoutOf3d(v)});
  }
  return segments;
}

// The executors' parameters for q ([heads, q_len, d], in the executor's
// type) against k_len keys into `out`; the keys and values are the caller's
// to set (tensors or segments).
AttentionParams Fp32ParamsFor(const at::Tensor& q32, int32_t k_len, at::Tensor& out) {
  const int32_t d = static_cast<int32_t>(q32.size(2));
  AttentionParams params{q32.data_ptr<float>(),
                         nullptr,
                         nullptr,
                         out.data_ptr<float>(),
                         1,
                         static_cast<int32_t>(q32.size(0)),
                         static_cast<int32_t>(q32.size(1)),
                         k_len,
                         d,
                         static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)))};
  params.q_layout = LayoutOf3d(q32);
  params.out_layout = LayoutOf3d(out);
  return params;
}

Bf16AttentionParams Bf16ParamsFor(const at::Tensor& q16, int32_t k_len, at::Tensor& out) {
  const int32_t d = static_cast<int32_t>(q16.size(2));
  Bf16AttentionParams params{Bf16Bits(q16),
                             nullptr,
                             nullptr,
                             nullptr,
                             1,
                             static_cast<int32_t>(q16.size(0)),
                             static_cast<int32_t>(q16.size(1)),
                             k_len,
                             d,
                             static_cast<float>(1.0 / std::sqrt(static_cast<double>(d)))};
  params.q_layout = LayoutOf3d(q16);
  params.out_layout = LayoutOf3d(out);
  params.out_bf16 = reinterpret_cast<uint16_t*>(out.data_ptr<at::BFloat16>());
  params.stream_out = StreamsContext(out);
  return params;
}

}  // namespace

BlockSparseBatch PrepareBlockSparseBatch(const AttentionInputs& in) {
  const bool on_device = in.query.is_cuda();
  const Bf16AttentionExecutor bf16 =
      in.precision == Precision::kBf16 && !on_device
          ? ChooseBf16AttentionExecutor(static_cast<int32_t>(in.query.size(3)))
          : nullptr;
  return {bf16, ContextBuffer(in.query, on_device         ? in.query.scalar_type()
                                        : bf16 != nullptr ? at::kBFloat16
                                                          : at::kFloat)};
}

void RunBlockSparseItem(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                        const BlockSparsePlanView& plan, Bf16AttentionExecutor bf16, int threads,
                        at::Tensor out) {
  const int32_t k_len = static_cast<int32_t>(k.size(1));
  if (q.is_cuda()) {
    const float scale = static_cast<float>(1.0 / std::sqrt(static_cast<double>(q.size(2))));
    const absl::StatusOr<at::Tensor> context =
        BlockSparseAttentionOnDevice(q.unsqueeze(0), k.unsqueeze(0), v.unsqueeze(0), plan, scale);
    TORCH_CHECK(context.ok(), std::string(context.status().message()));
    // Rows past the plan came back zero.
    out.copy_((*context)[0]);
    return;
  }
  if (bf16 != nullptr) {
    const at::Tensor q16 = q.to(at::kBFloat16);
    const at::Tensor k16 = k.to(at::kBFloat16);
    const at::Tensor v16 = v.to(at::kBFloat16);
    Bf16AttentionParams params = Bf16ParamsFor(q16, k_len, out);
    params.k = Bf16Bits(k16);
    params.v = Bf16Bits(v16);
    params.k_layout = LayoutOf3d(k16);
    params.v_layout = LayoutOf3d(v16);
    bf16(params, plan, threads);
    return;
  }
  const at::Tensor q32 = q.to(at::kFloat);
  const at::Tensor k32 = k.to(at::kFloat);
  const at::Tensor v32 = v.to(at::kFloat);
  AttentionParams params = Fp32ParamsFor(q32, k_len, out);
  params.k = k32.data_ptr<float>();
  params.v = v32.data_ptr<float>();
  params.k_layout = LayoutOf3d(k32);
  params.v_layout = LayoutOf3d(v32);
  BlockSparseAttentionCpu(params, plan, threads);
}

void RunBlockSparseItem(const at::Tensor& q, const std::vector<KeyPiece>& pieces, int32_t k_len,
                        const BlockSparsePlanView& plan, Bf16AttentionExecutor bf16, int threads,
                        at::Tensor out) {
  if (q.is_cuda()) {
    RunBlockSparseItem(q, AssemblePieces(pieces, k_len, false), AssemblePieces(pieces, k_len, true),
                       plan, bf16, threads, out);
    return;
  }
  if (bf16 == nullptr) {  // fp32: the pieces read where they lie, as the bf16 executors do
    const at::Tensor q32 = q.to(at::kFloat);
    std::vector<at::Tensor> keep;  // the fp32 pieces, alive until the executor returns
    const std::vector<Fp32KeySegment> segments = SegmentsOf<float, float>(pieces, &keep);
    AttentionParams params = Fp32ParamsFor(q32, k_len, out);
    params.key_segments = segments.data();
    params.num_key_segments = static_cast<int32_t>(segments.size());
    BlockSparseAttentionCpu(params, plan, threads);
    return;
  }
  const at::Tensor q16 = q.to(at::kBFloat16);
  std::vector<at::Tensor> keep;  // the bf16 pieces, alive until the executor returns
  const std::vector<KeySegment> segments = SegmentsOf<uint16_t, at::BFloat16>(pieces, &keep);
  Bf16AttentionParams params = Bf16ParamsFor(q16, k_len, out);
  params.key_segments = segments.data();
  params.num_key_segments = static_cast<int32_t>(segments.size());
  bf16(params, plan, threads);
}

}  // namespace docsparse
