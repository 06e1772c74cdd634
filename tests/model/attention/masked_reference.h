// Test helper: attention in double over an explicit mask, the reference the
// pattern and content mechanisms are held to.
#ifndef DOCSPARSE_TESTS_MODEL_ATTENTION_MASKED_REFERENCE_H_
#define DOCSPARSE_TESTS_MODEL_ATTENTION_MASKED_REFERENCE_H_

#include <ATen/ATen.h>

#include <cmath>
#include <cstdint>
#include <vector>

#include "model/attention/attention.h"

namespace docsparse::testing {

// softmax(q·kᵀ/√d)·v over each query's allowed keys, in double: q, k, v
// [heads, seq, head_dim] (rows [0, n) used), `allowed` [heads, n, n] row-major,
// nonzero where a query reads a key. Returns [heads, n, head_dim].
inline at::Tensor MaskedAttentionReference(const at::Tensor& q, const at::Tensor& k,
                                           const at::Tensor& v, const std::vector<uint8_t>& allowed,
                                           int64_t n) {
  const int64_t heads = q.size(0);
  const at::Tensor mask =
      at::from_blob(const_cast<uint8_t*>(allowed.data()), {heads, n, n}, at::kByte).to(at::kBool);
  const at::Tensor qd = q.to(at::kDouble).slice(1, 0, n);
  const at::Tensor kd = k.to(at::kDouble).slice(1, 0, n);
  const at::Tensor vd = v.to(at::kDouble).slice(1, 0, n);
  at::Tensor scores = at::matmul(qd, kd.transpose(-1, -2)) / std::sqrt(1.0 * q.size(2));
  scores = scores.masked_fill(mask.logical_not(), -INFINITY);
  return at::matmul(at::softmax(scores, -1), vd);
}

// A padded batch of random projections, [lengths.size(), heads, seq, head_dim]
// each (from LibTorch's generator: seed it first), at `layer`, every item
// with `knobs` and the seed first_seed + its index.
inline AttentionInputs RandomPaddedBatch(const std::vector<int64_t>& lengths, int64_t heads,
                                         int64_t seq, int64_t head_dim, at::ScalarType type,
                                         int32_t layer, const AttentionKnobValues& knobs,
                                         uint64_t first_seed) {
  const int64_t batch = static_cast<int64_t>(lengths.size());
  AttentionInputs in;
  in.query = at::randn({batch, heads, seq, head_dim}).to(type);
  in.key = at::randn({batch, heads, seq, head_dim}).to(type);
  in.value = at::randn({batch, heads, seq, head_dim}).to(type);
  in.lengths = lengths;
  in.layer = layer;
  for (int64_t b = 0; b < batch; ++b) {
    ItemAttentionOptions options;
    options.knobs = knobs;
    options.seed = first_seed + static_cast<uint64_t>(b);
    in.item_options.push_back(options);
  }
  return in;
}

}  // namespace docsparse::testing

#endif  // DOCSPARSE_TESTS_MODEL_ATTENTION_MASKED_REFERENCE_H_
