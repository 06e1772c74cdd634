// Sequence-classification heads against Hugging Face transformers: tiny
// random-weight BERT / RoBERTa / DistilBERT ...ForSequenceClassification
// checkpoints (tests/fixtures/tiny_classifiers, see tests/fixtures/README.md)
// run through our Encoder (dense attention) and ClassificationHead.
#include "model/encoder/classification_head.h"

#include <c10/core/InferenceMode.h>
#include <gtest/gtest.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <nlohmann/json.hpp>

#include "model/checkpoint/hf_config.h"
#include "model/checkpoint/safetensors.h"
#include "model/encoder/encoder.h"
#include "tests/common/fixture_paths.h"
#include "tests/common/json_tensor.h"

namespace docsparse {
namespace {

using testing::FixturePath;
using testing::ReadFile;

constexpr double kTolerance = 1e-4;

EncoderConfig LoadConfig(const std::string& dir) {
  absl::StatusOr<EncoderConfig> config = LoadEncoderConfig(dir + "/config.json");
  EXPECT_TRUE(config.ok()) << config.status();
  return config.value_or(EncoderConfig{});
}

std::string ClassifierDir(const std::string& name) {
  return FixturePath("tiny_classifiers/" + name);
}

double MaxAbsDiff(const at::Tensor& a, const at::Tensor& b) {
  return (a - b).abs().max().item<double>();
}

class ClassificationHeadParityTest : public ::testing::TestWithParam<const char*> {};

TEST_P(ClassificationHeadParityTest, LogitsAndProbabilitiesMatchTransformers) {
  const std::string dir = ClassifierDir(GetParam());
  const EncoderConfig config = LoadConfig(dir);
  ASSERT_TRUE(config.has_classification_head);
  // The encoder loader finds the "bert." / "roberta." / "distilbert." prefix.
  absl::StatusOr<std::unique_ptr<Encoder>> encoder =
      Encoder::Create(dir, config, MakeDenseAttention());
  ASSERT_TRUE(encoder.ok()) << encoder.status();
  absl::StatusOr<std::unique_ptr<ClassificationHead>> head = ClassificationHead::Load(dir, config);
  ASSERT_TRUE(head.ok()) << head.status();

  const nlohmann::json expected = nlohmann::json::parse(ReadFile(dir + "/expected.json"));
  EXPECT_EQ((*head)->labels(), expected["id2label"].get<std::vector<std::string>>());
  EXPECT_EQ((*head)->num_labels(), expected["num_labels"].get<int>());
  const bool sigmoid = expected["function_to_apply"] == "sigmoid";
  EXPECT_EQ((*head)->problem_type(),
            sigmoid ? ProblemType::kMultiLabel : ProblemType::kUnspecified);

  c10::InferenceMode inference_mode;
  for (const nlohmann::json& c : expected["cases"]) {
    SCOPED_TRACE(c["name"].get<std::string>());
    EncoderBatch batch;
    const auto lengths = c["lengths"].get<std::vector<int64_t>>();
    for (size_t i = 0; i < lengths.size(); ++i) {
      auto ids = c["input_ids"][i].get<std::vector<int32_t>>();
      ids.resize(lengths[i]);
      batch.sequences.push_back(ids);
    }
    absl::StatusOr<EncoderOutput> out = (*encoder)->Forward(batch, nullptr);
    ASSERT_TRUE(out.ok()) << out.status();
    const at::Tensor logits = (*head)->Logits(out->hidden, out->lengths);
    const at::Tensor want_logits = testing::JsonToTensor(c["logits"]);
    ASSERT_EQ(logits.sizes(), want_logits.sizes());
    EXPECT_EQ(logits.scalar_type(), at::kFloat);
    const double logit_error = MaxAbsDiff(logits, want_logits);
    EXPECT_LE(logit_error, kTolerance);
    const at::Tensor probabilities = (*head)->Probabilities(logits);
    const double probability_error =
        MaxAbsDiff(probabilities, testing::JsonToTensor(c["probabilities"]));
    EXPECT_LE(probability_error, kTolerance);
    std::cout << GetParam() << " " << c["name"].get<std::string>() << ": max abs error logits "
              << logit_error << ", probabilities " << probability_error << "\n";
    const at::Tensor row_sums = probabilities.sum(-1);
    if (sigmoid) {
      EXPECT_GT(MaxAbsDiff(row_sums, at::ones_like(row_sums)), 0.1) << "independent labels";
    } else {
      EXPECT_LE(MaxAbsDiff(row_sums, at::ones_like(row_sums)), 1e-6);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(ClassificationCheckpoints, ClassificationHeadParityTest,
                         ::testing::Values("bert", "roberta", "distilbert", "bert_multilabel"),
                         [](const auto& info) { return std::string(info.param); });

TEST(ClassificationHeadTest, LabelsAreInIdOrder) {
  const std::pair<const char*, std::vector<std::string>> cases[] = {
      {"bert", {"negative", "neutral", "positive"}},
      {"roberta", {"LABEL_0", "LABEL_1"}},
      {"distilbert", {"world", "sports", "business", "sci_tech"}},
      {"bert_multilabel", {"urgent", "legal", "finance"}},
  };
  for (const auto& [name, labels] : cases) {
    const std::string dir = ClassifierDir(name);
    absl::StatusOr<std::unique_ptr<ClassificationHead>> head =
        ClassificationHead::Load(dir, LoadConfig(dir));
    ASSERT_TRUE(head.ok()) << head.status();
    EXPECT_EQ((*head)->labels(), labels) << name;
  }
}

TEST(ClassificationHeadTest, CheckpointWithoutHeadWeightsNamesTheTensor) {
  // A classifier's config over the plain encoder checkpoint of the same sizes.
  const std::pair<const char*, const char*> cases[] = {
      {"bert", "bert.pooler.dense.weight"},
      {"roberta", "classifier.dense.weight"},
      {"distilbert", "pre_classifier.weight"},
  };
  for (const auto& [name, tensor] : cases) {
    absl::StatusOr<std::unique_ptr<ClassificationHead>> head = ClassificationHead::Load(
        FixturePath(std::string("tiny_encoders/") + name), LoadConfig(ClassifierDir(name)));
    ASSERT_FALSE(head.ok()) << name;
    EXPECT_EQ(head.status().code(), absl::StatusCode::kNotFound) << head.status();
    EXPECT_NE(head.status().message().find(std::string("'") + tensor + "'"), std::string_view::npos)
        << head.status();
    EXPECT_NE(head.status().message().find("classification head"), std::string_view::npos)
        << head.status();
  }
}

TEST(ClassificationHeadTest, LabelCountDisagreeingWithCheckpointIsRefused) {
  const std::string dir = ClassifierDir("distilbert");
  EncoderConfig config = LoadConfig(dir);
  config.id2label.push_back("extra");
  absl::StatusOr<std::unique_ptr<ClassificationHead>> head = ClassificationHead::Load(dir, config);
  ASSERT_FALSE(head.ok());
  EXPECT_EQ(head.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(head.status().message().find("'classifier.weight' has shape [4,32], config implies "
                                         "[5,32]"),
            std::string_view::npos)
      << head.status();
}

TEST(ClassificationHeadTest, PlainEncoderConfigHasNoHead) {
  const std::string dir = FixturePath("tiny_encoders/bert");
  const EncoderConfig config = LoadConfig(dir);
  EXPECT_FALSE(config.has_classification_head);
  absl::StatusOr<std::unique_ptr<ClassificationHead>> head = ClassificationHead::Load(dir, config);
  ASSERT_FALSE(head.ok());
  EXPECT_EQ(head.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(head.status().message().find("no sequence-classification head"), std::string_view::npos)
      << head.status();
  EXPECT_NE(head.status().message().find("BertModel"), std::string_view::npos) << head.status();
}

TEST(ClassificationHeadTest, MissingCheckpointIsNotFound) {
  const EncoderConfig config = LoadConfig(ClassifierDir("bert"));
  absl::StatusOr<std::unique_ptr<ClassificationHead>> head =
      ClassificationHead::Load(FixturePath("tiny_classifiers/no_such_model"), config);
  ASSERT_FALSE(head.ok());
  EXPECT_EQ(head.status().code(), absl::StatusCode::kNotFound) << head.status();
}

ClassificationHead TinyHead(int num_labels, ProblemType problem_type) {
  ClassificationHead::Weights w{at::eye(2), at::zeros({2}), at::ones({num_labels, 2}),
                                at::zeros({num_labels})};
  std::vector<std::string> labels;
  for (int i = 0; i < num_labels; ++i) labels.push_back("L" + std::to_string(i));
  return ClassificationHead(std::move(w), ClassificationHead::kTanh, std::move(labels),
                            problem_type);
}

TEST(ClassificationHeadTest, ProbabilityFunctionFollowsThePipelineDefaults) {
  const at::Tensor logits = at::tensor({-1.0f, 0.5f, 2.0f}).view({1, 3});
  EXPECT_TRUE(TinyHead(3, ProblemType::kUnspecified)
                  .Probabilities(logits)
                  .allclose(at::softmax(logits, -1)));
  EXPECT_TRUE(TinyHead(3, ProblemType::kSingleLabel)
                  .Probabilities(logits)
                  .allclose(at::softmax(logits, -1)));
  EXPECT_TRUE(
      TinyHead(3, ProblemType::kMultiLabel).Probabilities(logits).allclose(at::sigmoid(logits)));
  EXPECT_TRUE(TinyHead(3, ProblemType::kRegression).Probabilities(logits).equal(logits));
  const at::Tensor one = at::tensor({0.7f}).view({1, 1});
  EXPECT_TRUE(TinyHead(1, ProblemType::kUnspecified).Probabilities(one).allclose(at::sigmoid(one)));
}

// Writes `tensors` as a safetensors file (F16 or BF16 per tensor).
void WriteSafetensors(const std::string& path,
                      const std::vector<std::pair<std::string, at::Tensor>>& tensors) {
  nlohmann::json header = nlohmann::json::object();
  std::string data;
  for (const auto& [name, tensor] : tensors) {
    const at::Tensor t = tensor.contiguous();
    const size_t begin = data.size();
    data.append(static_cast<const char*>(t.data_ptr()), t.nbytes());
    header[name] = {{"dtype", t.scalar_type() == at::kHalf ? "F16" : "BF16"},
                    {"shape", t.sizes().vec()},
                    {"data_offsets", {begin, data.size()}}};
  }
  std::string json = header.dump();
  json.append((8 - json.size() % 8) % 8, ' ');
  const uint64_t length = json.size();
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(&length), sizeof(length));
  out << json << data;
}

TEST(ClassificationHeadTest, HalfPrecisionHeadIsConvertedToFloat32) {
  const std::string src = ClassifierDir("bert");
  const EncoderConfig config = LoadConfig(src);
  absl::StatusOr<std::unique_ptr<ClassificationHead>> reference =
      ClassificationHead::Load(src, config);
  ASSERT_TRUE(reference.ok()) << reference.status();

  // The same head weights re-read from F16 (pooler) and BF16 (classifier).
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint = Checkpoint::Open(src);
  ASSERT_TRUE(checkpoint.ok()) << checkpoint.status();
  std::vector<std::pair<std::string, at::Tensor>> tensors;
  for (const auto& [name, dtype] :
       {std::pair<std::string, at::ScalarType>{"bert.pooler.dense.weight", at::kHalf},
        {"bert.pooler.dense.bias", at::kHalf},
        {"classifier.weight", at::kBFloat16},
        {"classifier.bias", at::kBFloat16}}) {
    absl::StatusOr<TensorView> view = (*checkpoint)->Get(name);
    ASSERT_TRUE(view.ok()) << view.status();
    at::Tensor f32 = at::empty(view->shape, at::kFloat);
    std::memcpy(f32.data_ptr(), view->data, view->nbytes);
    tensors.emplace_back(name, f32.to(dtype));
  }
  const std::string dir = ::testing::TempDir() + "/classification_head_half";
  std::filesystem::create_directories(dir);
  WriteSafetensors(dir + "/model.safetensors", tensors);

  absl::StatusOr<std::unique_ptr<ClassificationHead>> half = ClassificationHead::Load(dir, config);
  ASSERT_TRUE(half.ok()) << half.status();
  const at::Tensor hidden = at::randn({2, 3, 32}, at::TensorOptions().dtype(at::kFloat));
  const at::Tensor got = (*half)->Logits(hidden, {3, 2});
  EXPECT_EQ(got.scalar_type(), at::kFloat);
  const at::Tensor want = (*reference)->Logits(hidden, {3, 2});
  // bf16 keeps 8 significant bits: a relative error of ~4e-3 per weight.
  EXPECT_LE(MaxAbsDiff(got, want), 0.05);
  EXPECT_GT(MaxAbsDiff(got, want), 0.0) << "the weights were not rounded";
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace docsparse
