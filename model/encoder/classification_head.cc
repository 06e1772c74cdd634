#include "model/encoder/classification_head.h"

#include <c10/core/InferenceMode.h>

#include <cstdint>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "model/checkpoint/checkpoint_tensor.h"
#include "model/checkpoint/safetensors.h"
#include "model/encoder/linear.h"
#include "model/encoder/pooling.h"

namespace docsparse {
namespace {

// Checkpoint names of the head's two linear layers (without ".weight").
struct HeadScheme {
  std::string dense;
  std::string out;
  ClassificationHead::InnerActivation activation;
};

HeadScheme SchemeFor(const EncoderConfig& config) {
  switch (config.architecture) {
    case Architecture::kBert:
      // BertForSequenceClassification classifies BertModel's pooler output;
      // the pooler lives inside the "bert." encoder prefix.
      return {"bert.pooler.dense", "classifier", ClassificationHead::kTanh};
    case Architecture::kRoberta:
    case Architecture::kLongformer:
      // RobertaClassificationHead (LongformerClassificationHead is the
      // same): no pooler, its own dense + tanh.
      return {"classifier.dense", "classifier.out_proj", ClassificationHead::kTanh};
    case Architecture::kDistilBert:
      return {"pre_classifier", "classifier", Activation::kRelu};
    case Architecture::kBigBird:
      // BigBirdClassificationHead: RoBERTa's names, the config's hidden_act.
      return {"classifier.dense", "classifier.out_proj", config.activation};
    case Architecture::kModernBert:
      // ModernBertPredictionHead (dense, activation, norm), then the
      // classifier; the activation is the config's classifier_activation.
      return {"head.dense", "classifier", Activation::kGelu};
  }
  return {};
}

// Prefixes the message of a failed read with the context, keeping its code.
absl::Status InHead(const absl::Status& status, const std::string& model_dir) {
  return absl::Status(status.code(),
                      absl::StrCat(model_dir, ": classification head: ", status.message()));
}

}  // namespace

absl::StatusOr<std::unique_ptr<ClassificationHead>> ClassificationHead::Load(
    const std::string& model_dir, const EncoderConfig& config) {
  if (!config.has_classification_head) {
    return absl::InvalidArgumentError(absl::StrCat(
        model_dir, ": config.json declares no sequence-classification head (architectures: [",
        absl::StrJoin(config.architectures, ", "), "]); a plain encoder has no labels of its own"));
  }
  if (config.id2label.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        model_dir, ": config.json: a classification head needs id2label or num_labels"));
  }
  absl::StatusOr<std::unique_ptr<Checkpoint>> checkpoint = Checkpoint::Open(model_dir);
  if (!checkpoint.ok()) return InHead(checkpoint.status(), model_dir);

  const HeadScheme names = SchemeFor(config);
  const int64_t h = config.hidden_size;
  const int64_t n = static_cast<int64_t>(config.id2label.size());
  auto read = [&](const std::string& name, const std::vector<int64_t>& shape,
                  at::Tensor* out) -> absl::Status {
    absl::StatusOr<at::Tensor> tensor = ReadFloatTensor(**checkpoint, name, shape);
    if (!tensor.ok()) return InHead(tensor.status(), model_dir);
    *out = *std::move(tensor);
    return absl::OkStatus();
  };
  Weights w;
  RETURN_IF_ERROR(read(names.dense + ".weight", {h, h}, &w.dense_weight));
  InnerActivation activation = names.activation;
  PoolingMode pooling = PoolingMode::kCls;
  if (config.modernbert.has_value()) {
    const ModernBertFields& modern = *config.modernbert;
    w.dense_bias = at::zeros({h}, at::kFloat);
    if (modern.classifier_bias) RETURN_IF_ERROR(read(names.dense + ".bias", {h}, &w.dense_bias));
    RETURN_IF_ERROR(read("head.norm.weight", {h}, &w.norm_weight));
    w.norm_bias = at::zeros({h}, at::kFloat);
    if (modern.norm_bias) RETURN_IF_ERROR(read("head.norm.bias", {h}, &w.norm_bias));
    w.norm_eps = config.layer_norm_eps;
    activation = modern.classifier_activation;
    if (modern.mean_pooling) pooling = PoolingMode::kMean;
  } else {
    RETURN_IF_ERROR(read(names.dense + ".bias", {h}, &w.dense_bias));
  }
  RETURN_IF_ERROR(read(names.out + ".weight", {n, h}, &w.out_weight));
  RETURN_IF_ERROR(read(names.out + ".bias", {n}, &w.out_bias));
  return std::make_unique<ClassificationHead>(std::move(w), activation, config.id2label,
                                              config.problem_type, pooling);
}

ClassificationHead::ClassificationHead(Weights weights, InnerActivation activation,
                                       std::vector<std::string> labels, ProblemType problem_type,
                                       PoolingMode pooling)
    : weights_(std::move(weights)),
      activation_(activation),
      labels_(std::move(labels)),
      problem_type_(problem_type),
      pooling_(pooling) {}

at::Tensor ClassificationHead::Logits(const at::Tensor& hidden,
                                      const std::vector<int64_t>& lengths) const {
  c10::InferenceMode inference_mode;
  return LogitsOfPooled(Pool(hidden, lengths, pooling_));
}

at::Tensor ClassificationHead::LogitsOfPooled(const at::Tensor& pooled) const {
  c10::InferenceMode inference_mode;
  at::Tensor x = at::linear(pooled, weights_.dense_weight, weights_.dense_bias);
  x = activation_.has_value() ? ApplyActivation(x, *activation_) : at::tanh(x);
  if (weights_.norm_weight.defined()) {
    x = at::layer_norm(x, {x.size(-1)}, weights_.norm_weight, weights_.norm_bias,
                       weights_.norm_eps);
  }
  return at::linear(x, weights_.out_weight, weights_.out_bias);
}

at::Tensor ClassificationHead::Probabilities(const at::Tensor& logits) const {
  c10::InferenceMode inference_mode;
  switch (problem_type_) {
    case ProblemType::kRegression:
      return logits;
    case ProblemType::kMultiLabel:
      return at::sigmoid(logits);
    case ProblemType::kSingleLabel:
      return at::softmax(logits, -1);
    case ProblemType::kUnspecified:
      return num_labels() == 1 ? at::sigmoid(logits) : at::softmax(logits, -1);
  }
  return logits;
}

}  // namespace docsparse
