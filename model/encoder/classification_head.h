// The sequence-classification head of a fine-tuned Hugging Face checkpoint
// (BertForSequenceClassification, RobertaForSequenceClassification,
// DistilBertForSequenceClassification, LongformerForSequenceClassification),
// applied to the Encoder's output.
//
// All these heads pool the hidden states and apply two linear layers with an
// activation between (dropout is the identity at inference); the first
// token's state, but for ModernBERT's classifier_pooling "mean":
//   BERT:       classifier(tanh(bert.pooler.dense(h[:, 0])))
//   RoBERTa, Longformer:
//               classifier.out_proj(tanh(classifier.dense(h[:, 0])))
//   DistilBERT: classifier(relu(pre_classifier(h[:, 0])))
//   ModernBERT: classifier(head.norm(act(head.dense(pool(h)))))
// Probabilities follow transformers' text-classification pipeline: sigmoid
// per label for multi_label_classification (or a single label), softmax over
// the labels otherwise, and no function for regression.
#ifndef DOCSPARSE_MODEL_ENCODER_CLASSIFICATION_HEAD_H_
#define DOCSPARSE_MODEL_ENCODER_CLASSIFICATION_HEAD_H_

#include <ATen/ATen.h>

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/checkpoint/hf_config.h"
#include "model/checkpoint/serving_config.h"

namespace docsparse {

// Immutable after Load; all const methods are thread-safe.
class ClassificationHead {
 public:
  // Reads the head of `config`'s architecture from the checkpoint in
  // `model_dir` (model.safetensors or a sharded index), converting F16/BF16 to
  // F32. The labels are config.id2label, so there are id2label.size() outputs.
  // Errors:
  //   INVALID_ARGUMENT when the config declares no head (no
  //     "...ForSequenceClassification" in "architectures": a plain encoder)
  //     or no labels, and when a head tensor's shape disagrees with
  //     hidden_size / the number of labels (the message names the tensor);
  //   NOT_FOUND naming the tensor when the checkpoint lacks a head weight,
  //     or when model_dir has no checkpoint.
  static absl::StatusOr<std::unique_ptr<ClassificationHead>> Load(const std::string& model_dir,
                                                                  const EncoderConfig& config);

  // hidden: [batch, seq >= 1, hidden_size] float32 on the CPU and the real
  // tokens per row, as EncoderOutput has them; pooled as pooling() says.
  // Returns the logits, [batch, num_labels] float32.
  at::Tensor Logits(const at::Tensor& hidden, const std::vector<int64_t>& lengths) const;
  // The same from rows already pooled as pooling() says: [batch, hidden_size].
  at::Tensor LogitsOfPooled(const at::Tensor& pooled) const;
  // Which pooled row the head reads: the first token's, or the mean.
  PoolingMode pooling() const { return pooling_; }

  // logits: [batch, num_labels] as from Logits. Returns scores of the same
  // shape: sigmoid when problem_type is kMultiLabel (or kUnspecified with a
  // single label), softmax over the last dimension for kSingleLabel and
  // kUnspecified with several labels, the logits unchanged for kRegression.
  at::Tensor Probabilities(const at::Tensor& logits) const;

  // Label names ordered by id: labels()[i] names column i of the logits.
  const std::vector<std::string>& labels() const { return labels_; }
  int num_labels() const { return static_cast<int>(labels_.size()); }
  ProblemType problem_type() const { return problem_type_; }

  // The head's two linear layers (float32, PyTorch [out, in] layout) and
  // the activation between them; Load fills them from the checkpoint.
  struct Weights {
    at::Tensor dense_weight, dense_bias;  // [h, h], [h]
    at::Tensor out_weight, out_bias;      // [num_labels, h], [num_labels]
    // ModernBERT: a LayerNorm after the activation; undefined otherwise.
    at::Tensor norm_weight{}, norm_bias{};  // [h], [h]
    double norm_eps = 1e-5;
  };
  // The activation between the two layers: tanh (kTanh: BERT's pooler,
  // RoBERTa's and Longformer's heads) or one of the encoders' (DistilBERT's
  // relu, ModernBERT's classifier_activation).
  using InnerActivation = std::optional<Activation>;
  static constexpr std::nullopt_t kTanh = std::nullopt;
  ClassificationHead(Weights weights, InnerActivation activation, std::vector<std::string> labels,
                     ProblemType problem_type, PoolingMode pooling = PoolingMode::kCls);

 private:
  Weights weights_;
  InnerActivation activation_;
  std::vector<std::string> labels_;
  ProblemType problem_type_;
  PoolingMode pooling_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_ENCODER_CLASSIFICATION_HEAD_H_
