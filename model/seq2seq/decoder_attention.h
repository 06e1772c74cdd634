// A decode step's attention on our CPU executors, reading every operand
// where it lies: the step's queries in the projection's output, the keys and
// values in the self-attention cache or a sequence's cross-attention memory,
// the context written straight into the [rows, steps, heads, head_dim]
// buffer the output projection reads.
//
// Through LibTorch the step ran as batched products on BLAS (one [1 x d] by
// [d x keys] product per row and head, each packing its keys first) and a
// separate softmax: a BART-base-shaped step at 4 beams x 4 texts spent a
// third of its time there on a 2-core Zen 3 (docs/BENCHMARKS.md,
// "CPU engine, seventeenth part").
#ifndef DOCSPARSE_MODEL_SEQ2SEQ_DECODER_ATTENTION_H_
#define DOCSPARSE_MODEL_SEQ2SEQ_DECODER_ATTENTION_H_

#include <ATen/ATen.h>

namespace docsparse {

// Whether AttendInPlace serves operands of `type` on `device` with heads of
// `head_dim`: fp32 on any CPU, bf16 where the CPU has a bf16 executor (AMX
// or AVX512-BF16); never on a CUDA device.
bool DecoderAttentionInPlace(at::ScalarType type, at::Device device, int64_t head_dim);

// out = softmax(q·kᵀ·scale)·v for the [batch, heads, q_len, head_dim] views q
// and out and [batch, heads, k_len, head_dim] views k and v (any strides
// with head_dim contiguous; all of one type). With `causal`, query i sees
// keys [0, k_len - q_len + i] (the step's tokens come last); otherwise every
// key. Only where DecoderAttentionInPlace holds.
void AttendInPlace(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                   const at::Tensor& out, double scale, bool causal);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_SEQ2SEQ_DECODER_ATTENTION_H_
