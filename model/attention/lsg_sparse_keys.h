// The derived (sparse) keys of LSG attention for one sequence, computed as
// the reference's get_sparse_tokens_with_* functions do, plus which of them
// the reference leaves unmasked.
#ifndef DOCSPARSE_MODEL_ATTENTION_LSG_SPARSE_KEYS_H_
#define DOCSPARSE_MODEL_ATTENTION_LSG_SPARSE_KEYS_H_

#include <ATen/ATen.h>

#include <cstdint>
#include <vector>

#include "model/attention/lsg_planner.h"
#include "model/checkpoint/lsg_config.h"

namespace docsparse {

struct LsgDerivedKeys {
  at::Tensor keys;             // [heads, derived_keys, head_dim]
  at::Tensor values;           // [heads, derived_keys, head_dim]
  std::vector<uint8_t> valid;  // [heads * derived_keys]
};

// The derived keys and values. `keys`/`values` are the sequence's token
// keys [heads, padded_tokens, head_dim] (padding rows included, as the
// reference sees them); `first_query` [heads, head_dim] is the first token's
// query (bos_pooling). `lsh_generator` draws LSH's random rotations (lsh
// only; may be undefined otherwise). Requires layout.derived_keys > 0.
//
// Derived keys come back in the inputs' element type (fp32, or bf16 for a
// bf16 model). The selecting types (norm, stride, block_stride) copy rows as
// they are and rank norms in fp32; the pooling and hashing types (pooling,
// bos_pooling, lsh) compute in fp32 as the reference does.
//
// Masking follows the reference: a token is attendable when it is real and
// not the masked first token; a derived key is valid when
//   norm, stride, block_stride: the token it selects is attendable;
//   pooling, lsh: at least one attendable token went into it;
//   bos_pooling: always. The reference computes its mask as the mean of the
//     chunk's additive masks, which overflows to -inf when two or more are
//     finfo.min, and then zeroes every value that is not exactly finfo.min:
//     so no pooled key is ever masked, and padding chunks (adaptive padding)
//     take part. We reproduce that, since it changes real tokens' outputs.
// norm ranks tokens that are not attendable below every attendable one (the
// reference's norm · mask ties them with an attendable key of norm 0 and
// leaves the choice to its sort), so for every type but lsh (with a sparsity
// factor above 1) `valid` follows from the layout alone, and DeriveLsgKeys
// fills it only for lsh: derived keys on a device are never read back to the
// host for it, and the LSG mechanism makes it only with a plan it keeps
// across layers.
LsgDerivedKeys DeriveLsgKeys(const LsgConfig& config, const LsgLayout& layout,
                             const at::Tensor& first_query, const at::Tensor& keys,
                             const at::Tensor& values, at::Generator lsh_generator);
// `valid` where DeriveLsgKeys leaves it empty, from the layout alone,
// [heads * layout.derived_keys].
std::vector<uint8_t> LsgValidFromLayout(const LsgConfig& config, const LsgLayout& layout,
                                        int64_t heads);

// Whether this sparsity type lets padding tokens (the adaptive padding in
// [n, padded_tokens)) influence real tokens, so their rows must be computed.
bool LsgPaddingReachesTokens(const LsgConfig& config);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ATTENTION_LSG_SPARSE_KEYS_H_
