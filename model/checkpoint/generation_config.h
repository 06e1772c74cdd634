// How a summarizer decodes: Hugging Face's GenerationConfig, as
// transformers 4.36 `model.generate()` resolves it for BART and Pegasus,
// plus the per-request overrides of proto GenerationParams.
//
// Where the values come from (LoadGenerationConfig), as in transformers:
//   - `generation_config.json` when the checkpoint has one: its fields, and
//     GenerationConfig's class defaults for the rest (max_length 20,
//     num_beams 1, no token ids, ...). config.json is not consulted, except
//     when the file says "_from_model_config": true: such a file was written
//     from config.json, and generate() re-derives it from config.json.
//   - Otherwise config.json (GenerationConfig.from_model_config): the same
//     fields read from the model config, with the model class's defaults for
//     missing token ids (BartConfig: pad 1, bos 0, eos 2,
//     decoder_start 2, forced_eos 2; PegasusConfig: pad 0, eos 1,
//     decoder_start 0, forced_eos 1) and BART's legacy
//     `force_bos_token_to_be_generated` (forced_bos := bos).
// Fields read: max_length, max_new_tokens, min_length, num_beams,
// num_return_sequences, length_penalty, early_stopping (true, false or
// "never"), no_repeat_ngram_size, forced_bos_token_id, forced_eos_token_id
// (id or list), decoder_start_token_id, bos_token_id, eos_token_id (id or
// list), pad_token_id. Fields that would make HF decode differently from
// what we implement (do_sample true, num_beam_groups > 1, repetition
// penalties, bad words, suppressed or forced decoder tokens, min_new_tokens,
// renormalize_logits, ...) are refused unless at their neutral value;
// sampling-only knobs (temperature, top_k, top_p, ...) are ignored, as
// generate() ignores them when do_sample is false. Other keys are ignored.
//
// Resolution as in generate(): a missing decoder_start_token_id falls back to
// bos_token_id (neither set is an error); a missing pad_token_id falls back
// to the first eos id; max_new_tokens, when set, wins over max_length.
//
// Bounds (ours; transformers has none): num_beams in [1, 16] (beam search
// cost grows linearly and 16 is past where summaries stop improving);
// num_return_sequences in [1, num_beams]; max_length in [2, 4096] and at most
// the decoder's own limit (the caller passes it); max_new_tokens in
// [1, limit - 1]; min_length in [0, 4096]; length_penalty finite, in
// [-10, 10]; no_repeat_ngram_size in [0, 64]. A model's min_length above the
// effective max_length is allowed (transformers warns, and ForcedEOS ends the
// text at max_length); a request's is an error.
#ifndef DOCSPARSE_MODEL_CHECKPOINT_GENERATION_CONFIG_H_
#define DOCSPARSE_MODEL_CHECKPOINT_GENERATION_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "nlohmann/json_fwd.hpp"

namespace docsparse {

inline constexpr int kMaxNumBeams = 16;
inline constexpr int kMaxGenerationLength = 4096;
inline constexpr int kMaxNoRepeatNgramSize = 64;
inline constexpr double kMaxLengthPenaltyMagnitude = 10.0;

// HF's `early_stopping`: when beam search stops for a sequence.
enum class EarlyStopping {
  kHeuristic,          // false: stop when no beam can beat the worst kept
                       // hypothesis, judged from the current length
  kWhenBeamsFinished,  // true: stop as soon as num_beams hypotheses ended
  kNever,              // "never": the same test, judged from max_length when
                       // length_penalty > 0 (exact; it rarely stops early)
};

struct GenerationConfig {
  // Total decoder length, the decoder start token included (HF semantics:
  // at most max_length - 1 generated tokens).
  int max_length = 20;
  // Generated tokens, start token excluded; when set it replaces max_length
  // (as max_new_tokens + 1).
  std::optional<int> max_new_tokens;
  // Decoder length (start token included) below which eos is banned.
  int min_length = 0;
  int num_beams = 1;
  int num_return_sequences = 1;  // beam search: hypotheses returned
  double length_penalty = 1.0;   // beam scores are sum_logprobs / len^this
  EarlyStopping early_stopping = EarlyStopping::kHeuristic;
  int no_repeat_ngram_size = 0;  // 0: off
  std::optional<int64_t> forced_bos_token_id;
  std::vector<int64_t> forced_eos_token_ids;  // empty: off
  int64_t decoder_start_token_id = 0;
  std::optional<int64_t> bos_token_id;
  std::vector<int64_t> eos_token_ids;  // empty: text ends only at max length
  std::optional<int64_t> pad_token_id;

  // The length generation stops at (start token included).
  int max_total_length() const { return max_new_tokens ? *max_new_tokens + 1 : max_length; }
};

// Per-request overrides, mirroring proto GenerationParams; unset fields keep
// the model's value. A request's max_length clears the model's
// max_new_tokens (the request wins over the model; transformers would let a
// configured max_new_tokens win); a request setting both gets max_new_tokens.
struct GenerationOverrides {
  std::optional<int> num_beams;
  std::optional<int> max_length;
  std::optional<int> min_length;
  std::optional<double> length_penalty;  // see DecimalFloatToDouble
  std::optional<bool> early_stopping;
  std::optional<int> no_repeat_ngram_size;
  std::optional<int> max_new_tokens;
};

// Builds the model's GenerationConfig from its config.json object and, when
// the checkpoint has one, its generation_config.json object (may be null).
// Errors are INVALID_ARGUMENT naming the file and field:
//   "generation_config.json: field 'num_beams': 0 is out of range [1, 16]".
absl::StatusOr<GenerationConfig> ParseGenerationConfig(const nlohmann::json& model_config,
                                                       const nlohmann::json* generation_config);

// Reads `model_dir`/config.json (required) and `model_dir`/generation_config.json
// (optional) and parses them as above.
absl::StatusOr<GenerationConfig> LoadGenerationConfig(const std::string& model_dir);

// The model's config with a request's overrides applied and checked.
// `max_length_limit`: the largest total length (start token included) the
// decoder can produce, at most kMaxGenerationLength. Errors name the
// request field: "generation.num_beams: must be in [1, 16]". Calling it with
// no overrides at model load checks the model's own values against the limit.
absl::StatusOr<GenerationConfig> ApplyGenerationOverrides(const GenerationConfig& base,
                                                          const GenerationOverrides& overrides,
                                                          int max_length_limit);

// A proto float as the decimal the client most likely wrote (0.6f -> 0.6,
// not 0.60000002384...), so that length_penalty 0.6 scores exactly as
// transformers' Python float 0.6 does.
double DecimalFloatToDouble(float value);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_CHECKPOINT_GENERATION_CONFIG_H_
