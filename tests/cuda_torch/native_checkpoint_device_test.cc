// The native long-document checkpoints on a CUDA device, each with its own
// attention as the server serves it (tests/model/encoder/served_checkpoint.h
// on the device): the tiny Longformer (window and global rows from their own
// projections, through our CUDA block-sparse executor and LibTorch on the
// device) and ModernBERT (rotary positions, GeGLU, its sliding and full
// layers) against transformers' outputs, fp32 within 1e-4 as on the CPU.
// Built only with a CUDA LibTorch (scripts/build --cuda); skips without a GPU.
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>

#include "model/attention/planner_registry.h"
#include "model/encoder/encoder.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/json_tensor.h"

namespace docsparse {
namespace {

using testing::FixturePath;

struct DeviceCheckpoint {
  std::unique_ptr<ModelPlanners> planners;
  std::unique_ptr<Encoder> encoder;
};

DeviceCheckpoint LoadOnDevice(const std::string& dir) {
  DeviceCheckpoint loaded;
  absl::StatusOr<EncoderConfig> config = LoadEncoderConfig(dir + "/config.json");
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return loaded;
  const NativeAttention native = NativeAttentionOf(*config);
  PlannerSource source = PlannerSourceOf(*config);
  source.configured_knobs = native.knobs;
  absl::StatusOr<std::unique_ptr<ModelPlanners>> planners =
      ModelPlanners::Make(native.kind, source);
  EXPECT_TRUE(planners.ok()) << planners.status();
  if (!planners.ok()) return loaded;
  loaded.planners = *std::move(planners);
  absl::StatusOr<std::unique_ptr<Encoder>> encoder = Encoder::Create(
      dir, *config, loaded.planners->MakeMechanism(), Precision::kFp32, at::Device(at::kCUDA, 0));
  EXPECT_TRUE(encoder.ok()) << encoder.status();
  if (encoder.ok()) loaded.encoder = *std::move(encoder);
  return loaded;
}

// Every case of the fixture's expected.json; Longformer's cases carry their
// global tokens and window as request knobs.
void ExpectCasesMatchTransformers(const std::string& fixture) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const std::string dir = FixturePath(fixture);
  const DeviceCheckpoint loaded = LoadOnDevice(dir);
  ASSERT_NE(loaded.encoder, nullptr);
  const nlohmann::json expected = nlohmann::json::parse(testing::ReadFile(dir + "/expected.json"));
  for (const nlohmann::json& c : expected["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    EncoderBatch batch;
    const auto lengths = c["lengths"].get<std::vector<int64_t>>();
    for (size_t i = 0; i < lengths.size(); ++i) {
      auto ids = c["input_ids"][i].get<std::vector<int32_t>>();
      ids.resize(lengths[i]);
      batch.sequences.push_back(ids);
      ItemAttentionOptions options;
      if (c.contains("window")) {
        options.knobs = {{"global_tokens", c["global_tokens"].get<double>()},
                         {"window", c["window"].get<double>()}};
      }
      batch.attention_options.push_back(options);
    }
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

}  // namespace
}  // namespace docsparse
