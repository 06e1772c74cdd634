// Reading tests/fixtures/seq2seq/<model>/ (see its README): the checkpoint,
// cases.json and expected.safetensors. Shared by the seq2seq_*_test.cc files.
#ifndef DOCSPARSE_TESTS_MODEL_SEQ2SEQ_FIXTURE_H_
#define DOCSPARSE_TESTS_MODEL_SEQ2SEQ_FIXTURE_H_

#include <ATen/ATen.h>
#include <gtest/gtest.h>

#include <cstring>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "model/checkpoint/generation_config.h"
#include "model/checkpoint/safetensors.h"
#include "model/encoder/encoder.h"
#include "model/seq2seq/seq2seq_model.h"
#include "tests/common/fixture_paths.h"

namespace docsparse::testing {

struct Seq2SeqFixture {
  std::string dir;
  std::unique_ptr<Seq2SeqModel> model;
  nlohmann::json cases;
  std::unique_ptr<SafetensorsFile> expected;

  // A tensor of expected.safetensors (float32), copied.
  at::Tensor Expected(const std::string& name) const {
    const TensorView* view = expected->Find(name);
    EXPECT_NE(view, nullptr) << name;
    if (view == nullptr) return {};
    at::Tensor tensor = at::empty(view->shape, at::kFloat);
    std::memcpy(tensor.data_ptr<float>(), view->data, view->nbytes);
    return tensor;
  }
};

// Loads tests/fixtures/seq2seq/<name>; failures are reported as test
// failures and leave the model null.
inline Seq2SeqFixture LoadSeq2SeqFixture(const std::string& name) {
  Seq2SeqFixture fixture;
  fixture.dir = FixturePath("seq2seq/" + name);
  absl::StatusOr<std::unique_ptr<Seq2SeqModel>> model = Seq2SeqModel::Create(fixture.dir);
  EXPECT_TRUE(model.ok()) << model.status();
  if (model.ok()) fixture.model = *std::move(model);
  fixture.cases = nlohmann::json::parse(ReadFile(fixture.dir + "/cases.json"));
  absl::StatusOr<std::unique_ptr<SafetensorsFile>> expected =
      SafetensorsFile::Open(fixture.dir + "/expected.safetensors");
  EXPECT_TRUE(expected.ok()) << expected.status();
  if (expected.ok()) fixture.expected = *std::move(expected);
  return fixture;
}

// A cases.json generate case's parameters as the server runs them: a full HF
// GenerationConfig, read as a generation_config.json over the model's
// config.json through the checkpoint's parser, with no request overrides.
inline absl::StatusOr<GenerationConfig> CaseGenerationConfig(const nlohmann::json& model_config,
                                                             const nlohmann::json& hf_case,
                                                             int64_t max_decoder_length) {
  absl::StatusOr<GenerationConfig> parsed = ParseGenerationConfig(model_config, &hf_case["params"]);
  if (!parsed.ok()) return parsed.status();
  return ApplyGenerationOverrides(*parsed, GenerationOverrides{},
                                  static_cast<int>(max_decoder_length));
}

inline EncoderBatch BatchOf(const nlohmann::json& input_ids) {
  EncoderBatch batch;
  for (const nlohmann::json& row : input_ids) {
    batch.sequences.push_back(row.get<std::vector<int32_t>>());
  }
  return batch;
}

// [rows, steps] int64 from a JSON array of equal-length arrays.
inline at::Tensor IdsTensor(const nlohmann::json& rows) {
  std::vector<int64_t> flat;
  for (const nlohmann::json& row : rows) {
    for (const nlohmann::json& id : row) flat.push_back(id.get<int64_t>());
  }
  const int64_t count = static_cast<int64_t>(rows.size());
  return at::tensor(flat, at::kLong).view({count, static_cast<int64_t>(flat.size()) / count});
}

inline double MaxAbsDiff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

}  // namespace docsparse::testing

#endif  // DOCSPARSE_TESTS_MODEL_SEQ2SEQ_FIXTURE_H_
