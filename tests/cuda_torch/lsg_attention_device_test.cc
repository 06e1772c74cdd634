// The LSG attention mechanism on CUDA tensors (derived keys by tensor
// operations on the device, the plan uploaded, the CUDA executor) against the
// same mechanism on the CPU, for every sparsity type, on a padded batch.
// lsh hashes by an argmax over products of the same rotations on both sides;
// a near tie may land in another bucket on the device (other summation
// orders), which changes that derived key for the rows that see it, so lsh is
// held to most rows rather than every row. Built only with a CUDA LibTorch
// (scripts/build --cuda).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <string>
#include <vector>

#include "model/attention/lsg_attention.h"
#include "tests/cuda_torch/forward_on_host.h"

namespace docsparse {
namespace {

struct Case {
  LsgSparsity sparsity;
  const char* name;
};

using test::ForwardOnHost;

TEST(LsgAttentionDeviceTest, EverySparsityTypeMatchesTheCpuOnAPaddedBatch) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  at::manual_seed(3);
  const int64_t heads = 4, seq = 1024 + 1, d = 64;  // one global token first
  const at::Tensor q = at::randn({2, heads, seq, d});
  const at::Tensor k = at::randn({2, heads, seq, d});
  const at::Tensor v = at::randn({2, heads, seq, d});
  const std::vector<int64_t> lengths = {seq, seq - 301};
  for (const Case& c :
       {Case{LsgSparsity::kNorm, "norm"}, Case{LsgSparsity::kPooling, "pooling"},
        Case{LsgSparsity::kStride, "stride"}, Case{LsgSparsity::kBlockStride, "block_stride"},
        Case{LsgSparsity::kBosPooling, "bos_pooling"}, Case{LsgSparsity::kLsh, "lsh"},
        Case{LsgSparsity::kNone, "none"}}) {
    SCOPED_TRACE(c.name);
    LsgConfig config;
    config.block_size = 128;
    config.sparse_block_size = 128;
    config.sparsity_factor = 4;
    config.sparsity_type = c.sparsity;
    const auto lsg = MakeLsgAttention(config);
    const at::Tensor want = ForwardOnHost(*lsg, q, k, v, lengths);
    const at::Tensor got = ForwardOnHost(*lsg, q.cuda(), k.cuda(), v.cuda(), lengths);
    const bool lsh = c.sparsity == LsgSparsity::kLsh;
    // Only real rows: padding rows are whatever each path leaves there.
    for (int64_t b = 0; b < 2; ++b) {
      // [heads, rows]: each row's largest difference.
      const at::Tensor row_error =
          (got[b].narrow(1, 0, lengths[b]) - want[b].narrow(1, 0, lengths[b])).abs().amax(-1);
      if (lsh) {
        EXPECT_GE(row_error.le(1e-4).to(at::kFloat).mean().item<double>(), 0.98) << "item " << b;
      } else {
        EXPECT_LE(row_error.max().item<double>(), 1e-4) << "item " << b;
      }
    }
    // bf16 activations (the same derived keys on both sides: norms of the
    // same bf16 keys): the device's bf16 products within bf16 rounding of the
    // CPU's fp32 ones.
    const at::Tensor q16 = q.to(at::kBFloat16), k16 = k.to(at::kBFloat16),
                     v16 = v.to(at::kBFloat16);
    const at::Tensor want16 = ForwardOnHost(*lsg, q16, k16, v16, lengths);
    const at::Tensor got16 = ForwardOnHost(*lsg, q16.cuda(), k16.cuda(), v16.cuda(), lengths);
    const at::Tensor row_error16 = (got16[0] - want16[0]).abs().amax(-1);
    if (lsh) {
      EXPECT_GE(row_error16.le(3e-2).to(at::kFloat).mean().item<double>(), 0.98);
    } else {
      EXPECT_LE(row_error16.max().item<double>(), 3e-2);
    }
  }
}

}  // namespace
}  // namespace docsparse
