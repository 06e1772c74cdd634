// Maps the Hugging Face tensor names of BERT, RoBERTa, DistilBERT,
// Longformer, ModernBERT and BigBird onto EncoderWeights.
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "model/checkpoint/checkpoint_tensor.h"
#include "model/checkpoint/safetensors.h"
#include "model/encoder/encoder.h"

namespace docsparse {
namespace {

// Looks tensors up under the first prefix that has the embeddings, and copies
// them out of the mapping as float32 (ReadFloatTensor).
class WeightReader {
 public:
  static absl::StatusOr<WeightReader> Create(std::unique_ptr<Checkpoint> checkpoint,
                                             const std::string& probe,
                                             const std::vector<std::string>& prefixes) {
    for (const std::string& prefix : prefixes) {
      if (checkpoint->Has(prefix + probe)) return WeightReader(std::move(checkpoint), prefix);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint has no tensor '", probe, "' under any of the prefixes [",
        absl::StrJoin(
            prefixes, ", ",
            [](std::string* out, const std::string& p) { absl::StrAppend(out, "'", p, "'"); }),
        "]"));
  }

  absl::StatusOr<at::Tensor> Get(const std::string& name,
                                 const std::vector<int64_t>& expected_shape) const {
    return ReadFloatTensor(*checkpoint_, prefix_ + name, expected_shape);
  }

 private:
  WeightReader(std::unique_ptr<Checkpoint> checkpoint, std::string prefix)
      : checkpoint_(std::move(checkpoint)), prefix_(std::move(prefix)) {}

