// Hugging Face `config.json` of a BART-family encoder-decoder: BART
// (model_type "bart") and Pegasus (model_type "pegasus"), plain or LSG
// (ccdv-ai/convert_checkpoint_to_lsg, LSGBartConfig / LSGPegasusConfig), and
// LED (model_type "led", the Longformer-Encoder-Decoder), and BigBird-Pegasus
// (model_type "bigbird_pegasus").
//
// Same rules as model/checkpoint/hf_config.h: a config we do not fully understand is
// refused with a message naming the field.
//   - Required (they fix tensor shapes or the math): vocab_size, d_model,
//     encoder_layers, encoder_attention_heads, encoder_ffn_dim,
//     decoder_layers, decoder_attention_heads, decoder_ffn_dim,
//     activation_function, max_position_embeddings, pad_token_id,
//     scale_embedding. LayerNorm eps is not a config field: 1e-5, as
//     nn.LayerNorm's default in modeling_bart.py / modeling_pegasus.py.
//   - tie_word_embeddings (default true): the LM head is the shared token
//     embedding, as PreTrainedModel.tie_weights makes it; false needs a
//     separate lm_head.weight.
//   - The classification fields (architectures, id2label, label2id,
//     num_labels, problem_type), which only task heads read, and the
//     PretrainedConfig bookkeeping / training / generation keys that do not
//     change the forward pass (kHarmlessKeys in the .cc) are accepted and
//     ignored: generation settings are model/checkpoint/generation_config.h's.
//   - Keys of older (fairseq-era) configs that the HF modeling code ignores
//     but that would describe a different model if honoured are accepted only
//     at the model's own value. BART: normalize_before false,
//     add_final_layer_norm false, normalize_embedding true,
//     static_position_embeddings false, extra_pos_embeddings 2. Pegasus:
//     normalize_before true, add_final_layer_norm true, normalize_embedding
//     false, static_position_embeddings true, extra_pos_embeddings 0 or 1
//     (google/pegasus-* carry 1; positions are not offset). Both:
//     add_bias_logits false, is_encoder_decoder true, is_decoder and
//     add_cross_attention false.
//   - LED: BART's fields, except that the position tables are
//     max_encoder_position_embeddings and max_decoder_position_embeddings
//     (in place of max_position_embeddings), scale_embedding does not exist
//     (no scaling), and attention_window is required (one even window for
//     every layer, model/checkpoint/config_field_reader.h).
//   - BigBird-Pegasus: Pegasus' fields, positions learned from 0 (one
//     table, max_position_embeddings), and BigBird's attention fields
//     (attention_type, block_size, num_random_blocks; use_bias, default
//     false as in BigBirdPegasusConfig: no biases on any attention
//     projection). LSG is refused.
//   - LSG (BART and Pegasus alike): the fields of model/checkpoint/lsg_config.h plus
//     pass_global_tokens_to_decoder (default true), "auto_map" and
//     "base_model_prefix": "lsg"; the reference's fix-up (mask_first_token
//     forces pool_with_global) is applied and ValidateLsgConfig's checks are
//     errors.
//   - Any other key: "config.json: unknown field 'foo' for model_type bart".
#ifndef DOCSPARSE_MODEL_CHECKPOINT_BART_CONFIG_H_
#define DOCSPARSE_MODEL_CHECKPOINT_BART_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/checkpoint/hf_config.h"
#include "model/checkpoint/lsg_config.h"
#include "nlohmann/json_fwd.hpp"

