#include "model/bart_config.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <iterator>
#include <set>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace docsparse {
namespace {

using json = nlohmann::json;

// Keys that do not change the encoder's forward pass at inference (see the
// header): bookkeeping, training-only settings, output plumbing, token ids
// the tokenizer or generation own, generation defaults, the decoder, and the
// task heads.
constexpr std::string_view kHarmlessKeys[] = {
    // bookkeeping
    "_name_or_path", "_commit_hash", "transformers_version", "torch_dtype", "dtype", "use_bfloat16",
    "tokenizer_class", "finetuning_task", "prefix", "task_specific_params", "xla_device",
    "_attn_implementation_autoset", "num_hidden_layers",
    // training only
    "gradient_checkpointing", "init_std", "initializer_range", "dropout", "attention_dropout",
    "activation_dropout", "classifier_dropout", "classif_dropout", "encoder_layerdrop",
    // outputs and execution, not math
    "use_cache", "output_hidden_states", "output_attentions", "return_dict", "torchscript",
    "chunk_size_feed_forward", "output_past",
    // special token ids: the tokenizer files own them
    "bos_token_id", "eos_token_id", "sep_token_id", "cls_token_id", "mask_token_id",
    // training only (decoder), and the start token generation_config.h owns
    "decoder_layerdrop", "decoder_start_token_id",
    // task heads
    "architectures", "id2label", "label2id", "num_labels", "problem_type",
    // generation defaults (old configs embed them)
    "max_length", "min_length", "do_sample", "early_stopping", "num_beams", "num_beam_groups",
    "diversity_penalty", "temperature", "top_k", "top_p", "typical_p", "repetition_penalty",
    "length_penalty", "no_repeat_ngram_size", "encoder_no_repeat_ngram_size", "bad_words_ids",
    "num_return_sequences", "output_scores", "return_dict_in_generate", "forced_bos_token_id",
    "forced_eos_token_id", "remove_invalid_values", "exponential_decay_length_penalty",
    "suppress_tokens", "begin_suppress_tokens"};

std::string_view JsonTypeName(const json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number_float()) return "number";
  return value.type_name();
}

// Reads fields of one JSON object and remembers which keys it consumed, so
// that the rest can be reported as unknown.
class FieldReader {
 public:
  FieldReader(const json& object, std::string_view source) : object_(object), source_(source) {}

  // Names the model type in "unknown field" errors.
  void set_model_type(std::string model_type) { model_type_ = std::move(model_type); }

