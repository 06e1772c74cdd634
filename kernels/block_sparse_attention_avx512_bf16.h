// The block-sparse attention executor in bf16 for CPUs with AVX512-BF16 but
// no AMX (AMD Zen 4, Intel Cooper Lake): both products (q·kᵀ and p·v) by
// VDPBF16PS, pairs of bf16 multiplied and summed into fp32 lanes, and the
// softmax in fp32 between them, as the AMX executor does on tiles
// (block_sparse_attention_amx.h; the same parameters, plans and results up
// to rounding). Without it a bf16 model's attention on such CPUs converted
// q, k and v to fp32 and ran the fp32 executor at the fp32 rate.
//
// Each (item, head)'s keys are packed once, in chunks of 16 as query blocks
// first reach them, into pairs along head_dim (for q·kᵀ, by 16 x 16
// transposes) and pairs along the keys (for p·v), key segments read where
// they lie. Per query block, key tiles of up to 256 packed keys; eight query
// rows at a time take the whole tile: scores in registers turned straight into probabilities (a
// per-row reference shift instead of a running maximum, raised rarely; no fp32 score tile), rounded
// to bf16 as on AMX, and p·v while they are in L1.
#ifndef DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_AVX512_BF16_H_
#define DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_AVX512_BF16_H_

#include <cstdint>

#include "kernels/block_sparse_attention_amx.h"

namespace docsparse {

// True where the CPU has AVX-512 (F, BW, VL, enabled by the OS) with BF16
// and head_dim is a multiple of 16.
bool Avx512Bf16BlockSparseAttentionAvailable(int32_t head_dim);

// softmax(q·kᵀ·scale) v over each query's spans, as BlockSparseAttentionCpu.
// k_layout and v_layout need even row strides (rows are read as pairs).
// Requires Avx512Bf16BlockSparseAttentionAvailable(params.head_dim).
void BlockSparseAttentionAvx512Bf16(const Bf16AttentionParams& params,
                                    const BlockSparsePlanView& plan, int num_threads);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_BLOCK_SPARSE_ATTENTION_AVX512_BF16_H_
