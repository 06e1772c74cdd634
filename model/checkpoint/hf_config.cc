#include "model/checkpoint/hf_config.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <limits>
#include <map>
#include <optional>
#include <sstream>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "model/checkpoint/config_field_reader.h"
#include "nlohmann/json.hpp"

namespace docsparse {
namespace {

using json = nlohmann::json;

// Generic PretrainedConfig keys (and a few model-specific leftovers) that do
// not change an encoder's forward pass at inference: training-only settings
// (dropouts, initializer_range, gradient_checkpointing), output plumbing,
// bookkeeping, token ids used by tokenizers or generation, and the generation
// defaults that transformers 4.x wrote into every config. Anything else
// unrecognised is refused.
constexpr std::string_view kHarmlessKeys[] = {
    // bookkeeping
    "_name_or_path", "_commit_hash", "transformers_version", "torch_dtype", "dtype", "use_bfloat16",
    "tokenizer_class", "finetuning_task", "prefix", "task_specific_params", "xla_device",
    "_attn_implementation_autoset",
    // training only
    "gradient_checkpointing", "initializer_range", "hidden_dropout_prob",
    "attention_probs_dropout_prob", "classifier_dropout", "dropout", "attention_dropout",
    "qa_dropout", "seq_classif_dropout", "tf_legacy_loss",
    // outputs and execution, not math
    "use_cache", "output_hidden_states", "output_attentions", "return_dict", "torchscript",
    "chunk_size_feed_forward", "output_past",
    // weight tying: only the (unused) LM head depends on it
    "tie_word_embeddings", "tie_encoder_decoder", "tie_weights_", "cross_attention_hidden_size",
    // special token ids: the tokenizer files own them
    "bos_token_id", "eos_token_id", "sep_token_id", "cls_token_id", "decoder_start_token_id",
    // generation defaults (old configs embed them)
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
    "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
    "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
    "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
    "suppress_tokens", "begin_suppress_tokens"};

constexpr int kIntMax = std::numeric_limits<int>::max();

absl::StatusOr<Activation> ParseActivation(FieldReader& reader, std::string_view key) {
  ASSIGN_OR_RETURN(const std::string name, reader.RequireString(key));
  if (name == "gelu") return Activation::kGelu;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") {
    return Activation::kGeluNew;
  }
  if (name == "relu") return Activation::kRelu;
  return reader.Error(key, absl::StrFormat("unsupported value \"%s\" (supported: gelu, "
                                           "gelu_new, gelu_pytorch_tanh, gelu_fast, relu)",
                                           name));
}

// pad_token_id: an id inside the vocabulary, or null (-1) where allowed.
absl::StatusOr<int> ParsePadTokenId(FieldReader& reader, int vocab_size, bool allow_null) {
  ASSIGN_OR_RETURN(const json* value, reader.Require("pad_token_id"));
  if (value->is_null() && allow_null) return -1;
  return reader.Int("pad_token_id", *value, 0, vocab_size - 1);
}

absl::Status CheckHeads(FieldReader& reader, std::string_view heads_key,
                        const EncoderConfig& config) {
  if (config.hidden_size % config.num_heads != 0) {
    return reader.Error(heads_key, absl::StrFormat("%d heads do not divide the hidden size %d",
                                                   config.num_heads, config.hidden_size));
  }
  return absl::OkStatus();
}

// BERT and RoBERTa share their config fields.
absl::Status ParseBertFields(FieldReader& reader, EncoderConfig& config) {
  ASSIGN_OR_RETURN(config.vocab_size, reader.RequireInt("vocab_size", 1, 1 << 24));
  ASSIGN_OR_RETURN(config.hidden_size, reader.RequireInt("hidden_size", 1, 1 << 16));
  ASSIGN_OR_RETURN(config.num_layers, reader.RequireInt("num_hidden_layers", 1, 1024));
  ASSIGN_OR_RETURN(config.num_heads, reader.RequireInt("num_attention_heads", 1, 1 << 12));
  RETURN_IF_ERROR(CheckHeads(reader, "num_attention_heads", config));
  ASSIGN_OR_RETURN(config.intermediate_size, reader.RequireInt("intermediate_size", 1, 1 << 20));
  ASSIGN_OR_RETURN(config.activation, ParseActivation(reader, "hidden_act"));
  ASSIGN_OR_RETURN(config.max_position_embeddings,
                   reader.RequireInt("max_position_embeddings", 1, 1 << 24));
  ASSIGN_OR_RETURN(config.type_vocab_size, reader.RequireInt("type_vocab_size", 1, 1 << 16));
  ASSIGN_OR_RETURN(config.layer_norm_eps, reader.RequirePositiveNumber("layer_norm_eps"));
  // RoBERTa numbers positions from pad_token_id + 1, so it needs the id.
  ASSIGN_OR_RETURN(config.pad_token_id,
                   ParsePadTokenId(reader, config.vocab_size,
                                   !NumbersPositionsAfterPadding(config.architecture)));
  if (const json* type = reader.Find("position_embedding_type")) {
    ASSIGN_OR_RETURN(const std::string kind, reader.String("position_embedding_type", *type));
    if (kind != "absolute") {
      return reader.Error("position_embedding_type",
                          absl::StrFormat("unsupported value \"%s\" (supported: "
                                          "absolute)",
                                          kind));
    }
  }
  return absl::OkStatus();
}

absl::Status ParseDistilBertFields(FieldReader& reader, EncoderConfig& config) {
  ASSIGN_OR_RETURN(config.vocab_size, reader.RequireInt("vocab_size", 1, 1 << 24));
  ASSIGN_OR_RETURN(config.hidden_size, reader.RequireInt("dim", 1, 1 << 16));
  ASSIGN_OR_RETURN(config.num_layers, reader.RequireInt("n_layers", 1, 1024));
  ASSIGN_OR_RETURN(config.num_heads, reader.RequireInt("n_heads", 1, 1 << 12));
  RETURN_IF_ERROR(CheckHeads(reader, "n_heads", config));
  ASSIGN_OR_RETURN(config.intermediate_size, reader.RequireInt("hidden_dim", 1, 1 << 20));
  ASSIGN_OR_RETURN(config.activation, ParseActivation(reader, "activation"));
  ASSIGN_OR_RETURN(config.max_position_embeddings,
                   reader.RequireInt("max_position_embeddings", 1, 1 << 24));
  ASSIGN_OR_RETURN(config.pad_token_id, ParsePadTokenId(reader, config.vocab_size, true));
  // Sinusoidal tables are computed, not stored: a different model.
  RETURN_IF_ERROR(
      reader.OnlyNeutralBool("sinusoidal_pos_embds", false, "only learned position embeddings"));
  config.type_vocab_size = 0;
  config.layer_norm_eps = 1e-12;  // fixed in DistilBERT's modeling code
  return absl::OkStatus();
}

// Longformer's attention_window, and a flag of transformers' own.
absl::Status ParseLongformerFields(FieldReader& reader, EncoderConfig& config) {
  ASSIGN_OR_RETURN(config.attention_window, ReadUniformAttentionWindow(reader, config.num_layers));
  // Selects transformers' ONNX-friendly code path for the same math.
  return reader.OptionalBool("onnx_export", false).status();
}

// BigBird's fields, transformers' BigBirdConfig defaults where absent.
absl::Status ParseBigBirdFields(FieldReader& reader, EncoderConfig& config) {
  ASSIGN_OR_RETURN(BigBirdFields bigbird, ReadBigBirdFields(reader, /*use_bias_default=*/true));
  ASSIGN_OR_RETURN(bigbird.rescale_embeddings, reader.OptionalBool("rescale_embeddings", false));
  config.bigbird = bigbird;
  return absl::OkStatus();
}

// A rotary base: a positive number; the error names `key`.
absl::StatusOr<double> RopeTheta(const FieldReader& reader, std::string_view key,
                                 const json* value) {
  if (value == nullptr || !value->is_number() || value->get<double>() <= 0) {
    return reader.Error(key, "a positive number is required");
  }
  return value->get<double>();
}

// One rope_parameters entry ({"rope_type": "default", "rope_theta": x}).
absl::StatusOr<double> ParseRopeEntry(FieldReader& reader, const json& entry,
                                      const std::string& layer_type) {
  const std::string key = absl::StrCat("rope_parameters.", layer_type);
  if (!entry.is_object()) {
    return reader.Error(key, absl::StrFormat("expected object, got %s", JsonTypeName(entry)));
  }
  for (const auto& [name, value] : entry.items()) {
    if (name == "rope_type") {
      if (!value.is_string() || value.get<std::string>() != "default") {
        return reader.Error(key + ".rope_type", "only \"default\" (plain RoPE) is supported");
      }
    } else if (name != "rope_theta") {
      return reader.Error(key, absl::StrCat("unsupported entry '", name, "'"));
    }
  }
  const auto theta = entry.find("rope_theta");
  return RopeTheta(reader, key + ".rope_theta", theta == entry.end() ? nullptr : &*theta);
}

// ModernBERT's fields (transformers' ModernBertConfig; its defaults where a
// key may be absent).
absl::Status ParseModernBertFields(FieldReader& reader, EncoderConfig& config) {
  ASSIGN_OR_RETURN(config.vocab_size, reader.RequireInt("vocab_size", 1, 1 << 24));
  ASSIGN_OR_RETURN(config.hidden_size, reader.RequireInt("hidden_size", 1, 1 << 16));
  ASSIGN_OR_RETURN(config.num_layers, reader.RequireInt("num_hidden_layers", 1, 1024));
  ASSIGN_OR_RETURN(config.num_heads, reader.RequireInt("num_attention_heads", 1, 1 << 12));
  RETURN_IF_ERROR(CheckHeads(reader, "num_attention_heads", config));
  if (config.head_dim() % 2 != 0) {
    return reader.Error("num_attention_heads", "rotary positions need an even head size");
  }
  ASSIGN_OR_RETURN(config.intermediate_size, reader.RequireInt("intermediate_size", 1, 1 << 20));
  ASSIGN_OR_RETURN(config.activation, ParseActivation(reader, "hidden_activation"));
  ASSIGN_OR_RETURN(config.max_position_embeddings,
                   reader.RequireInt("max_position_embeddings", 1, 1 << 24));
  ASSIGN_OR_RETURN(config.layer_norm_eps, reader.RequirePositiveNumber("norm_eps"));
  ASSIGN_OR_RETURN(config.pad_token_id, ParsePadTokenId(reader, config.vocab_size, true));
  config.type_vocab_size = 0;
  ModernBertFields m;
  ASSIGN_OR_RETURN(m.local_attention, reader.OptionalInt("local_attention", 128, 2, 1 << 20));
  if (m.local_attention % 2 != 0) {
    return reader.Error("local_attention",
                        absl::StrFormat("%d is odd (the window is local_attention / 2 each side)",
                                        m.local_attention));
  }
  if (const json* types = reader.Find("layer_types"); types != nullptr && !types->is_null()) {
    if (!types->is_array() || static_cast<int>(types->size()) != config.num_layers) {
      return reader.Error("layer_types", absl::StrFormat("expected %d entries", config.num_layers));
    }
    for (const json& type : *types) {
      ASSIGN_OR_RETURN(const std::string name, reader.String("layer_types", type));
      if (name != "full_attention" && name != "sliding_attention") {
        return reader.Error("layer_types", absl::StrFormat("unsupported value \"%s\" (supported: "
                                                           "full_attention, sliding_attention)",
                                                           name));
      }
      m.global_layers.push_back(name == "full_attention");
    }
    // Written beside layer_types by some versions; the list decides.
    reader.Find("global_attn_every_n_layers");
  } else {
    ASSIGN_OR_RETURN(const int every,
                     reader.OptionalInt("global_attn_every_n_layers", 3, 1, 1 << 20));
    for (int i = 0; i < config.num_layers; ++i) m.global_layers.push_back(i % every == 0);
  }
  if (const json* rope = reader.Find("rope_parameters"); rope != nullptr && !rope->is_null()) {
    if (!rope->is_object()) {
      return reader.Error("rope_parameters",
                          absl::StrFormat("expected object, got %s", JsonTypeName(*rope)));
    }
    for (const auto& [type, entry] : rope->items()) {
      if (type == "full_attention") {
        ASSIGN_OR_RETURN(m.global_rope_theta, ParseRopeEntry(reader, entry, type));
      } else if (type == "sliding_attention") {
        ASSIGN_OR_RETURN(m.local_rope_theta, ParseRopeEntry(reader, entry, type));
      } else {
        return reader.Error("rope_parameters", absl::StrCat("unknown layer type '", type, "'"));
      }
    }
  } else {
    for (auto [key, theta] :
         {std::pair<std::string_view, double*>{"global_rope_theta", &m.global_rope_theta},
          {"local_rope_theta", &m.local_rope_theta}}) {
      if (const json* value = reader.Find(key); value != nullptr) {
        ASSIGN_OR_RETURN(*theta, RopeTheta(reader, key, value));
      }
    }
  }
  if (const json* scaling = reader.Find("rope_scaling");
      scaling != nullptr && !scaling->is_null()) {
    return reader.Error("rope_scaling", "scaled rotary positions are not supported");
  }
  ASSIGN_OR_RETURN(m.norm_bias, reader.OptionalBool("norm_bias", false));
  ASSIGN_OR_RETURN(m.attention_bias, reader.OptionalBool("attention_bias", false));
  ASSIGN_OR_RETURN(m.mlp_bias, reader.OptionalBool("mlp_bias", false));
  ASSIGN_OR_RETURN(m.classifier_bias, reader.OptionalBool("classifier_bias", false));
  if (const json* pooling = reader.Find("classifier_pooling"); pooling != nullptr) {
    ASSIGN_OR_RETURN(const std::string name, reader.String("classifier_pooling", *pooling));
    if (name != "cls" && name != "mean") {
      return reader.Error("classifier_pooling",
                          absl::StrFormat("unsupported value \"%s\" (supported: cls, mean)", name));
    }
    m.mean_pooling = name == "mean";
  }
  if (reader.Find("classifier_activation") != nullptr) {
    ASSIGN_OR_RETURN(m.classifier_activation, ParseActivation(reader, "classifier_activation"));
  }
  // Training, compilation and masked-LM settings that do not change an
  // encoder's forward pass; layer_norm_eps is unused (norm_eps is read);
  // position_embedding_type is ignored by ModernBERT's code (rotary).
  for (std::string_view key : {"layer_norm_eps", "initializer_cutoff_factor", "embedding_dropout",
                               "mlp_dropout", "deterministic_flash_attn", "reference_compile",
                               "sparse_prediction", "sparse_pred_ignore_index", "decoder_bias",
                               "repad_logits_with_grad", "position_embedding_type"}) {
    reader.Find(key);
  }
  config.modernbert = std::move(m);
  return absl::OkStatus();
}

// id2label / num_labels / problem_type / architectures.
absl::Status ParseClassificationFields(FieldReader& reader, EncoderConfig& config) {
  if (const json* archs = reader.Find("architectures"); archs != nullptr && !archs->is_null()) {
    if (!archs->is_array()) {
      return reader.Error("architectures", absl::StrFormat("expected array of strings, got %s",
                                                           JsonTypeName(*archs)));
    }
    for (const json& arch : *archs) {
      ASSIGN_OR_RETURN(std::string name, reader.String("architectures", arch));
      config.has_classification_head =
          config.has_classification_head || absl::EndsWith(name, "ForSequenceClassification");
      config.architectures.push_back(std::move(name));
    }
  }

  if (const json* labels = reader.Find("id2label"); labels != nullptr && !labels->is_null()) {
    if (!labels->is_object()) {
      return reader.Error("id2label",
                          absl::StrFormat("expected object, got %s", JsonTypeName(*labels)));
    }
    std::map<int, std::string> by_id;
    for (const auto& [key, value] : labels->items()) {
      int id = -1;
      if (!absl::SimpleAtoi(key, &id) || id < 0 || id >= static_cast<int>(labels->size())) {
        return reader.Error(
            "id2label", absl::StrFormat("key \"%s\" is not an id in [0, %d)", key, labels->size()));
      }
      ASSIGN_OR_RETURN(std::string name, reader.String("id2label", value));
      if (!by_id.emplace(id, std::move(name)).second) {
        return reader.Error("id2label", absl::StrFormat("id %d twice", id));
      }
    }
    for (auto& [id, name] : by_id) config.id2label.push_back(std::move(name));
  }
  if (const json* label2id = reader.Find("label2id");
      label2id != nullptr && !label2id->is_null() && !label2id->is_object()) {
    return reader.Error("label2id",
                        absl::StrFormat("expected object, got %s", JsonTypeName(*label2id)));
  }

  std::optional<int> num_labels;
  if (const json* value = reader.Find("num_labels")) {
    ASSIGN_OR_RETURN(num_labels, reader.Int("num_labels", *value, 1, 1 << 20));
  }
  if (num_labels.has_value() && !config.id2label.empty() &&
      *num_labels != static_cast<int>(config.id2label.size())) {
    return reader.Error("num_labels", absl::StrFormat("%d disagrees with the %d id2label "
                                                      "entries",
                                                      *num_labels, config.id2label.size()));
  }
  // Hugging Face's defaults: a classifier saved without id2label has
  // num_labels (else 2) labels named LABEL_<i>.
  if (config.id2label.empty() && (num_labels.has_value() || config.has_classification_head)) {
    for (int i = 0; i < num_labels.value_or(2); ++i) {
      config.id2label.push_back(absl::StrCat("LABEL_", i));
    }
  }

  if (const json* type = reader.Find("problem_type"); type != nullptr && !type->is_null()) {
    ASSIGN_OR_RETURN(const std::string name, reader.String("problem_type", *type));
    if (name == "single_label_classification") {
      config.problem_type = ProblemType::kSingleLabel;
    } else if (name == "multi_label_classification") {
      config.problem_type = ProblemType::kMultiLabel;
    } else if (name == "regression") {
      config.problem_type = ProblemType::kRegression;
    } else {
      return reader.Error("problem_type", absl::StrFormat("unsupported value \"%s\" (supported: "
                                                          "single_label_classification, "
                                                          "multi_label_classification, regression)",
                                                          name));
    }
    if (config.problem_type == ProblemType::kSingleLabel && config.id2label.size() == 1) {
      return reader.Error("problem_type",
                          "single_label_classification needs at least 2 "
                          "labels");
    }
  }
  return absl::OkStatus();
}

// The LSG fields, present in configs saved by the reference's LSG classes.
absl::Status ParseLsgFields(FieldReader& reader, EncoderConfig& config) {
  // BigBird's block_size is its own, and the LSG reference converts no
  // BigBird: an LSG key there is an unknown field.
  if (config.bigbird.has_value()) return absl::OkStatus();
  constexpr std::string_view kLsgKeys[] = {
      "block_size",         "sparse_block_size", "sparsity_factor",  "sparsity_type",
      "num_global_tokens",  "adaptive",          "mask_first_token", "pool_with_global",
      "lsh_num_pre_rounds", "base_model_prefix"};
  bool is_lsg = false;
  for (std::string_view key : kLsgKeys) is_lsg = is_lsg || reader.Find(key) != nullptr;
  for (const std::string& arch : config.architectures) {
    is_lsg = is_lsg || absl::StartsWith(arch, "LSG");
  }
  if (!is_lsg) return absl::OkStatus();
  ASSIGN_OR_RETURN(config.lsg, ReadLsgFields(reader));
  return absl::OkStatus();
}

// Keys that exist on every PretrainedConfig but would turn the encoder into
// something else when set.
absl::Status CheckNeutralKeys(FieldReader& reader) {
  RETURN_IF_ERROR(reader.OnlyNeutralBool("is_decoder", false, "causal attention"));
  RETURN_IF_ERROR(reader.OnlyNeutralBool("add_cross_attention", false, "cross-attention layers"));
  RETURN_IF_ERROR(reader.OnlyNeutralBool("is_encoder_decoder", false, "encoder-only architecture"));
  if (const json* pruned = reader.Find("pruned_heads"); pruned != nullptr && !pruned->is_null()) {
    if (!pruned->is_object() || !pruned->empty()) {
      return reader.Error("pruned_heads", "pruned attention heads are not supported");
    }
  }
  return absl::OkStatus();
}

}  // namespace

