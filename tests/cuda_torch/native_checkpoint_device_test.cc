// The native long-document checkpoints on a CUDA device, each with its own
// attention as the server serves it (tests/model/encoder/served_checkpoint.h
// on the device): the tiny Longformer (window and global rows from their own
// projections, through our CUDA block-sparse executor and LibTorch on the
// device), ModernBERT (rotary positions, GeGLU, its sliding and full
// layers) and BigBird (its blocks, block 0's copies gathered on the device)
// against transformers' outputs, fp32 within 1e-4 as on the CPU.
// Built only with a CUDA LibTorch (scripts/build --cuda); skips without a GPU.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "model/encoder/encoder.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/json_tensor.h"
#include "tests/model/encoder/served_checkpoint.h"

namespace docsparse {
namespace {

using testing::FixturePath;

// Every case of the fixture's expected.json; Longformer's cases carry their
// global tokens and window as request knobs, BigBird's their knobs.
void ExpectCasesMatchTransformers(const std::string& fixture) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const std::string dir = FixturePath(fixture);
  const testing::ServedCheckpoint loaded =
      testing::LoadAsServed(dir, Precision::kFp32, at::Device(at::kCUDA, 0));
  ASSERT_NE(loaded.encoder, nullptr);
  const nlohmann::json expected = nlohmann::json::parse(testing::ReadFile(dir + "/expected.json"));
  for (const nlohmann::json& c : expected["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    EncoderBatch batch = testing::SequencesOf(c);
    if (c.contains("window")) {
      ItemAttentionOptions options;
      options.knobs = {{"global_tokens", c["global_tokens"].get<double>()},
                       {"window", c["window"].get<double>()}};
      batch.attention_options.assign(batch.sequences.size(), options);
    }
    if (c.contains("knobs")) {
      ItemAttentionOptions options;
      for (const auto& [name, value] : c["knobs"].items()) {
        options.knobs[name] = value.get<double>();
      }
      batch.attention_options.assign(batch.sequences.size(), options);
    }
    const auto lengths = c["lengths"].get<std::vector<int64_t>>();
    absl::StatusOr<EncoderOutput> out = loaded.encoder->Forward(batch, nullptr);
    ASSERT_TRUE(out.ok()) << out.status();
    const at::Tensor want = testing::JsonToTensor(c["last_hidden_state"]);
    for (size_t i = 0; i < lengths.size(); ++i) {
      const int64_t n = lengths[i];
      EXPECT_LE(
          (out->hidden[i].narrow(0, 0, n) - want[i].narrow(0, 0, n)).abs().max().item<double>(),
          1e-4)
          << "row " << i;
    }
  }
}

TEST(NativeCheckpointDeviceTest, LongformerMatchesTransformersOnTheDevice) {
  ExpectCasesMatchTransformers("longformer/model");
}

TEST(NativeCheckpointDeviceTest, ModernBertMatchesTransformersOnTheDevice) {
  ExpectCasesMatchTransformers("modernbert/model");
}

TEST(NativeCheckpointDeviceTest, BigBirdMatchesTransformersOnTheDevice) {
  ExpectCasesMatchTransformers("bigbird/model");
}

}  // namespace
}  // namespace docsparse