namespace docsparse {

// The BART-family architectures: where they differ.
enum class Seq2SeqArchitecture {
  // Post-LN layers, learned positions numbered from 2, layernorm_embedding.
  kBart,
  // Pre-LN layers with a final encoder.layer_norm / decoder.layer_norm,
  // sinusoidal positions from 0, no embedding LayerNorm.
  kPegasus,
  // BART's layers with Longformer's self-attention in the encoder (its own
  // projections for global tokens), learned positions numbered from 0,
  // separate encoder and decoder position tables.
  kLed,
  // Pegasus' pre-LN layers with BigBird's block-sparse self-attention in
  // the encoder, learned positions numbered from 0, the final norms named
  // layernorm_embedding, attention projections with or without biases.
  kBigBirdPegasus,
};

std::string_view Seq2SeqArchitectureName(Seq2SeqArchitecture architecture);  // "bart", ...

struct BartConfig {
  Seq2SeqArchitecture architecture = Seq2SeqArchitecture::kBart;
  int vocab_size = 0;
  int hidden_size = 0;        // d_model
  int num_layers = 0;         // encoder_layers
  int num_heads = 0;          // encoder_attention_heads
  int intermediate_size = 0;  // encoder_ffn_dim
  // The encoder's positions. Rows of the learned position table are
  // max_position_embeddings + position_offset().
  int max_position_embeddings = 0;
  // The decoder's positions: max_position_embeddings but for LED.
  int decoder_max_position_embeddings = 0;
  int pad_token_id = 0;
  bool scale_embedding = false;  // token embeddings times sqrt(d_model)
  double layer_norm_eps = 1e-5;
  Activation activation = Activation::kGelu;

  // Set for an LSG checkpoint.
  std::optional<LsgConfig> lsg;
  // LSG only: the encoder output keeps the global tokens' rows in front
  // ([batch, global + tokens, h]), as LSGBartEncoder / LSGPegasusEncoder return them for the
  // decoder to cross-attend; pool_with_global then does not apply.
  bool pass_global_tokens_to_decoder = true;

  // The decoder (encoder-decoder generation).
  int decoder_layers = 0;
  int decoder_heads = 0;     // decoder_attention_heads
  int decoder_ffn_size = 0;  // decoder_ffn_dim
  // LM head = the shared token embedding (else lm_head.weight).
  bool tie_word_embeddings = true;

  // LED: the encoder's Longformer window (every layer's); 0 otherwise.
  int attention_window = 0;

  // BigBird-Pegasus: the encoder's block-sparse attention (rescale_embeddings
  // is not used: scale_embedding is).
  std::optional<BigBirdFields> bigbird;

  int head_dim() const { return hidden_size / num_heads; }
  int decoder_head_dim() const { return hidden_size / decoder_heads; }
  // The attention projections (self and cross, q/k/v/out) have biases:
  // all but BigBird-Pegasus with use_bias false.
  bool attention_bias() const { return !bigbird.has_value() || bigbird->use_bias; }
  bool pre_layer_norm() const {
    return architecture == Seq2SeqArchitecture::kPegasus ||
           architecture == Seq2SeqArchitecture::kBigBirdPegasus;
  }
  bool sinusoidal_positions() const { return architecture == Seq2SeqArchitecture::kPegasus; }
  bool embedding_layer_norm() const {
    return architecture == Seq2SeqArchitecture::kBart || architecture == Seq2SeqArchitecture::kLed;
  }
  // The pre-LN models' final norm after the last layer, under encoder. and
  // decoder.: Pegasus' layer_norm; BigBird-Pegasus calls it
  // layernorm_embedding though it comes last.
  std::string final_norm_name() const {
    return architecture == Seq2SeqArchitecture::kBigBirdPegasus ? "layernorm_embedding"
                                                                : "layer_norm";
  }
  // Row of the position table that holds position 0: BART's learned table
  // starts at row 2 (fairseq legacy), Pegasus' sinusoidal one at row 0.
  int64_t position_offset() const { return architecture == Seq2SeqArchitecture::kBart ? 2 : 0; }
};

// Parses and validates a config.json object (rules above) of model_type
// "bart", "pegasus", "led" or "bigbird_pegasus"; `source_name` prefixes
// every error message.
absl::StatusOr<BartConfig> ParseBartConfig(const nlohmann::json& config,
                                           std::string_view source_name);

// Reads `path` and parses it; NOT_FOUND when the file is missing,
// INVALID_ARGUMENT when it is not JSON or fails validation.
absl::StatusOr<BartConfig> LoadBartConfig(const std::string& path);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_CHECKPOINT_BART_CONFIG_H_
