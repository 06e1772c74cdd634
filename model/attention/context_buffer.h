// Where attention reads its operands and writes its context, as the
// executors take them (kernels/block_sparse_attention.h: RowLayout), so that
// neither the projection's interleaved q/k/v nor the merged heads are copied.
#ifndef DOCSPARSE_MODEL_ATTENTION_CONTEXT_BUFFER_H_
#define DOCSPARSE_MODEL_ATTENTION_CONTEXT_BUFFER_H_

#include <ATen/ATen.h>

#include "kernels/block_sparse_attention.h"

namespace docsparse {

// A [batch, heads, len, head_dim] tensor's strides.
inline RowLayout LayoutOf4d(const at::Tensor& t) {
  TORCH_CHECK(t.dim() == 4 && t.stride(3) == 1, "attention operand: head_dim must be contiguous");
  return RowLayout{t.stride(0), t.stride(1), t.stride(2)};
}

// One item's [heads, len, head_dim] tensor's strides (as a batch of one).
inline RowLayout LayoutOf3d(const at::Tensor& t) {
  TORCH_CHECK(t.dim() == 3 && t.stride(2) == 1, "attention operand: head_dim must be contiguous");
  return RowLayout{0, t.stride(0), t.stride(1)};
}

// The context in [batch, seq, heads, head_dim] memory, returned as the
// [batch, heads, seq, head_dim] view the attention interface promises: the
// encoder's merge of the heads is then free. Uninitialised.
inline at::Tensor ContextBuffer(const at::Tensor& query, at::ScalarType type) {
  return at::empty({query.size(0), query.size(2), query.size(1), query.size(3)},
                   query.options().dtype(type))
      .permute({0, 2, 1, 3});
}

// Whether a bf16 executor should write `out` (one item's context, or a
// batch's) with non-temporal stores (Bf16AttentionParams::stream_out): above
// 8 MB. minilm-lsg at 16,384 tokens (12.6 MB a layer), alternated: attention
// 24.4-24.9 -> 22.9-23.2 ms a layer, the out-projection that reads it next
// unchanged; at 4,096 tokens (3.1 MB, still in the caches for the
// out-projection) the layer's second half ran ~0.4 ms slower streamed.
inline bool StreamsContext(const at::Tensor& out) {
  constexpr int64_t kStreamedContextMinBytes = int64_t{8} << 20;
  return out.numel() * out.element_size() > kStreamedContextMinBytes;
}

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_CONTEXT_BUFFER_H_
