// Summarizers on a CUDA device (encoder, decoder and generation; weights
// there in fp32) against transformers: every generate case of the tiny BART
// and LSG-BART fixtures (greedy, minimum length, no-repeat n-grams, beam
// search, alone and as a padded batch) must give the token ids
// transformers' generate() gave (tests/fixtures/seq2seq/README.md), and the
// teacher-forced logits must match within 1e-4. bf16 (the device's automatic
// precision) must stay as near the fp32 logits as twice the same model in bf16
// on the CPU, and fp16 as near as bf16 on the device. Built only with a CUDA
// LibTorch.
#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <memory>
#include <string>
#include <vector>

#include "model/checkpoint/bart_config.h"
#include "model/checkpoint/generation_config.h"
#include "model/seq2seq/generator.h"
#include "model/seq2seq/seq2seq_model.h"
#include "nlohmann/json.hpp"
#include "tests/model/seq2seq/seq2seq_fixture.h"

namespace docsparse {
namespace {

using json = nlohmann::json;
using testing::BatchOf;
using testing::FixturePath;
using testing::ReadFile;

std::unique_ptr<Seq2SeqModel> Load(const std::string& dir, Precision precision, at::Device device) {
  absl::StatusOr<BartConfig> config = LoadBartConfig(dir + "/config.json");
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<Seq2SeqModel>> model =
      Seq2SeqModel::Create(dir, *config, nullptr, device, precision);
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *std::move(model) : nullptr;
}

class Seq2SeqDeviceTest : public ::testing::TestWithParam<std::string> {};

TEST_P(Seq2SeqDeviceTest, EveryGenerateCaseMatchesTransformersOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const std::string dir = FixturePath("seq2seq/" + GetParam());
  const std::unique_ptr<Seq2SeqModel> model = Load(dir, Precision::kFp32, at::Device(at::kCUDA, 0));
  ASSERT_NE(model, nullptr);
  ASSERT_TRUE(model->device().is_cuda());
  c10::InferenceMode inference_mode;
  const json model_config = json::parse(ReadFile(dir + "/config.json"));
  const json cases = json::parse(ReadFile(dir + "/cases.json"));
  ASSERT_FALSE(cases["generate_cases"].empty());
  for (const json& hf_case : cases["generate_cases"]) {
    SCOPED_TRACE(hf_case["name"].get<std::string>());
    absl::StatusOr<GenerationConfig> config =
        testing::CaseGenerationConfig(model_config, hf_case, model->max_decoder_length());
    ASSERT_TRUE(config.ok()) << config.status();
    for (const json& run : hf_case["runs"]) {
      SCOPED_TRACE("batch of " + std::to_string(run["input_ids"].size()));
      const std::vector<GenerationConfig> configs(run["input_ids"].size(), *config);
      absl::StatusOr<Seq2SeqEncoding> encoding = model->Encode(BatchOf(run["input_ids"]), {});
      ASSERT_TRUE(encoding.ok()) << encoding.status();
      EXPECT_TRUE(encoding->hidden.is_cuda());
      absl::StatusOr<std::unique_ptr<DecoderStepper>> stepper = model->StartDecoding(*encoding, 1);
      ASSERT_TRUE(stepper.ok()) << stepper.status();
      absl::StatusOr<GenerationResult> result = Generate(**stepper, configs, GenerationCallbacks{});
      ASSERT_TRUE(result.ok()) << result.status();
      EXPECT_EQ(HfGenerateSequences(*result, configs),
                run["sequences"].get<std::vector<std::vector<int64_t>>>());
    }
  }
}

TEST_P(Seq2SeqDeviceTest, TeacherForcedLogitsMatchTheCpuAndBf16AndFp16StayNear) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const testing::Seq2SeqFixture cpu = testing::LoadSeq2SeqFixture(GetParam());
  ASSERT_NE(cpu.model, nullptr);
  const std::unique_ptr<Seq2SeqModel> gpu = Load(cpu.dir, Precision::kFp32, at::Device(at::kCUDA));
  const std::unique_ptr<Seq2SeqModel> gpu_bf16 =
      Load(cpu.dir, Precision::kAuto, at::Device(at::kCUDA));
  const std::unique_ptr<Seq2SeqModel> cpu_bf16 = Load(cpu.dir, Precision::kBf16, at::kCPU);
  const std::unique_ptr<Seq2SeqModel> gpu_fp16 =
      Load(cpu.dir, Precision::kFp16, at::Device(at::kCUDA));
  ASSERT_TRUE(gpu && gpu_bf16 && cpu_bf16 && gpu_fp16);
  EXPECT_EQ(gpu_bf16->precision(), Precision::kBf16);
  EXPECT_EQ(gpu_fp16->precision(), Precision::kFp16);
  c10::InferenceMode inference_mode;
  const json& run = cpu.cases["generate_cases"][0]["runs"].back();  // a padded batch
  const EncoderBatch batch = BatchOf(run["input_ids"]);
  const int64_t rows = static_cast<int64_t>(batch.sequences.size());
  const at::Tensor decoder_ids = at::randint(4, 50, {rows, 7}, at::kLong);
  const auto logits = [&](const Seq2SeqModel& model) {
    absl::StatusOr<Seq2SeqEncoding> encoding = model.Encode(batch, {});
    EXPECT_TRUE(encoding.ok()) << encoding.status();
    absl::StatusOr<at::Tensor> out = model.DecoderLogits(*encoding, decoder_ids);
    EXPECT_TRUE(out.ok()) << out.status();
    return out.ok() ? out->to(at::kCPU, at::kFloat) : at::Tensor();
  };
  const at::Tensor want = logits(*cpu.model);
  const at::Tensor got = logits(*gpu);
  const at::Tensor got_bf16 = logits(*gpu_bf16);
  const at::Tensor cpu_bf16_logits = logits(*cpu_bf16);
  const at::Tensor got_fp16 = logits(*gpu_fp16);
  ASSERT_TRUE(want.defined() && got.defined() && got_bf16.defined() && cpu_bf16_logits.defined() &&
              got_fp16.defined());
  EXPECT_LE((got - want).abs().max().item<double>(), 1e-4);
  const double cpu_bf16_error = (cpu_bf16_logits - want).abs().max().item<double>();
  const double bf16_error = (got_bf16 - want).abs().max().item<double>();
  EXPECT_LE(bf16_error, 2 * cpu_bf16_error + 1e-2)
      << "the CPU's bf16 model is " << cpu_bf16_error << " off";
  EXPECT_LE((got_fp16 - want).abs().max().item<double>(), bf16_error + 1e-3)
      << "bf16 on the device is " << bf16_error << " off";
}

INSTANTIATE_TEST_SUITE_P(Models, Seq2SeqDeviceTest, ::testing::Values("bart", "lsg_bart"),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return info.param;
                         });

}  // namespace
}  // namespace docsparse
