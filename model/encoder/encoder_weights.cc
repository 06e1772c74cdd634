// Maps the Hugging Face tensor names of BERT, RoBERTa, DistilBERT and
// Longformer onto EncoderWeights.
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
  if (architecture == Architecture::kLongformer) {
    return {{"", "longformer."},
            "encoder.layer.",
            "attention.self.query",
            "attention.self.key",
            "attention.self.value",
            "attention.output.dense",
            "attention.output.LayerNorm",
            "intermediate.dense",
            "output.dense",
            "output.LayerNorm"};
  }
  return {{"", "bert.", "roberta."},
          "encoder.layer.",
          "attention.self.query",
          "attention.self.key",
          "attention.self.value",
          "attention.output.dense",
          "attention.output.LayerNorm",
          "intermediate.dense",
          "output.dense",
          "output.LayerNorm"};
}

}  // namespace

absl::StatusOr<EncoderWeights> LoadEncoderWeights(const std::string& model_dir,
                                                  const EncoderConfig& config) {
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
      ASSIGN_OR_RETURN(at::Tensor bias, reader.Get(p + *proj + ".bias", {h}));
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