  std::unique_ptr<Checkpoint> checkpoint_;
  std::string prefix_;
};

// Tensor names of one architecture, relative to the model prefix.
struct NameScheme {
  std::vector<std::string> prefixes;
  std::string layer;  // prefix of layer i: layer + i + "."
  std::string query, key, value, output, attention_norm, intermediate, ffn_output, output_norm;
};

NameScheme SchemeFor(Architecture architecture) {
  if (architecture == Architecture::kDistilBert) {
    return {{"", "distilbert."}, "transformer.layer.", "attention.q_lin", "attention.k_lin",
            "attention.v_lin",   "attention.out_lin",  "sa_layer_norm",   "ffn.lin1",
            "ffn.lin2",          "output_layer_norm"};
  }
  NameScheme bert = {{"", "bert.", "roberta."},
                     "encoder.layer.",
                     "attention.self.query",
                     "attention.self.key",
                     "attention.self.value",
                     "attention.output.dense",
                     "attention.output.LayerNorm",
                     "intermediate.dense",
                     "output.dense",
                     "output.LayerNorm"};
  // Longformer keeps RoBERTa's names (its global projections beside them).
  if (architecture == Architecture::kLongformer) bert.prefixes = {"", "longformer."};
  return bert;
}

// ModernBERT's names (tok_embeddings, layers.i.attn.Wqkv, mlp.Wi, ...) onto
// the same structure: Wqkv is the fused qkv, Wi the GeGLU's [2 x inner, h]
// product, biases the config leaves out are zeros, layer 0 has no attention
// norm.
absl::StatusOr<EncoderWeights> LoadModernBertWeights(std::unique_ptr<Checkpoint> checkpoint,
                                                     const EncoderConfig& config) {
  const ModernBertFields& m = *config.modernbert;
  ASSIGN_OR_RETURN(WeightReader reader,
                   WeightReader::Create(std::move(checkpoint), "embeddings.tok_embeddings.weight",
                                        {"", "model."}));
  const int64_t h = config.hidden_size;
  const int64_t inner = config.intermediate_size;
  // A weight of `shape` and its bias ([shape[0]]), or zeros where the config
  // says there is none.
  const auto read = [&](const std::string& name, const std::vector<int64_t>& shape, bool has_bias,
                        at::Tensor* weight, at::Tensor* bias) -> absl::Status {
    ASSIGN_OR_RETURN(*weight, reader.Get(name + ".weight", shape));
    if (has_bias) {
      ASSIGN_OR_RETURN(*bias, reader.Get(name + ".bias", {shape[0]}));
    } else {
      *bias = at::zeros({shape[0]}, at::kFloat);
    }
    return absl::OkStatus();
  };
  const auto linear = [&](const std::string& name, int64_t out, int64_t in, bool has_bias,
                          at::Tensor* weight, at::Tensor* bias) {
    return read(name, {out, in}, has_bias, weight, bias);
  };
  const auto norm = [&](const std::string& name, at::Tensor* weight, at::Tensor* bias) {
    return read(name, {h}, m.norm_bias, weight, bias);
  };
  EncoderWeights w;
  ASSIGN_OR_RETURN(w.word_embeddings,
                   reader.Get("embeddings.tok_embeddings.weight", {config.vocab_size, h}));
  RETURN_IF_ERROR(norm("embeddings.norm", &w.embedding_norm_weight, &w.embedding_norm_bias));
  RETURN_IF_ERROR(norm("final_norm", &w.final_norm_weight, &w.final_norm_bias));
  for (int i = 0; i < config.num_layers; ++i) {
    const std::string p = absl::StrCat("layers.", i, ".");
    EncoderLayerWeights layer;
    RETURN_IF_ERROR(
        linear(p + "attn.Wqkv", 3 * h, h, m.attention_bias, &layer.qkv_weight, &layer.qkv_bias));
    RETURN_IF_ERROR(
        linear(p + "attn.Wo", h, h, m.attention_bias, &layer.output_weight, &layer.output_bias));
    if (i > 0) {
      RETURN_IF_ERROR(
          norm(p + "attn_norm", &layer.attention_norm_weight, &layer.attention_norm_bias));
    }
    RETURN_IF_ERROR(linear(p + "mlp.Wi", 2 * inner, h, m.mlp_bias, &layer.intermediate_weight,
                           &layer.intermediate_bias));
    RETURN_IF_ERROR(linear(p + "mlp.Wo", h, inner, m.mlp_bias, &layer.ffn_output_weight,
                           &layer.ffn_output_bias));
    RETURN_IF_ERROR(norm(p + "mlp_norm", &layer.output_norm_weight, &layer.output_norm_bias));
    w.layers.push_back(std::move(layer));
  }
  return w;
}

}  // namespace

absl::StatusOr<EncoderWeights> LoadEncoderWeights(const std::string& model_dir,
                                                  const EncoderConfig& config) {
  if (config.modernbert.has_value()) {
    ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, Checkpoint::Open(model_dir));
    return LoadModernBertWeights(std::move(checkpoint), config);
  }
  const NameScheme names = SchemeFor(config.architecture);
  ASSIGN_OR_RETURN(std::unique_ptr<Checkpoint> checkpoint, Checkpoint::Open(model_dir));
  ASSIGN_OR_RETURN(WeightReader reader,
                   WeightReader::Create(std::move(checkpoint), "embeddings.word_embeddings.weight",
                                        names.prefixes));
  const int64_t h = config.hidden_size;
  const int64_t inner = config.intermediate_size;
  EncoderWeights w;
  ASSIGN_OR_RETURN(w.word_embeddings,
                   reader.Get("embeddings.word_embeddings.weight", {config.vocab_size, h}));
  if (config.bigbird.has_value() && config.bigbird->rescale_embeddings) {
    // BigBirdEmbeddings scales the looked-up rows; the table serves no one
    // else (no LM head), so it is scaled once here.
    w.word_embeddings.mul_(std::sqrt(static_cast<double>(h)));
  }
  // BigBird's use_bias false: query, key and value without biases.
  const bool qkv_bias = !config.bigbird.has_value() || config.bigbird->use_bias;
  ASSIGN_OR_RETURN(w.position_embeddings, reader.Get("embeddings.position_embeddings.weight",
                                                     {config.max_position_embeddings, h}));
  if (config.type_vocab_size > 0) {
    ASSIGN_OR_RETURN(w.token_type_embeddings, reader.Get("embeddings.token_type_embeddings.weight",
                                                         {config.type_vocab_size, h}));
  }
  ASSIGN_OR_RETURN(w.embedding_norm_weight, reader.Get("embeddings.LayerNorm.weight", {h}));
  ASSIGN_OR_RETURN(w.embedding_norm_bias, reader.Get("embeddings.LayerNorm.bias", {h}));
  if (config.lsg.has_value()) {
    // The reference allocates 512 rows whatever num_global_tokens is.
    ASSIGN_OR_RETURN(w.global_embeddings,
                     reader.Get("embeddings.global_embeddings.weight", {512, h}));
  }