  absl::Status Error(std::string_view key, std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrFormat("%s: field '%s': %s", source_, key, what));
  }

  const json* Find(std::string_view key) {
    consumed_.insert(std::string(key));
    const auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }

  absl::StatusOr<const json*> Require(std::string_view key) {
    const json* value = Find(key);
    if (value == nullptr) {
      return absl::InvalidArgumentError(absl::StrFormat("%s: missing field '%s'", source_, key));
    }
    return value;
  }

  absl::StatusOr<int> Int(std::string_view key, const json& value, int min, int max) const {
    if (!value.is_number_integer()) {
      return Error(key, absl::StrFormat("expected integer, got %s", JsonTypeName(value)));
    }
    // Non-negative literals parse as unsigned and may exceed int64.
    const bool in_range = value.is_number_unsigned()
                              ? value.get<uint64_t>() <= static_cast<uint64_t>(max) &&
                                    static_cast<int64_t>(value.get<uint64_t>()) >= min
                              : value.get<int64_t>() >= min && value.get<int64_t>() <= max;
    if (!in_range) {
      return Error(key, absl::StrFormat("%s is out of range [%d, %d]", value.dump(), min, max));
    }
    return static_cast<int>(value.get<int64_t>());
  }

  absl::StatusOr<int> RequireInt(std::string_view key, int min, int max) {
    ASSIGN_OR_RETURN(const json* value, Require(key));
    return Int(key, *value, min, max);
  }

  absl::StatusOr<int> OptionalInt(std::string_view key, int fallback, int min, int max) {
    const json* value = Find(key);
    if (value == nullptr) return fallback;
    return Int(key, *value, min, max);
  }

  absl::StatusOr<std::string> String(std::string_view key, const json& value) const {
    if (!value.is_string()) {
      return Error(key, absl::StrFormat("expected string, got %s", JsonTypeName(value)));
    }
    return value.get<std::string>();
  }

  absl::StatusOr<std::string> RequireString(std::string_view key) {
    ASSIGN_OR_RETURN(const json* value, Require(key));
    return String(key, *value);
  }

  absl::StatusOr<bool> Bool(std::string_view key, const json& value) const {
    if (!value.is_boolean()) {
      return Error(key, absl::StrFormat("expected boolean, got %s", JsonTypeName(value)));
    }
    return value.get<bool>();
  }

  absl::StatusOr<bool> RequireBool(std::string_view key) {
    ASSIGN_OR_RETURN(const json* value, Require(key));
    return Bool(key, *value);
  }

  absl::StatusOr<bool> OptionalBool(std::string_view key, bool fallback) {
    const json* value = Find(key);
    if (value == nullptr) return fallback;
    return Bool(key, *value);
  }

  // A key whose only supported value is the model's own (absent = that value).
  absl::Status OnlyNeutral(std::string_view key, const json& neutral, std::string_view why) {
    return OnlyAmong(key, {neutral}, why);
  }

  absl::Status OnlyAmong(std::string_view key, const std::vector<json>& allowed,
                         std::string_view why) {
    const json* value = Find(key);
    if (value == nullptr || std::find(allowed.begin(), allowed.end(), *value) != allowed.end()) {
      return absl::OkStatus();
    }
    return Error(key, absl::StrFormat("%s is not supported (%s)", value->dump(), why));
  }

  absl::Status CheckNoUnknownKeys() const {
    for (const auto& [key, value] : object_.items()) {
      const bool harmless = std::find(std::begin(kHarmlessKeys), std::end(kHarmlessKeys), key) !=
                            std::end(kHarmlessKeys);
      if (consumed_.count(key) == 0 && !harmless) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%s: unknown field '%s' for model_type %s", source_, key, model_type_));
      }
    }
    return absl::OkStatus();
  }

  std::string_view source() const { return source_; }

 private:
  const json& object_;
  std::string_view source_;
  std::string model_type_ = "bart";
  std::set<std::string, std::less<>> consumed_;
};

// modeling_bart.py's ACT2FN names that we implement.
absl::StatusOr<Activation> ParseActivation(FieldReader& reader) {
  constexpr std::string_view kKey = "activation_function";
  ASSIGN_OR_RETURN(const std::string name, reader.RequireString(kKey));
  if (name == "gelu") return Activation::kGelu;
  if (name == "gelu_new" || name == "gelu_pytorch_tanh" || name == "gelu_fast") {
    return Activation::kGeluNew;
  }
  if (name == "relu") return Activation::kRelu;
  return reader.Error(kKey, absl::StrFormat("unsupported value \"%s\" (supported: gelu, gelu_new, "
                                            "gelu_pytorch_tanh, gelu_fast, relu)",
                                            name));
}