std::string_view ArchitectureName(Architecture architecture) {
  switch (architecture) {
    case Architecture::kBert:
      return "bert";
    case Architecture::kRoberta:
      return "roberta";
    case Architecture::kDistilBert:
      return "distilbert";
    case Architecture::kLongformer:
      return "longformer";
    case Architecture::kModernBert:
      return "modernbert";
    case Architecture::kBigBird:
      return "big_bird";
  }
  return "?";
}

bool NumbersPositionsAfterPadding(Architecture architecture) {
  return architecture == Architecture::kRoberta || architecture == Architecture::kLongformer;
}

std::string_view ActivationName(Activation activation) {
  switch (activation) {
    case Activation::kGelu:
      return "gelu";
    case Activation::kGeluNew:
      return "gelu_new";
    case Activation::kRelu:
      return "relu";
  }
  return "?";
}

absl::StatusOr<EncoderConfig> ParseEncoderConfig(const nlohmann::json& config,
                                                 std::string_view source_name) {
  if (!config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: expected a JSON object, got %s", source_name, JsonTypeName(config)));
  }
  FieldReader reader(config, source_name, kHarmlessKeys);
  EncoderConfig result;
  ASSIGN_OR_RETURN(const std::string model_type, reader.RequireString("model_type"));
  if (model_type == "bert") {
    result.architecture = Architecture::kBert;
  } else if (model_type == "roberta") {
    result.architecture = Architecture::kRoberta;
  } else if (model_type == "distilbert") {
    result.architecture = Architecture::kDistilBert;
  } else if (model_type == "longformer") {
    result.architecture = Architecture::kLongformer;
  } else if (model_type == "modernbert") {
    result.architecture = Architecture::kModernBert;
  } else if (model_type == "big_bird") {
    result.architecture = Architecture::kBigBird;
  } else {
    return reader.Error("model_type", absl::StrFormat("unsupported value \"%s\" (supported: "
                                                      "bert, roberta, distilbert, longformer, "
                                                      "modernbert, big_bird)",
                                                      model_type));
  }
  if (result.architecture == Architecture::kDistilBert) {
    RETURN_IF_ERROR(ParseDistilBertFields(reader, result));
  } else if (result.architecture == Architecture::kModernBert) {
    RETURN_IF_ERROR(ParseModernBertFields(reader, result));
  } else {
    RETURN_IF_ERROR(ParseBertFields(reader, result));
  }
  if (result.architecture == Architecture::kLongformer) {
    RETURN_IF_ERROR(ParseLongformerFields(reader, result));
  }
  if (result.architecture == Architecture::kBigBird) {
    RETURN_IF_ERROR(ParseBigBirdFields(reader, result));
  }
  RETURN_IF_ERROR(ParseClassificationFields(reader, result));
  RETURN_IF_ERROR(ParseLsgFields(reader, result));
  RETURN_IF_ERROR(CheckNeutralKeys(reader));
  RETURN_IF_ERROR(reader.CheckNoUnknownKeys(model_type));
  return result;
}

absl::StatusOr<EncoderConfig> LoadEncoderConfig(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": not found"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open"));
  }
  json config;
  try {
    config = json::parse(in);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON: ", e.what()));
  }
  return ParseEncoderConfig(config, path);
}

}  // namespace docsparse
