// Hugging Face `config.json` of a BART checkpoint (model_type "bart"), read
// for its encoder only, plain or LSG (ccdv-ai/convert_checkpoint_to_lsg,
// LSGBartConfig).
//
// Same rules as model/hf_config.h: a config we do not fully understand is
// refused with a message naming the field.
//   - Required (they fix tensor shapes or the math): vocab_size, d_model,
//     encoder_layers, encoder_attention_heads, encoder_ffn_dim,
//     activation_function, max_position_embeddings, pad_token_id,
//     scale_embedding. LayerNorm eps is not a BART config field: 1e-5, as
//     nn.LayerNorm's default in modeling_bart.py.
//   - Decoder fields (decoder_layers, decoder_attention_heads,
//     decoder_ffn_dim, decoder_layerdrop, decoder_start_token_id) are
//     accepted and ignored: the decoder comes with the summarization issue.
//     So are the classification fields (architectures, id2label, label2id,
//     num_labels, problem_type), which only task heads read, and the
//     PretrainedConfig bookkeeping / training / generation keys that do not
//     change the encoder (kHarmlessKeys in the .cc).
//   - Keys of older (fairseq-era) BART configs that modeling_bart.py ignores
//     but that would describe a different model if honoured are accepted only
//     at BART's own value: normalize_before false, add_final_layer_norm false,
//     normalize_embedding true, static_position_embeddings false,
//     extra_pos_embeddings 2, add_bias_logits false; is_encoder_decoder must
//     be true, is_decoder and add_cross_attention false.
//   - LSG: the fields of model/lsg_config.h plus pass_global_tokens_to_decoder
//     (default true), "auto_map" and "base_model_prefix": "lsg"; the
//     reference's fix-up (mask_first_token forces pool_with_global) is applied
//     and ValidateLsgConfig's checks are errors.
//   - Any other key: "config.json: unknown field 'foo' for model_type bart".
#ifndef DOCSPARSE_MODEL_BART_CONFIG_H_
#define DOCSPARSE_MODEL_BART_CONFIG_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/hf_config.h"
#include "model/lsg_config.h"
#include "nlohmann/json_fwd.hpp"

namespace docsparse {

struct BartConfig {
  int vocab_size = 0;
  int hidden_size = 0;        // d_model
  int num_layers = 0;         // encoder_layers
  int num_heads = 0;          // encoder_attention_heads
  int intermediate_size = 0;  // encoder_ffn_dim
  // Rows of the learned position table are max_position_embeddings + 2:
  // BartLearnedPositionalEmbedding numbers positions from 2.
  int max_position_embeddings = 0;
  int pad_token_id = 0;
  bool scale_embedding = false;  // token embeddings times sqrt(d_model)
  double layer_norm_eps = 1e-5;
  Activation activation = Activation::kGelu;

  // Set for an LSG checkpoint.
  std::optional<LsgConfig> lsg;
  // LSG only: the encoder output keeps the global tokens' rows in front
  // ([batch, global + tokens, h]), as LSGBartEncoder returns them for the
  // decoder to cross-attend; pool_with_global then does not apply.
  bool pass_global_tokens_to_decoder = true;

  int head_dim() const { return hidden_size / num_heads; }
};

// Parses and validates a config.json object (rules above); `source_name`
// prefixes every error message.
absl::StatusOr<BartConfig> ParseBartConfig(const nlohmann::json& config,
                                           std::string_view source_name);

// Reads `path` and parses it; NOT_FOUND when the file is missing,
// INVALID_ARGUMENT when it is not JSON or fails validation.
absl::StatusOr<BartConfig> LoadBartConfig(const std::string& path);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_BART_CONFIG_H_
