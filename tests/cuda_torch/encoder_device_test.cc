// The whole encoder on a CUDA device (weights there, LibTorch's products and
// norms, our attention executors) against the same encoder on the CPU, whose
// parity with the references the CPU tests hold: the tiny LSG-BERT with its
// native LSG attention (norm sparsity, a global token) and a tiny BERT with
// dense attention, each on a padded batch of odd lengths. fp32 within 1e-4;
// bf16 (the device's automatic precision) no further from the fp32 CPU
// encoder than twice the CPU's own bf16 encoder (other kernels, the same
// rounding points); fp16 (three more bits of mantissa than bf16, the same
// rounding points) no further than bf16 on the device. Built only with a
// CUDA LibTorch (scripts/build --cuda).
#include <ATen/ATen.h>
#include <gtest/gtest.h>
#include <torch/cuda.h>

#include <memory>
#include <string>
#include <vector>

#include "model/attention/attention.h"
#include "model/attention/lsg_attention.h"
#include "model/checkpoint/hf_config.h"
#include "model/encoder/encoder.h"
#include "tests/common/fixture_paths.h"

namespace docsparse {
namespace {

using testing::FixturePath;

EncoderBatch RandomBatch(int vocab, const std::vector<int>& lengths, uint64_t seed) {
  EncoderBatch batch;
  uint64_t state = seed;
  for (int length : lengths) {
    std::vector<int32_t> ids;
    for (int i = 0; i < length; ++i) {
      state = state * 6364136223846793005ULL + 1442695040888963407ULL;
      ids.push_back(static_cast<int32_t>((state >> 33) % static_cast<uint64_t>(vocab)));
    }
    batch.sequences.push_back(std::move(ids));
  }
  return batch;
}

std::unique_ptr<Encoder> Load(const std::string& dir, Precision precision, at::Device device) {
  absl::StatusOr<EncoderConfig> config = LoadEncoderConfig(dir + "/config.json");
  EXPECT_TRUE(config.ok()) << config.status();
  if (!config.ok()) return nullptr;
  absl::StatusOr<std::unique_ptr<Encoder>> encoder =
      Encoder::Create(dir, *config, MakeCheckpointAttention(config->lsg), precision, device);
  EXPECT_TRUE(encoder.ok()) << encoder.status();
  return encoder.ok() ? *std::move(encoder) : nullptr;
}

void ExpectDeviceMatchesCpu(const std::string& fixture, const std::vector<int>& lengths) {
  const std::string dir = FixturePath(fixture);
  const std::unique_ptr<Encoder> cpu = Load(dir, Precision::kFp32, at::kCPU);
  const std::unique_ptr<Encoder> cpu_bf16 = Load(dir, Precision::kBf16, at::kCPU);
  const std::unique_ptr<Encoder> gpu = Load(dir, Precision::kFp32, at::Device(at::kCUDA, 0));
  const std::unique_ptr<Encoder> gpu_bf16 = Load(dir, Precision::kAuto, at::Device(at::kCUDA, 0));
  const std::unique_ptr<Encoder> gpu_fp16 = Load(dir, Precision::kFp16, at::Device(at::kCUDA, 0));
  ASSERT_TRUE(cpu && cpu_bf16 && gpu && gpu_bf16 && gpu_fp16);
  EXPECT_EQ(gpu_bf16->precision(), Precision::kBf16);
  EXPECT_EQ(gpu_fp16->precision(), Precision::kFp16);
  const EncoderBatch batch = RandomBatch(cpu->config().vocab_size, lengths, 7);
  CostAccount cpu_cost(cpu->shape()), gpu_cost(gpu->shape());
  absl::StatusOr<EncoderOutput> want = cpu->Forward(batch, &cpu_cost);
  absl::StatusOr<EncoderOutput> got = gpu->Forward(batch, &gpu_cost);
  absl::StatusOr<EncoderOutput> got_bf16 = gpu_bf16->Forward(batch, nullptr);
  CostAccount fp16_cost(gpu_fp16->shape());
  absl::StatusOr<EncoderOutput> got_fp16 = gpu_fp16->Forward(batch, &fp16_cost);
  absl::StatusOr<EncoderOutput> cpu_bf16_out = cpu_bf16->Forward(batch, nullptr);
  ASSERT_TRUE(cpu_bf16_out.ok()) << cpu_bf16_out.status();
  ASSERT_TRUE(want.ok()) << want.status();
  ASSERT_TRUE(got.ok()) << got.status();
  ASSERT_TRUE(got_bf16.ok()) << got_bf16.status();
  ASSERT_TRUE(got_fp16.ok()) << got_fp16.status();
  ASSERT_TRUE(got->hidden.is_cpu());
  ASSERT_EQ(got->hidden.scalar_type(), at::kFloat);
  ASSERT_EQ(got->hidden.sizes(), want->hidden.sizes());
  for (size_t row = 0; row < lengths.size(); ++row) {
    const int64_t length = lengths[row];
    const at::Tensor expected = want->hidden[row].narrow(0, 0, length);
    EXPECT_LE((got->hidden[row].narrow(0, 0, length) - expected).abs().max().item<double>(), 1e-4)
        << "row " << row;
    const double cpu_bf16_error =
        (cpu_bf16_out->hidden[row].narrow(0, 0, length) - expected).abs().max().item<double>();
    const double bf16_error =
        (got_bf16->hidden[row].narrow(0, 0, length) - expected).abs().max().item<double>();
    EXPECT_LE(bf16_error, 2 * cpu_bf16_error + 1e-2)
        << "row " << row << "; the CPU's bf16 encoder is " << cpu_bf16_error << " off";
    EXPECT_LE((got_fp16->hidden[row].narrow(0, 0, length) - expected).abs().max().item<double>(),
              bf16_error + 1e-3)
        << "row " << row << "; bf16 on the device is " << bf16_error << " off";
  }
  EXPECT_DOUBLE_EQ(fp16_cost.AttentionFlops(), cpu_cost.AttentionFlops());
  // The same plan, so the same cost.
  EXPECT_DOUBLE_EQ(gpu_cost.AttentionFlops(), cpu_cost.AttentionFlops());
  EXPECT_DOUBLE_EQ(gpu_cost.MeanDensity(), cpu_cost.MeanDensity());
}

TEST(EncoderDeviceTest, LsgBertOnCudaMatchesTheCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  ExpectDeviceMatchesCpu("lsg/bert", {37, 200, 130});
}

TEST(EncoderDeviceTest, DenseBertOnCudaMatchesTheCpu) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  ExpectDeviceMatchesCpu("tiny_encoders/bert", {9, 64, 33});
}

TEST(EncoderDeviceTest, Int8IsRefusedOnCuda) {
  if (!torch::cuda::is_available()) GTEST_SKIP() << "no CUDA device";
  const std::string dir = FixturePath("tiny_encoders/bert");
  absl::StatusOr<EncoderConfig> config = LoadEncoderConfig(dir + "/config.json");
  ASSERT_TRUE(config.ok());
  absl::StatusOr<std::unique_ptr<Encoder>> encoder =
      Encoder::Create(dir, *config, MakeDenseAttention(), Precision::kInt8, at::Device(at::kCUDA));
  ASSERT_FALSE(encoder.ok());
  EXPECT_NE(encoder.status().message().find("int8"), std::string::npos) << encoder.status();
}

}  // namespace
}  // namespace docsparse
