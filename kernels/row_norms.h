// Euclidean norms of rows (bf16 or fp32), for LSG's norm sparsity, which ranks every
// key of a layer by its norm (4,096 tokens x 12 heads: 49,152 rows a layer).
#ifndef DOCSPARSE_KERNELS_ROW_NORMS_H_
#define DOCSPARSE_KERNELS_ROW_NORMS_H_

#include <cstdint>

namespace docsparse {

// out[i] = ‖rows[i·stride .. i·stride + d)‖ in fp32 for i < count (bf16
// bits). On AVX-512 where d is a multiple of 16 (fp32 sums of 16 lanes),
// else scalar (8 partial sums); the two may differ in the last bit.
void Bf16RowNorms(const uint16_t* rows, int64_t count, int64_t stride, int64_t d, float* out);

// Every head's norms over `tokens` tokens, head-major: out[h·tokens + t] =
// ‖rows[t·token_stride + h·head_stride, + d)‖ (bf16 bits), bit for bit what
// Bf16RowNorms gives each row. On AVX-512 with d a multiple of 16, 16
// tokens' sums are reduced together (the same additions, in the same
// order, as one row's) and their square roots taken in one instruction:
// row by row, the reduction and square root of each 64-byte row were most
// of the work.
void Bf16HeadNorms(const uint16_t* rows, int64_t tokens, int64_t token_stride, int64_t heads,
                   int64_t head_stride, int64_t d, float* out);

// The same over fp32 rows (scalar, 8 partial sums).
void FloatRowNorms(const float* rows, int64_t count, int64_t stride, int64_t d, float* out);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_ROW_NORMS_H_
