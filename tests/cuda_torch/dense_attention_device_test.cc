// Dense attention on CUDA tensors (the CUDA executor over the real keys of
// each item) against the same mechanism on the CPU and against PyTorch's
// SDPA with a key padding mask, on a padded batch. Built only with a CUDA
// LibTorch (scripts/build --cuda).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <vector>

#include "model/attention/attention.h"
#include "tests/cuda_torch/forward_on_host.h"

namespace docsparse {
namespace {

at::Tensor Forward(const at::Tensor& q, const at::Tensor& k, const at::Tensor& v,
                   const std::vector<int64_t>& lengths) {
  return test::ForwardOnHost(*MakeDenseAttention(), q, k, v, lengths);
}

TEST(DenseAttentionDeviceTest, PaddedBatchMatchesTheCpuAndSdpa) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  at::manual_seed(5);
  const int64_t heads = 6, seq = 517, d = 64;
  const at::Tensor q = at::randn({2, heads, seq, d});
  const at::Tensor k = at::randn({2, heads, seq, d});
  const at::Tensor v = at::randn({2, heads, seq, d});
  const std::vector<int64_t> lengths = {seq, 300};
  const at::Tensor cpu = Forward(q, k, v, lengths);
  const at::Tensor gpu = Forward(q.cuda(), k.cuda(), v.cuda(), lengths);
  const at::Tensor keep = at::arange(seq).lt(300).view({1, 1, 1, seq});
  const at::Tensor sdpa1 = at::scaled_dot_product_attention(q[1].unsqueeze(0), k[1].unsqueeze(0),
                                                            v[1].unsqueeze(0), keep);
  for (int64_t b = 0; b < 2; ++b) {
    EXPECT_LE((gpu[b].narrow(1, 0, lengths[b]) - cpu[b].narrow(1, 0, lengths[b]))
                  .abs()
                  .max()
                  .item<double>(),
              1e-4)
        << "item " << b;
  }
  EXPECT_LE((gpu[1].narrow(1, 0, 300) - sdpa1[0].narrow(1, 0, 300)).abs().max().item<double>(),
            1e-4);
  const at::Tensor half = Forward(q.cuda().to(at::kBFloat16), k.cuda().to(at::kBFloat16),
                                  v.cuda().to(at::kBFloat16), lengths);
  EXPECT_LE((half[0] - cpu[0]).abs().max().item<double>(), 5e-2);
}

}  // namespace
}  // namespace docsparse