absl::Status ParseModelFields(FieldReader& reader, BartConfig& config) {
  ASSIGN_OR_RETURN(config.vocab_size, reader.RequireInt("vocab_size", 1, 1 << 24));
  ASSIGN_OR_RETURN(config.hidden_size, reader.RequireInt("d_model", 1, 1 << 16));
  ASSIGN_OR_RETURN(config.num_layers, reader.RequireInt("encoder_layers", 1, 1024));
  ASSIGN_OR_RETURN(config.num_heads, reader.RequireInt("encoder_attention_heads", 1, 1 << 12));
  if (config.hidden_size % config.num_heads != 0) {
    return reader.Error(
        "encoder_attention_heads",
        absl::StrFormat("%d heads do not divide d_model %d", config.num_heads, config.hidden_size));
  }
  ASSIGN_OR_RETURN(config.intermediate_size, reader.RequireInt("encoder_ffn_dim", 1, 1 << 20));
  ASSIGN_OR_RETURN(config.activation, ParseActivation(reader));
  ASSIGN_OR_RETURN(config.max_position_embeddings,
                   reader.RequireInt("max_position_embeddings", 1, 1 << 24));
  ASSIGN_OR_RETURN(config.pad_token_id,
                   reader.RequireInt("pad_token_id", 0, config.vocab_size - 1));
  ASSIGN_OR_RETURN(config.scale_embedding, reader.RequireBool("scale_embedding"));

  ASSIGN_OR_RETURN(config.decoder_layers, reader.RequireInt("decoder_layers", 1, 1024));
  ASSIGN_OR_RETURN(config.decoder_heads, reader.RequireInt("decoder_attention_heads", 1, 1 << 12));
  if (config.hidden_size % config.decoder_heads != 0) {
    return reader.Error("decoder_attention_heads",
                        absl::StrFormat("%d heads do not divide d_model %d", config.decoder_heads,
                                        config.hidden_size));
  }
  ASSIGN_OR_RETURN(config.decoder_ffn_size, reader.RequireInt("decoder_ffn_dim", 1, 1 << 20));
  ASSIGN_OR_RETURN(config.tie_word_embeddings, reader.OptionalBool("tie_word_embeddings", true));
  RETURN_IF_ERROR(reader.OnlyNeutral("tie_encoder_decoder", false,
                                     "encoder and decoder weights are separate tensors"));

  RETURN_IF_ERROR(reader.OnlyNeutral("is_encoder_decoder", true, "an encoder-decoder"));
  RETURN_IF_ERROR(reader.OnlyNeutral("is_decoder", false, "causal attention"));
  RETURN_IF_ERROR(reader.OnlyNeutral("add_cross_attention", false, "cross-attention layers"));
  RETURN_IF_ERROR(reader.OnlyNeutral("add_bias_logits", false, "no logit bias"));
  if (config.architecture == Seq2SeqArchitecture::kBart) {
    RETURN_IF_ERROR(reader.OnlyNeutral("normalize_before", false, "BART layers are post-LN"));
    RETURN_IF_ERROR(reader.OnlyNeutral("add_final_layer_norm", false, "no final encoder norm"));
    RETURN_IF_ERROR(
        reader.OnlyNeutral("normalize_embedding", true, "BART has layernorm_embedding"));
    RETURN_IF_ERROR(reader.OnlyNeutral("static_position_embeddings", false,
                                       "only learned position embeddings"));
    RETURN_IF_ERROR(reader.OnlyNeutral("extra_pos_embeddings", 2, "positions are offset by 2"));
  } else {
    RETURN_IF_ERROR(reader.OnlyNeutral("normalize_before", true, "Pegasus layers are pre-LN"));
    RETURN_IF_ERROR(
        reader.OnlyNeutral("add_final_layer_norm", true, "Pegasus has final layer norms"));
    RETURN_IF_ERROR(
        reader.OnlyNeutral("normalize_embedding", false, "Pegasus has no embedding layer norm"));
    RETURN_IF_ERROR(
        reader.OnlyNeutral("static_position_embeddings", true, "Pegasus positions are sinusoidal"));
    RETURN_IF_ERROR(
        reader.OnlyAmong("extra_pos_embeddings", {0, 1}, "Pegasus positions are not offset"));
  }
  if (const json* pruned = reader.Find("pruned_heads"); pruned != nullptr && !pruned->is_null()) {
    if (!pruned->is_object() || !pruned->empty()) {
      return reader.Error("pruned_heads", "pruned attention heads are not supported");
    }
  }
  return absl::OkStatus();
}

