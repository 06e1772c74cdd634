// Test helper for the native long-document checkpoints (Longformer,
// ModernBERT), on the CPU or a device: a folder loaded as the server loads
// it, and a fixture case's sequences.
#ifndef DOCSPARSE_TESTS_MODEL_ENCODER_SERVED_CHECKPOINT_H_
#define DOCSPARSE_TESTS_MODEL_ENCODER_SERVED_CHECKPOINT_H_

#include <gtest/gtest.h>

#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/attention/planner_registry.h"
#include "model/encoder/encoder.h"

namespace docsparse::testing {

// The config, every planner the model serves (the native one with the
// checkpoint's knobs) and the encoder running them behind the switching
// mechanism.
struct ServedCheckpoint {
  EncoderConfig config;
  std::unique_ptr<ModelPlanners> planners;
  std::unique_ptr<Encoder> encoder;
};

// Failures are test failures and leave the encoder null. `device` as
// docsparse-server --device puts it.
inline ServedCheckpoint LoadAsServed(const std::string& dir, Precision precision = Precision::kFp32,
                                     at::Device device = at::kCPU) {
  ServedCheckpoint loaded;
  absl::StatusOr<EncoderConfig> config = LoadEncoderConfig(dir + "/config.json");
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return loaded;
  loaded.config = *config;
  const NativeAttention native = NativeAttentionOf(loaded.config);
  PlannerSource source = PlannerSourceOf(loaded.config);
  source.configured_knobs = native.knobs;
  absl::StatusOr<std::unique_ptr<ModelPlanners>> planners =
      ModelPlanners::Make(native.kind, source);
  EXPECT_TRUE(planners.ok()) << planners.status();
  if (!planners.ok()) return loaded;
  loaded.planners = *std::move(planners);
  absl::StatusOr<std::unique_ptr<Encoder>> encoder =
      Encoder::Create(dir, loaded.config, loaded.planners->MakeMechanism(), precision, device);
  EXPECT_TRUE(encoder.ok()) << encoder.status();
  if (encoder.ok()) loaded.encoder = *std::move(encoder);
  return loaded;
}

// A case's rows: input_ids cut to lengths (expected.json of
// tests/fixtures/longformer and tests/fixtures/modernbert).
inline EncoderBatch SequencesOf(const nlohmann::json& c) {
  EncoderBatch batch;
  const auto lengths = c["lengths"].get<std::vector<int64_t>>();
  for (size_t i = 0; i < lengths.size(); ++i) {
    auto ids = c["input_ids"][i].get<std::vector<int32_t>>();
    ids.resize(lengths[i]);
    batch.sequences.push_back(ids);
  }
  return batch;
}

}  // namespace docsparse::testing

#endif  // DOCSPARSE_TESTS_MODEL_ENCODER_SERVED_CHECKPOINT_H_
