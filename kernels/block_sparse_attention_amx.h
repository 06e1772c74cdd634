// The block-sparse attention executor in bf16 on Intel AMX tiles: the same
// plans and online softmax as BlockSparseAttentionCpu (block_sparse_attention.h),
// with both products (q·kᵀ and p·v) on the tile unit in bf16 with fp32
// accumulation, and the softmax in fp32 on AVX-512 between them.
//
// Per (item, head, query block), keys are gathered from the block's spans
// into tiles of up to 768 keys, packed once per tile into the layouts
// the tile unit reads (pairs of bf16 along the reduction dimension), so that
// short spans (LSG's global and sparse keys) share a tile instead of each
// padding one. Queries whose row has no span get zeros, as in the fp32 kernel.
#ifndef DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_AMX_H_
#define DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_AMX_H_

#include <cstdint>

#include "kernels/block_sparse_attention.h"

namespace docsparse {

// Key segments of bf16 bits (block_sparse_plan.h).
using KeySegment = KeySegmentOf<uint16_t>;

struct Bf16AttentionParams {
  const uint16_t* q;  // [batch, heads, q_len, head_dim] bf16 bits, laid out as q_layout says
  const uint16_t* k;  // [batch, heads, k_len, head_dim] bf16 bits
  const uint16_t* v;  // [batch, heads, k_len, head_dim] bf16 bits
  float* out;         // [batch, heads, q_len, head_dim] fp32, or null: see out_bf16
  int32_t batch;
  int32_t heads;
  int32_t q_len;
  int32_t k_len;
  int32_t head_dim;
  float scale;  // applied to the fp32 scores, usually 1 / sqrt(head_dim)
  // Default: contiguous. k_layout and v_layout need even row strides (the
  // keys are gathered as pairs of bf16).
  RowLayout q_layout = {}, k_layout = {}, v_layout = {}, out_layout = {};
  uint16_t* out_bf16 = nullptr;  // the output in bf16 instead, where out is null
  // The AMX executor writes out_bf16 rows whose head_dim is a multiple of 32
  // and that start 64-byte aligned with non-temporal stores, which do not read
  // the lines they overwrite and leave them out of the caches: for a context
  // far larger than the caches (model/attention/context_buffer.h). Same
  // values either way; the AVX512-BF16 executor ignores it.
  bool stream_out = false;
  // Where set, the key sequence is these segments (ascending, disjoint) and
  // k and v are unused; no span may reach a key outside them. LSG's extended
  // keys [global ; derived ; tokens] are read where the projection and the
  // derivation left them instead of from an assembled copy (moving that copy
  // through memory took 5% of a 4,096-token forward).
  const KeySegment* key_segments = nullptr;
  int32_t num_key_segments = 0;
};

// True where this process can run the AMX executor for heads of this size:
// the CPU has AMX-BF16 and AVX-512 enabled by the OS, Linux granted this
// process the tile data state, and head_dim is 32, 64, 96 or 128.
bool AmxBlockSparseAttentionAvailable(int32_t head_dim);

// softmax(q·kᵀ·scale) v over each query's spans, as BlockSparseAttentionCpu.
// Requires AmxBlockSparseAttentionAvailable(params.head_dim).
void BlockSparseAttentionAmx(const Bf16AttentionParams& params, const BlockSparsePlanView& plan,
                             int num_threads);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_AMX_H_
