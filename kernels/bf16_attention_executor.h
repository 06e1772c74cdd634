// Which bf16 block-sparse attention executor this CPU runs, chosen at run
// time: AMX tiles where the CPU has them (block_sparse_attention_amx.h),
// else AVX512-BF16 dot products (block_sparse_attention_avx512_bf16.h), else
// none, and a bf16 model's attention converts to fp32.
#ifndef DOCSPARSE_KERNELS_BF16_ATTENTION_EXECUTOR_H_
#define DOCSPARSE_KERNELS_BF16_ATTENTION_EXECUTOR_H_

#include <cstdint>

#include "kernels/block_sparse_attention_amx.h"

namespace docsparse {

using Bf16AttentionExecutor = void (*)(const Bf16AttentionParams& params,
                                       const BlockSparsePlanView& plan, int num_threads);

// The executor for heads of `head_dim`, or null where neither runs here.
Bf16AttentionExecutor ChooseBf16AttentionExecutor(int32_t head_dim);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_BF16_ATTENTION_EXECUTOR_H_
