// Hugging Face `config.json` for the encoders we serve (BERT, RoBERTa,
// DistilBERT, Longformer, ModernBERT, BigBird), read into one
// architecture-neutral EncoderConfig.
//
// The rule: a config we do not fully understand is refused, with a message
// naming the field, rather than served with a silently different model.
//   - Missing required field:
//       "config.json: missing field 'num_attention_heads'".
//     Required are the fields that fix tensor shapes or the math:
//       bert, roberta: vocab_size, hidden_size, num_hidden_layers,
//         num_attention_heads, intermediate_size, hidden_act,
//         max_position_embeddings, type_vocab_size, layer_norm_eps,
//         pad_token_id (RoBERTa derives position ids from it);
//       modernbert: vocab_size, hidden_size, num_hidden_layers,
//         num_attention_heads, intermediate_size, hidden_activation,
//         max_position_embeddings, norm_eps, pad_token_id; the attention
//         schedule as published (global_attn_every_n_layers, default 3;
//         global_rope_theta / local_rope_theta) or as transformers 5 saves it
//         (layer_types, rope_parameters with rope_type "default");
//       big_bird: BERT's; optional with transformers' defaults:
//         attention_type ("block_sparse" or "original_full"), block_size (64),
//         num_random_blocks (3), use_bias (true), rescale_embeddings (false);
//       longformer: RoBERTa's, and attention_window (an even number >= 2,
//         or a list of them, one per layer; the list must hold one value,
//         since our Longformer planner has one window for every layer);
//       distilbert: vocab_size, dim, n_layers, n_heads, hidden_dim,
//         activation, max_position_embeddings, pad_token_id.
//     Every `save_pretrained` config carries them; we do not substitute
//     Hugging Face class defaults (layer_norm_eps is 1e-12 for BERT but 1e-5 in
//     real RoBERTa checkpoints, so a default would be wrong half the time).
//   - Optional with a default: position_embedding_type ("absolute"; absent from
//     older RoBERTa configs), sinusoidal_pos_embds (false).
//   - Wrong JSON type: "config.json: field 'hidden_size': expected integer, got
//     string".
//   - Unsupported value: "config.json: field 'hidden_act': unsupported value
//     \"swish\" (supported: ...)"; also model_type, position_embedding_type
//     other than "absolute", sinusoidal_pos_embds true, num_heads not dividing
//     the hidden size, out-of-range sizes.
//   - Unknown key: "config.json: unknown field 'foo' for model_type bert",
//     except the generic PretrainedConfig keys that do not change an encoder's
//     forward pass (dropouts, initializer_range, use_cache, torch_dtype,
//     generation defaults, token ids, ...; see kHarmlessKeys in the .cc).
//     A few of those would change the model if set, and are accepted only at
//     their neutral value: is_decoder, add_cross_attention, is_encoder_decoder
//     (false) and pruned_heads (empty).
//   - LSG checkpoints (converted by the reference converter or ours): the LSG
//     fields above, "auto_map" and "base_model_prefix": "lsg". The reference
//     config class's fix-up is applied (mask_first_token forces
//     pool_with_global); an unknown sparsity_type is an error (the reference
//     silently falls back to none); values it asserts on or mis-handles are
//     errors (model/checkpoint/lsg_config.h).
// Extending (BART/Pegasus): add an Architecture, its required and optional
// fields in the .cc; the unknown-key check then covers them.
#ifndef DOCSPARSE_MODEL_CHECKPOINT_HF_CONFIG_H_
#define DOCSPARSE_MODEL_CHECKPOINT_HF_CONFIG_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "model/checkpoint/lsg_config.h"
#include "nlohmann/json_fwd.hpp"

