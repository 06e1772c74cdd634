// Key segments (Bf16AttentionParams::key_segments) for executors that read
// one contiguous key sequence or whole chunks of keys: a copy of the segments
// as one, and which chunks lie in one segment. (The rows of a key wherever it
// lies: FindKeyRows, kernels/block_sparse_plan.h.)
#ifndef DOCSPARSE_KERNELS_KEY_SEGMENTS_H_
#define DOCSPARSE_KERNELS_KEY_SEGMENTS_H_

#include <cstdint>
#include <vector>

#include "kernels/aligned_vector.h"
#include "kernels/block_sparse_attention_amx.h"

namespace docsparse {

// Keys and values [batch, heads, k_len, head_dim], contiguous, assembled
// from a params' segments (zeros between them), and the params reading them.
struct AssembledKeys {
  UninitializedCacheLineVector<uint16_t> k, v;  // every element written by the assembly
  Bf16AttentionParams params;
};

// `p` with its segments copied into one key sequence; `p` unchanged (and no
// copy made) where it has none. The result's params point into the result.
AssembledKeys AssembleKeySegments(const Bf16AttentionParams& p);

// Per chunk c of `chunk_keys` keys, [c·chunk_keys, (c + 1)·chunk_keys) for
// c < k_len / chunk_keys: 1 where the chunk lies in one segment (always
// without segments), else 0.
std::vector<uint8_t> ChunksWithinOneSegment(const Bf16AttentionParams& p, int32_t chunk_keys);

}  // namespace docsparse

#endif  // DOCSPARSE_KERNELS_KEY_SEGMENTS_H_
