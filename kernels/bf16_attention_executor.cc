#include "kernels/bf16_attention_executor.h"

#include "kernels/block_sparse_attention_avx512_bf16.h"

namespace docsparse {

Bf16AttentionExecutor ChooseBf16AttentionExecutor(int32_t head_dim) {
  if (AmxBlockSparseAttentionAvailable(head_dim)) return &BlockSparseAttentionAmx;
  if (Avx512Bf16BlockSparseAttentionAvailable(head_dim)) return &BlockSparseAttentionAvx512Bf16;
  return nullptr;
}

}  // namespace docsparse
