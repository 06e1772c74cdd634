// A model's batch limits: its docsparse.json's where it sets them, else the
// device's defaults, with a smaller token cap where a batch computes on one
// thread.
#include "server/model_batchers.h"

#include <gtest/gtest.h>

namespace docsparse {
namespace {

TEST(BatchLimitsTest, TheTokenCapIsTheDevicesDefaultSmallerForOneThreadBatchesOnTheCpu) {
  const BatchingConfig unset;
  EXPECT_EQ(LimitsOf(unset, false, 0, 2).max_batch_tokens, BatchingConfig::kCpuMaxBatchTokens);
  EXPECT_EQ(LimitsOf(unset, false, 0, 0).max_batch_tokens, BatchingConfig::kCpuMaxBatchTokens);
  EXPECT_EQ(LimitsOf(unset, false, 0, 1).max_batch_tokens,
            BatchingConfig::kCpuOneThreadMaxBatchTokens);
  EXPECT_LT(BatchingConfig::kCpuOneThreadMaxBatchTokens, BatchingConfig::kCpuMaxBatchTokens);
  // A GPU's batches are priced for the GPU, whatever its host threads.
  EXPECT_EQ(LimitsOf(unset, true, 0, 1).max_batch_tokens, BatchingConfig::kGpuMaxBatchTokens);
}

TEST(BatchLimitsTest, AModelsOwnCapsAndTheSizeOverrideWin) {
  BatchingConfig config;
  config.max_batch_size = 8;
  config.max_queue_delay_ms = 3;
  config.max_batch_tokens = 5000;
  config.max_batch_attention_gflops = 7.5;
  const BatchLimits limits = LimitsOf(config, false, 0, 1);
  EXPECT_EQ(limits.max_batch_size, 8);
  EXPECT_EQ(limits.max_queue_delay, std::chrono::milliseconds(3));
  EXPECT_EQ(limits.max_batch_tokens, 5000);
  EXPECT_DOUBLE_EQ(limits.max_batch_attention_flops, 7.5e9);
  EXPECT_EQ(LimitsOf(config, false, 1, 1).max_batch_size, 1);
  EXPECT_DOUBLE_EQ(LimitsOf(BatchingConfig{}, false, 0, 1).max_batch_attention_flops,
                   BatchingConfig::kCpuMaxBatchAttentionGflops * 1e9);
}

}  // namespace
}  // namespace docsparse
