// An SBM head sampled on the GPU from the host sampler's tables against the
// host's own draw with the same key: the same distinct keys in every row, the
// same number of copies. Built only with a CUDA LibTorch (scripts/build
// --cuda).
#include "model/attention/sbm_device_sampling.h"

#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <algorithm>
#include <vector>

namespace docsparse {
namespace {

TEST(SbmDeviceSamplingTest, SameGraphAsTheHostForTheSameKey) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  at::manual_seed(9);
  for (const int64_t tokens : {1, 37, 1000}) {
    SCOPED_TRACE(tokens);
    constexpr int k = 8;
    const at::Tensor query_logits = at::randn({tokens, k}) * 2;
    const at::Tensor key_logits = at::randn({tokens, k}) * 2;
    const at::Tensor block = at::softmax(at::randn({k * k}, at::kDouble), 0);
    // β = -2 makes the graph dense enough that rows repeat keys.
    std::unique_ptr<SbmHeadSampler> sampler =
        SbmHeadSampler::Build(query_logits.data_ptr<float>(), key_logits.data_ptr<float>(), tokens,
                              k, block.data_ptr<double>(), -2.0);
    sampler->PrepareSampling();
    const uint64_t key = 0x5eed + static_cast<uint64_t>(tokens);
    const SbmHeadEdges host = sampler->Sample(key);
    absl::StatusOr<SampledDeviceHead> device =
        SampleSbmHeadOnDevice(*sampler, key, at::Device(at::kCUDA, 0));
    ASSERT_TRUE(device.ok()) << device.status();
    EXPECT_EQ(device->multigraph_edges, host.multigraph_edges);
    ASSERT_EQ(device->list.edges, host.edges());
    if (tokens == 1000) {
      EXPECT_GT(host.edges(), 0);
      EXPECT_GT(host.multigraph_edges, host.edges()) << "no key drawn twice: dedup untested";
    }
    const at::Tensor offsets = device->list.row_offsets.cpu();
    const at::Tensor keys = device->list.keys.cpu();
    ASSERT_EQ(offsets.numel(), tokens + 1);
    for (int64_t i = 0; i < tokens; ++i) {
      const int64_t begin = offsets[i].item<int64_t>(), end = offsets[i + 1].item<int64_t>();
      std::vector<int32_t> got(keys.data_ptr<int32_t>() + begin, keys.data_ptr<int32_t>() + end);
      std::vector<int32_t> want(host.keys.begin() + host.row_offsets[i],
                                host.keys.begin() + host.row_offsets[i + 1]);
      std::sort(want.begin(), want.end());
      EXPECT_EQ(got, want) << "row " << i;  // the device's rows come ascending
    }
  }
}

}  // namespace
}  // namespace docsparse
