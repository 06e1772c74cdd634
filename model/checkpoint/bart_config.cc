#include "model/checkpoint/bart_config.h"

#include <sys/stat.h>

#include <algorithm>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "model/checkpoint/config_field_reader.h"
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
  if (config.architecture == Seq2SeqArchitecture::kLed) {
    ASSIGN_OR_RETURN(config.max_position_embeddings,
                     reader.RequireInt("max_encoder_position_embeddings", 1, 1 << 24));
    ASSIGN_OR_RETURN(config.decoder_max_position_embeddings,
                     reader.RequireInt("max_decoder_position_embeddings", 1, 1 << 24));
    ASSIGN_OR_RETURN(config.attention_window,
                     ReadUniformAttentionWindow(reader, config.num_layers));
  } else {
    ASSIGN_OR_RETURN(config.max_position_embeddings,
                     reader.RequireInt("max_position_embeddings", 1, 1 << 24));
    config.decoder_max_position_embeddings = config.max_position_embeddings;
    ASSIGN_OR_RETURN(config.scale_embedding, reader.RequireBool("scale_embedding"));
  }
  ASSIGN_OR_RETURN(config.pad_token_id,
                   reader.RequireInt("pad_token_id", 0, config.vocab_size - 1));

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
  } else if (config.architecture == Seq2SeqArchitecture::kPegasus) {
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

// BigBirdPegasusConfig's attention fields, its defaults where absent.
absl::Status ParseBigBirdFields(FieldReader& reader, BartConfig& config) {
  ASSIGN_OR_RETURN(config.bigbird, ReadBigBirdFields(reader, /*use_bias_default=*/false));
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
  ASSIGN_OR_RETURN(config.lsg, ReadLsgFields(reader));
  ASSIGN_OR_RETURN(config.pass_global_tokens_to_decoder,
                   reader.OptionalBool("pass_global_tokens_to_decoder", true));
  return absl::OkStatus();
}

}  // namespace

std::string_view Seq2SeqArchitectureName(Seq2SeqArchitecture architecture) {
  switch (architecture) {
    case Seq2SeqArchitecture::kBart:
      return "bart";
    case Seq2SeqArchitecture::kPegasus:
      return "pegasus";
    case Seq2SeqArchitecture::kLed:
      return "led";
    case Seq2SeqArchitecture::kBigBirdPegasus:
      return "bigbird_pegasus";
  }
  return "unknown";
}

absl::StatusOr<BartConfig> ParseBartConfig(const nlohmann::json& config,
                                           std::string_view source_name) {
  if (!config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: expected a JSON object, got %s", source_name, JsonTypeName(config)));
  }
  FieldReader reader(config, source_name, kHarmlessKeys);
  ASSIGN_OR_RETURN(const std::string model_type, reader.RequireString("model_type"));
  BartConfig result;
  if (model_type == "bart") {
    result.architecture = Seq2SeqArchitecture::kBart;
  } else if (model_type == "pegasus") {
    result.architecture = Seq2SeqArchitecture::kPegasus;
  } else if (model_type == "led") {
    result.architecture = Seq2SeqArchitecture::kLed;
  } else if (model_type == "bigbird_pegasus") {
    result.architecture = Seq2SeqArchitecture::kBigBirdPegasus;
  } else {
    return reader.Error("model_type", absl::StrFormat("unsupported value \"%s\" (supported: "
                                                      "bart, pegasus, led, bigbird_pegasus)",
                                                      model_type));
  }
  RETURN_IF_ERROR(ParseModelFields(reader, result));
  // LSG converts BART and Pegasus; LED's and BigBird-Pegasus' encoders have
  // their own sparse attention.
  if (result.architecture == Seq2SeqArchitecture::kBigBirdPegasus) {
    RETURN_IF_ERROR(ParseBigBirdFields(reader, result));
  } else if (result.architecture != Seq2SeqArchitecture::kLed) {
    RETURN_IF_ERROR(ParseLsgFields(reader, config, result));
  }
  RETURN_IF_ERROR(reader.CheckNoUnknownKeys(model_type));
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