namespace docsparse {

enum class Architecture { kBert, kRoberta, kDistilBert, kLongformer, kModernBert, kBigBird };

// RoBERTa and Longformer number positions from pad_token_id + 1 on real
// tokens (HF create_position_ids_from_input_ids); the others from 0.
bool NumbersPositionsAfterPadding(Architecture architecture);

enum class Activation {
  kGelu,     // exact, erf-based ("gelu")
  kGeluNew,  // tanh approximation ("gelu_new", "gelu_pytorch_tanh",
             // "gelu_fast": the same function, computed differently)
  kRelu,
};

// How Hugging Face turns classification logits into scores.
enum class ProblemType {
  kUnspecified,  // pipelines: sigmoid for one label, softmax for more
  kSingleLabel,  // softmax
  kMultiLabel,   // sigmoid per label
  kRegression,   // raw logits
};

std::string_view ArchitectureName(Architecture architecture);  // "bert", ...
std::string_view ActivationName(Activation activation);        // "gelu", ...

// What a ModernBERT checkpoint (model_type "modernbert") adds to, or takes
// from, the BERT family: pre-LayerNorm layers (none before the first
// attention) and a final norm, rotary positions instead of a position
// table, a GeGLU feed-forward (Wi makes 2 x intermediate: act(input) * gate),
// optional biases, and its attention schedule.
struct ModernBertFields {
  // Sliding layers see |i - j| <= local_attention / 2.
  int local_attention = 128;
  // [num_layers]: full attention (true) or the sliding window.
  std::vector<bool> global_layers;
  double global_rope_theta = 160000;
  double local_rope_theta = 10000;
  bool norm_bias = false;       // the LayerNorms have biases
  bool attention_bias = false;  // Wqkv and Wo have biases
  bool mlp_bias = false;        // Wi and Wo have biases
  // ModernBertForSequenceClassification: the head reads the mean of the
  // tokens ("mean") or the first token ("cls"); dense (+ bias), activation,
  // LayerNorm, then the classifier.
  bool mean_pooling = false;
  bool classifier_bias = false;
  Activation classifier_activation = Activation::kGelu;
};

// What BigBird (model_type "big_bird", transformers' BigBirdModel) adds to
// BERT: the shape of its block-sparse attention. The layers, names and
// embeddings are BERT's; the classification head is RoBERTa's with the
// config's hidden_act in place of tanh.
struct BigBirdFields {
  // attention_type "block_sparse"; "original_full" runs every length dense.
  bool block_sparse = true;
  int block_size = 64;
  int num_random_blocks = 3;
  // Token embeddings times sqrt(hidden_size) before the sum.
  bool rescale_embeddings = false;
  // Query, key and value have biases (use_bias).
  bool use_bias = true;
};

struct EncoderConfig {
  Architecture architecture = Architecture::kBert;
  int vocab_size = 0;
  int hidden_size = 0;
  int num_layers = 0;
  int num_heads = 0;
  int intermediate_size = 0;
  int max_position_embeddings = 0;
  int type_vocab_size = 0;  // 0 for DistilBERT (no token type embeddings)
  int pad_token_id = -1;    // -1 when the config says null
  double layer_norm_eps = 1e-12;
  Activation activation = Activation::kGelu;

  // "architectures" as written, e.g. {"BertForSequenceClassification"}.
  std::vector<std::string> architectures;
  // Label names ordered by id (id2label keys must be exactly 0..n-1); empty
  // when the config has none. When only num_labels is given, "LABEL_<i>" as
  // Hugging Face names them.
  std::vector<std::string> id2label;
  // Some entry of `architectures` ends in "ForSequenceClassification", so the
  // checkpoint carries a classifier head over id2label.
  bool has_classification_head = false;
  ProblemType problem_type = ProblemType::kUnspecified;

  // Set for an LSG checkpoint (config.json carries the reference's LSG
  // fields: block_size, sparse_block_size, sparsity_factor, sparsity_type,
  // num_global_tokens, adaptive, mask_first_token, pool_with_global,
  // lsh_num_pre_rounds; absent ones take the reference's defaults).
  std::optional<LsgConfig> lsg;

  // Longformer: every layer's attention window w (query i sees keys
  // |i - j| <= w/2, plus the global tokens); 0 for the other architectures.
  int attention_window = 0;

  // Set for ModernBERT.
  std::optional<ModernBertFields> modernbert;

  // Set for BigBird.
  std::optional<BigBirdFields> bigbird;

  int head_dim() const { return hidden_size / num_heads; }
};

// Parses and validates a config.json object (rules above). `source_name`
// (usually the file's path) prefixes every error message.
absl::StatusOr<EncoderConfig> ParseEncoderConfig(const nlohmann::json& config,
                                                 std::string_view source_name);

// Reads `path` and parses it; NOT_FOUND when the file is missing,
// INVALID_ARGUMENT when it is not JSON or fails validation.
absl::StatusOr<EncoderConfig> LoadEncoderConfig(const std::string& path);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_CHECKPOINT_HF_CONFIG_H_