// The LSG fields of LSGBartConfig and LSGPegasusConfig (the same fields, the
// same fix-up).
absl::Status ParseLsgFields(FieldReader& reader, const json& object, BartConfig& config) {
  constexpr std::string_view kLsgKeys[] = {"block_size",
                                           "sparse_block_size",
                                           "sparsity_factor",
                                           "sparsity_type",
                                           "num_global_tokens",
                                           "adaptive",
                                           "mask_first_token",
                                           "pool_with_global",
                                           "lsh_num_pre_rounds",
                                           "base_model_prefix",
                                           "pass_global_tokens_to_decoder"};
  bool is_lsg = false;
  for (std::string_view key : kLsgKeys) is_lsg = is_lsg || object.contains(key);
  if (const auto archs = object.find("architectures"); archs != object.end() && archs->is_array()) {
    for (const json& arch : *archs) {
      is_lsg = is_lsg || (arch.is_string() && absl::StartsWith(arch.get<std::string>(), "LSG"));
    }
  }
  if (!is_lsg) return absl::OkStatus();
  if (const json* prefix = reader.Find("base_model_prefix")) {
    ASSIGN_OR_RETURN(const std::string value, reader.String("base_model_prefix", *prefix));
    if (value != "lsg") {
      return reader.Error("base_model_prefix",
                          absl::StrFormat("unsupported value \"%s\" (supported: lsg)", value));
    }
  }
  LsgConfig lsg;
  ASSIGN_OR_RETURN(lsg.block_size, reader.OptionalInt("block_size", lsg.block_size, 1, 65536));
  ASSIGN_OR_RETURN(lsg.sparse_block_size,
                   reader.OptionalInt("sparse_block_size", lsg.sparse_block_size, 0, 65536));
  ASSIGN_OR_RETURN(lsg.sparsity_factor,
                   reader.OptionalInt("sparsity_factor", lsg.sparsity_factor, 0, 65536));
  ASSIGN_OR_RETURN(lsg.num_global_tokens,
                   reader.OptionalInt("num_global_tokens", lsg.num_global_tokens, 1, 512));
  ASSIGN_OR_RETURN(lsg.lsh_num_pre_rounds,
                   reader.OptionalInt("lsh_num_pre_rounds", lsg.lsh_num_pre_rounds, 0, 16));
  ASSIGN_OR_RETURN(lsg.adaptive, reader.OptionalBool("adaptive", lsg.adaptive));
  ASSIGN_OR_RETURN(lsg.mask_first_token,
                   reader.OptionalBool("mask_first_token", lsg.mask_first_token));
  ASSIGN_OR_RETURN(lsg.pool_with_global,
                   reader.OptionalBool("pool_with_global", lsg.pool_with_global));
  ASSIGN_OR_RETURN(config.pass_global_tokens_to_decoder,
                   reader.OptionalBool("pass_global_tokens_to_decoder", true));
  if (const json* type = reader.Find("sparsity_type")) {
    if (type->is_null()) {
      lsg.sparsity_type = LsgSparsity::kNone;
    } else {
      ASSIGN_OR_RETURN(const std::string name, reader.String("sparsity_type", *type));
      const std::optional<LsgSparsity> parsed = ParseLsgSparsity(name);
      if (!parsed.has_value()) {
        return reader.Error("sparsity_type",
                            absl::StrFormat("unsupported value \"%s\" (supported: none, norm, "
                                            "pooling, lsh, stride, block_stride, bos_pooling)",
                                            name));
      }
      lsg.sparsity_type = *parsed;
    }
  }
  // LSG{Bart,Pegasus}Config.__init__: mask_first_token needs pool_with_global.
  if (lsg.mask_first_token) lsg.pool_with_global = true;
  RETURN_IF_ERROR(ValidateLsgConfig(lsg, reader.source()));
  reader.Find("auto_map");  // the reference's remote-code map; we have our own code
  config.lsg = lsg;
  return absl::OkStatus();
}

}  // namespace

std::string_view Seq2SeqArchitectureName(Seq2SeqArchitecture architecture) {
  switch (architecture) {
    case Seq2SeqArchitecture::kBart:
      return "bart";
    case Seq2SeqArchitecture::kPegasus:
      return "pegasus";
  }
  return "unknown";
}

absl::StatusOr<BartConfig> ParseBartConfig(const nlohmann::json& config,
                                           std::string_view source_name) {
  if (!config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: expected a JSON object, got %s", source_name, JsonTypeName(config)));
  }
  FieldReader reader(config, source_name);
  ASSIGN_OR_RETURN(const std::string model_type, reader.RequireString("model_type"));
  BartConfig result;
  if (model_type == "bart") {
    result.architecture = Seq2SeqArchitecture::kBart;
  } else if (model_type == "pegasus") {
    result.architecture = Seq2SeqArchitecture::kPegasus;
  } else {
    return reader.Error(
        "model_type",
        absl::StrFormat("unsupported value \"%s\" (supported: bart, pegasus)", model_type));
  }
  reader.set_model_type(model_type);
  RETURN_IF_ERROR(ParseModelFields(reader, result));
  RETURN_IF_ERROR(ParseLsgFields(reader, config, result));
  RETURN_IF_ERROR(reader.CheckNoUnknownKeys());
  return result;
}

absl::StatusOr<BartConfig> LoadBartConfig(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(absl::StrCat(path, ": not found"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open"));
  json config;
  try {
    config = json::parse(in);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON: ", e.what()));
  }
  return ParseBartConfig(config, path);
}

}  // namespace docsparse