  for (int i = 0; i < config.num_layers; ++i) {
    const std::string p = absl::StrCat(names.layer, i, ".");
    EncoderLayerWeights layer;
    std::vector<at::Tensor> qkv_w, qkv_b;
    for (const std::string* proj : {&names.query, &names.key, &names.value}) {
      ASSIGN_OR_RETURN(at::Tensor weight, reader.Get(p + *proj + ".weight", {h, h}));
      at::Tensor bias = at::zeros({h}, at::kFloat);
      if (qkv_bias) {
        ASSIGN_OR_RETURN(bias, reader.Get(p + *proj + ".bias", {h}));
      }
      qkv_w.push_back(weight);
      qkv_b.push_back(bias);
    }
    layer.qkv_weight = at::cat(qkv_w, 0);
    layer.qkv_bias = at::cat(qkv_b, 0);
    if (config.architecture == Architecture::kLongformer) {
      std::vector<at::Tensor> global_w, global_b;
      for (const char* proj : {"query_global", "key_global", "value_global"}) {
        const std::string name = p + "attention.self." + proj;
        ASSIGN_OR_RETURN(at::Tensor weight, reader.Get(name + ".weight", {h, h}));
        ASSIGN_OR_RETURN(at::Tensor bias, reader.Get(name + ".bias", {h}));
        global_w.push_back(weight);
        global_b.push_back(bias);
      }
      layer.global_qkv_weight = at::cat(global_w, 0);
      layer.global_qkv_bias = at::cat(global_b, 0);
    }
    ASSIGN_OR_RETURN(layer.output_weight, reader.Get(p + names.output + ".weight", {h, h}));
    ASSIGN_OR_RETURN(layer.output_bias, reader.Get(p + names.output + ".bias", {h}));
    ASSIGN_OR_RETURN(layer.attention_norm_weight,
                     reader.Get(p + names.attention_norm + ".weight", {h}));
    ASSIGN_OR_RETURN(layer.attention_norm_bias,
                     reader.Get(p + names.attention_norm + ".bias", {h}));
    ASSIGN_OR_RETURN(layer.intermediate_weight,
                     reader.Get(p + names.intermediate + ".weight", {inner, h}));
    ASSIGN_OR_RETURN(layer.intermediate_bias,
                     reader.Get(p + names.intermediate + ".bias", {inner}));
    ASSIGN_OR_RETURN(layer.ffn_output_weight,
                     reader.Get(p + names.ffn_output + ".weight", {h, inner}));
    ASSIGN_OR_RETURN(layer.ffn_output_bias, reader.Get(p + names.ffn_output + ".bias", {h}));
    ASSIGN_OR_RETURN(layer.output_norm_weight, reader.Get(p + names.output_norm + ".weight", {h}));
    ASSIGN_OR_RETURN(layer.output_norm_bias, reader.Get(p + names.output_norm + ".bias", {h}));
    w.layers.push_back(std::move(layer));
  }
  return w;
}

}  // namespace docsparse
