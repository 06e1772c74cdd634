// The precision of the encoder's linear layers (linear_precision.h): kAuto
// follows the CPU, and the bf16 encoder meets the fidelity gate against the
// fp32 one on real text at 512 (dense MiniLM), 4,096 and 16,384 tokens
// (models/minilm-lsg, one pass): cosine of the mean-pooled embeddings
// >= 0.999.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cpu_features.h"
#include "model/attention/lsg_attention.h"
#include "model/attention/planner_registry.h"
#include "model/attention/sbm_attention.h"
#include "model/attention/sbm_parameters.h"
#include "model/checkpoint/hf_config.h"
#include "model/encoder/encoder.h"
#include "model/encoder/linear_precision.h"
#include "model/text/wordpiece_tokenizer.h"
#include "tests/common/fixture_paths.h"

namespace docsparse {
namespace {

TEST(LinearPrecisionTest, AutoIsBf16WhereTheCpuMultipliesBf16NativelyAndInt8OnAvx2) {
  CpuFeatures baseline;
  EXPECT_EQ(ResolvePrecision(Precision::kAuto, baseline), Precision::kFp32);
  CpuFeatures avx2;
  avx2.avx2_fma = true;
  EXPECT_EQ(ResolvePrecision(Precision::kAuto, avx2), Precision::kInt8);
  CpuFeatures avx512 = avx2;
  avx512.avx512f = true;
  EXPECT_EQ(ResolvePrecision(Precision::kAuto, avx512), Precision::kFp32);
  CpuFeatures avx512_bf16 = avx512;
  avx512_bf16.avx512_bf16 = true;
  EXPECT_EQ(ResolvePrecision(Precision::kAuto, avx512_bf16), Precision::kBf16);
  CpuFeatures amx = avx512;
  amx.amx_bf16 = true;
  EXPECT_EQ(ResolvePrecision(Precision::kAuto, amx), Precision::kBf16);
  // An explicit choice is kept, whatever the CPU.
  EXPECT_EQ(ResolvePrecision(Precision::kBf16, avx2), Precision::kBf16);
  EXPECT_EQ(ResolvePrecision(Precision::kFp32, amx), Precision::kFp32);
  EXPECT_EQ(IsaName(amx), "amx");
  EXPECT_EQ(IsaName(avx2), "avx2");
}

TEST(LinearPrecisionTest, EachPrecisionRunsWhereItCanAndSaysWhereElse) {
  EXPECT_EQ(ActivationType(Precision::kFp16), at::kHalf);
  EXPECT_EQ(AttentionPrecision(at::kHalf), Precision::kFp16);
  EXPECT_EQ(AttentionPrecision(at::kBFloat16), Precision::kBf16);
  EXPECT_EQ(AttentionPrecision(at::kFloat), Precision::kFp32);
  const at::Device gpu(at::kCUDA, 1);
  for (Precision fine : {Precision::kAuto, Precision::kFp32, Precision::kBf16}) {
    EXPECT_TRUE(CheckPrecisionOn(fine, at::kCPU, "an encoder").ok());
    EXPECT_TRUE(CheckPrecisionOn(fine, gpu, "an encoder").ok());
  }
  EXPECT_TRUE(CheckPrecisionOn(Precision::kInt8, at::kCPU, "an encoder").ok());
  EXPECT_TRUE(CheckPrecisionOn(Precision::kFp16, gpu, "an encoder").ok());
  const absl::Status int8 = CheckPrecisionOn(Precision::kInt8, gpu, "a summarizer");
  EXPECT_EQ(int8.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(int8.message(),
            "precision: \"int8\": a summarizer runs int8 on the CPU only; on cuda:1 write "
            "\"bf16\", \"fp16\", \"fp32\" or \"auto\"");
  const absl::Status fp16 = CheckPrecisionOn(Precision::kFp16, at::kCPU, "an encoder");
  EXPECT_EQ(fp16.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(fp16.message(),
            "precision: \"fp16\": an encoder runs fp16 on a CUDA device only (--device=cuda); on "
            "the CPU write \"bf16\", \"int8\", \"fp32\" or \"auto\"");
}

TEST(LinearPrecisionTest, AnFp16EncoderIsRefusedOnTheCpu) {
  const std::string dir = testing::FixturePath("tiny_encoders/bert");
  absl::StatusOr<EncoderConfig> config = LoadEncoderConfig(dir + "/config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  absl::StatusOr<std::unique_ptr<Encoder>> encoder =
      Encoder::Create(dir, *config, MakeDenseAttention(), Precision::kFp16, at::kCPU);
  ASSERT_FALSE(encoder.ok());
  EXPECT_EQ(encoder.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(encoder.status().message().find("\"fp16\": an encoder runs fp16 on a CUDA device"),
            std::string::npos)
      << encoder.status();
}

// Real, varied English text: the licenses every Debian machine has.
std::string HeldOutText() {
  std::string text;
  for (const char* name : {"GPL-3", "Apache-2.0", "MPL-2.0", "LGPL-3", "Artistic", "GFDL-1.3"}) {
    text += testing::ReadFile(std::string("/usr/share/common-licenses/") + name);
    text += "\n";
  }
  return text;
}

// [CLS] + the first tokens of the text + [SEP]: exactly `length` ids.
std::vector<int32_t> Document(const WordPieceTokenizer& tokenizer, int length) {
  static const std::string text = HeldOutText();
  std::vector<int32_t> ids = tokenizer.Encode(text);
  std::vector<int32_t> document;
  while (static_cast<int>(document.size()) < length - 2) {
    for (int32_t id : ids) {
      if (static_cast<int>(document.size()) == length - 2) break;
      document.push_back(id);
    }
  }
  return tokenizer.Frame(document, static_cast<size_t>(length));
}

at::Tensor MeanEmbedding(const Encoder& encoder, const std::vector<int32_t>& document) {
  EncoderBatch batch;
  batch.sequences.push_back(document);
  absl::StatusOr<EncoderOutput> output = encoder.Forward(batch, nullptr);
  EXPECT_TRUE(output.ok()) << output.status();
  if (!output.ok()) return at::Tensor();
  return output->hidden[0].mean(0);
}

struct GateCase {
  std::string model;
  int tokens;
  Precision precision;
  double min_cosine;  // the gates: bf16 0.999, int8 0.995
};

class EncoderPrecisionGateTest : public ::testing::TestWithParam<GateCase> {};

TEST_P(EncoderPrecisionGateTest, EmbeddingCosineToFp32MeetsTheGate) {
  const GateCase& gate = GetParam();
  // Without bf16 hardware, LibTorch emulates bf16 products slowly: the long
  // bf16 cases would take minutes there. The 512-token case runs everywhere,
  // and int8 (fp32 activations without native bf16) everywhere.
  if (gate.precision == Precision::kBf16 && gate.tokens > 512 &&
      !HasNativeBf16(HostCpuFeatures())) {
    GTEST_SKIP() << "no native bf16 (AMX or AVX512-BF16) on this CPU ("
                 << IsaName(HostCpuFeatures()) << ")";
  }
  const std::string dir = testing::SourcePath("models/" + gate.model);
  ASSERT_TRUE(std::filesystem::exists(dir + "/config.json"))
      << dir << " is missing: run scripts/setup and scripts/prepare-models";
  auto config = LoadEncoderConfig(dir + "/config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  auto tokenizer = WordPieceTokenizer::FromModelDir(dir);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto fp32 = Encoder::Create(dir, *config, MakeCheckpointAttention(config->lsg), Precision::kFp32);
  ASSERT_TRUE(fp32.ok()) << fp32.status();
  auto candidate_encoder =
      Encoder::Create(dir, *config, MakeCheckpointAttention(config->lsg), gate.precision);
  ASSERT_TRUE(candidate_encoder.ok()) << candidate_encoder.status();
  EXPECT_EQ((*fp32)->precision(), Precision::kFp32);
  EXPECT_EQ((*candidate_encoder)->precision(), gate.precision);

  const std::vector<int32_t> document = Document(**tokenizer, gate.tokens);
  ASSERT_EQ(static_cast<int>(document.size()), gate.tokens);
  const at::Tensor reference = MeanEmbedding(**fp32, document);
  const at::Tensor candidate = MeanEmbedding(**candidate_encoder, document);
  ASSERT_TRUE(reference.defined() && candidate.defined());
  const double cosine = at::cosine_similarity(reference, candidate, 0).item<double>();
  RecordProperty("cosine", std::to_string(cosine));
  std::cout << gate.model << " " << gate.tokens << " tokens " << PrecisionName(gate.precision)
            << ": cosine to fp32 " << cosine << "\n";
  EXPECT_GE(cosine, gate.min_cosine) << gate.model << " at " << gate.tokens << " tokens";
  // Not the same numbers: the reduced precision really ran.
  EXPECT_GT((reference - candidate).abs().max().item<float>(), 0.0f);
}

// SBM (models/minilm-sbm, its calibrated sbm.safetensors) at 4,096 tokens:
// a bf16 model's attention runs the bf16 edge executor where the CPU has
// AVX512-BF16. Its plans follow its own bf16 queries and keys, so the edges
// differ a little from fp32's (same seed): the gate is the bf16 one
// all the same.
TEST(SbmEncoderPrecisionTest, Bf16EmbeddingCosineToFp32MeetsTheGate) {
  if (!HasNativeBf16(HostCpuFeatures())) {
    GTEST_SKIP() << "no native bf16 (AMX or AVX512-BF16) on this CPU ("
                 << IsaName(HostCpuFeatures()) << ")";
  }
  const std::string dir = testing::SourcePath("models/minilm-sbm");
  ASSERT_TRUE(std::filesystem::exists(dir + "/sbm.safetensors"))
      << dir << " is missing: run scripts/setup and scripts/prepare-models";
  auto config = LoadEncoderConfig(dir + "/config.json");
  ASSERT_TRUE(config.ok()) << config.status();
  auto tokenizer = WordPieceTokenizer::FromModelDir(dir);
  ASSERT_TRUE(tokenizer.ok()) << tokenizer.status();
  auto parameters = SbmParameters::LoadFromModelDir(dir, EncoderShapeOf(*config));
  ASSERT_TRUE(parameters.ok()) << parameters.status();
  std::unique_ptr<Encoder> encoders[2];
  const Precision precisions[2] = {Precision::kFp32, Precision::kBf16};
  for (int i = 0; i < 2; ++i) {
    auto encoder = Encoder::Create(dir, *config, MakeSbmAttention(*parameters), precisions[i]);
    ASSERT_TRUE(encoder.ok()) << encoder.status();
    encoders[i] = std::move(*encoder);
  }
  const std::vector<int32_t> document = Document(**tokenizer, 4096);
  const at::Tensor reference = MeanEmbedding(*encoders[0], document);
  const at::Tensor candidate = MeanEmbedding(*encoders[1], document);
  ASSERT_TRUE(reference.defined() && candidate.defined());
  const double cosine = at::cosine_similarity(reference, candidate, 0).item<double>();
  RecordProperty("cosine", std::to_string(cosine));
  std::cout << "minilm-sbm 4096 tokens bf16: cosine to fp32 " << cosine << "\n";
  EXPECT_GE(cosine, 0.999);
  EXPECT_GT((reference - candidate).abs().max().item<float>(), 0.0f);
}

INSTANTIATE_TEST_SUITE_P(HeldOutText, EncoderPrecisionGateTest,
                         ::testing::Values(GateCase{"minilm", 512, Precision::kBf16, 0.999},
                                           GateCase{"minilm-lsg", 4096, Precision::kBf16, 0.999},
                                           GateCase{"minilm-lsg", 16384, Precision::kBf16, 0.999},
                                           GateCase{"minilm", 512, Precision::kInt8, 0.995},
                                           GateCase{"minilm-lsg", 4096, Precision::kInt8, 0.995},
                                           GateCase{"minilm-lsg", 16384, Precision::kInt8, 0.995}),
                         [](const ::testing::TestParamInfo<GateCase>& info) {
                           std::string name = info.param.model + "_" +
                                              std::to_string(info.param.tokens) + "_" +
                                              std::string(PrecisionName(info.param.precision));
                           for (char& c : name) {
                             if (c == '-') c = '_';
                           }
                           return name;
                         });
}  // namespace
}  // namespace docsparse
