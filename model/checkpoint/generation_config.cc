#include "model/checkpoint/generation_config.h"

#include <sys/stat.h>

#include <charconv>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"

namespace docsparse {
namespace {

using json = nlohmann::json;

std::string_view JsonTypeName(const json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number_float()) return "number";
  return value.type_name();
}

// Keys that change what transformers generates, accepted only at the value
// that leaves greedy / beam search as implemented here. null is always
// neutral (transformers' "unset").
struct NeutralOnlyKey {
  const char* key;
  const char* neutral;  // JSON text of the one accepted value
};
constexpr NeutralOnlyKey kNeutralOnlyKeys[] = {
    {"do_sample", "false"},
    {"num_beam_groups", "1"},
    {"diversity_penalty", "0.0"},
    {"repetition_penalty", "1.0"},
    {"encoder_repetition_penalty", "1.0"},
    {"encoder_no_repeat_ngram_size", "0"},
    {"bad_words_ids", "null"},
    {"force_words_ids", "null"},
    {"constraints", "null"},
    {"renormalize_logits", "false"},
    {"remove_invalid_values", "false"},
    {"exponential_decay_length_penalty", "null"},
    {"suppress_tokens", "null"},
    {"begin_suppress_tokens", "null"},
    {"forced_decoder_ids", "null"},
    {"sequence_bias", "null"},
    {"guidance_scale", "1.0"},
    {"min_new_tokens", "0"},
    {"penalty_alpha", "0.0"},
    {"max_time", "null"},
};

// Model-class defaults that from_model_config sees when config.json leaves
// a token id out (the class __init__ defaults).
struct ClassTokenDefaults {
  std::optional<int64_t> pad, bos, eos, decoder_start, forced_eos;
};

ClassTokenDefaults TokenDefaultsFor(std::string_view model_type) {
  if (model_type == "bart") return {1, 0, 2, 2, 2};
  if (model_type == "pegasus") return {0, std::nullopt, 1, 0, 1};
  return {std::nullopt, std::nullopt, std::nullopt, std::nullopt, std::nullopt};
}

class GenerationFieldReader {
 public:
  GenerationFieldReader(const json& object, std::string_view source, std::optional<int64_t> vocab)
      : object_(object), source_(source), vocab_size_(vocab) {}

  absl::Status Error(std::string_view key, std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrFormat("%s: field '%s': %s", source_, key, what));
  }

  // The key's value; nullptr when absent.
  const json* Find(std::string_view key) const {
    const auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }

  absl::StatusOr<int> Int(std::string_view key, int fallback, int min, int max) const {
    const json* value = Find(key);
    if (value == nullptr) return fallback;
    return IntValue(key, *value, min, max);
  }

  absl::StatusOr<std::optional<int>> OptionalInt(std::string_view key, std::optional<int> fallback,
                                                 int min, int max) const {
    const json* value = Find(key);
    if (value == nullptr) return fallback;
    if (value->is_null()) return std::optional<int>();
    ASSIGN_OR_RETURN(const int parsed, IntValue(key, *value, min, max));
    return std::optional<int>(parsed);
  }

  absl::StatusOr<double> Number(std::string_view key, double fallback, double min,
                                double max) const {
    const json* value = Find(key);
    if (value == nullptr) return fallback;
    if (!value->is_number()) {
      return Error(key, absl::StrFormat("expected number, got %s", JsonTypeName(*value)));
    }
    const double parsed = value->get<double>();
    if (!std::isfinite(parsed) || parsed < min || parsed > max) {
      return Error(key, absl::StrFormat("%s is out of range [%g, %g]", value->dump(), min, max));
    }
    return parsed;
  }

  absl::StatusOr<EarlyStopping> EarlyStoppingValue(std::string_view key) const {
    const json* value = Find(key);
    if (value == nullptr) return EarlyStopping::kHeuristic;
    if (value->is_boolean()) {
      return value->get<bool>() ? EarlyStopping::kWhenBeamsFinished : EarlyStopping::kHeuristic;
    }
    if (value->is_string() && value->get<std::string>() == "never") return EarlyStopping::kNever;
    return Error(key, absl::StrFormat("expected true, false or \"never\", got %s", value->dump()));
  }

  // A token id (absent: `fallback`; null: none).
  absl::StatusOr<std::optional<int64_t>> TokenId(std::string_view key,
                                                 std::optional<int64_t> fallback) const {
    const json* value = Find(key);
    if (value == nullptr) return fallback;
    if (value->is_null()) return std::optional<int64_t>();
    ASSIGN_OR_RETURN(const int64_t id, TokenIdValue(key, *value));
    return std::optional<int64_t>(id);
  }

  // An id or a list of ids (absent: `fallback`; null or []: none).
  absl::StatusOr<std::vector<int64_t>> TokenIds(std::string_view key,
                                                std::optional<int64_t> fallback) const {
    const json* value = Find(key);
    std::vector<int64_t> ids;
    if (value == nullptr) {
      if (fallback) ids.push_back(*fallback);
      return ids;
    }
    if (value->is_null()) return ids;
    if (value->is_array()) {
      for (const json& element : *value) {
        ASSIGN_OR_RETURN(const int64_t id, TokenIdValue(key, element));
        ids.push_back(id);
      }
      return ids;
    }
    ASSIGN_OR_RETURN(const int64_t id, TokenIdValue(key, *value));
    ids.push_back(id);
    return ids;
  }

  absl::Status CheckNeutralOnlyKeys() const {
    for (const NeutralOnlyKey& entry : kNeutralOnlyKeys) {
      const json* value = Find(entry.key);
      if (value == nullptr || value->is_null()) continue;
      const json neutral = json::parse(entry.neutral);
      // Empty lists are as unset as null (suppress_tokens: []).
      if (*value == neutral || (value->is_array() && value->empty())) continue;
      return Error(entry.key, absl::StrFormat("unsupported value %s (supported: %s)", value->dump(),
                                              entry.neutral));
    }
    return absl::OkStatus();
  }

 private:
  absl::StatusOr<int> IntValue(std::string_view key, const json& value, int min, int max) const {
    if (!value.is_number_integer()) {
      return Error(key, absl::StrFormat("expected integer, got %s", JsonTypeName(value)));
    }
    const bool in_range = value.is_number_unsigned()
                              ? value.get<uint64_t>() <= static_cast<uint64_t>(max) &&
                                    static_cast<int64_t>(value.get<uint64_t>()) >= min
                              : value.get<int64_t>() >= min && value.get<int64_t>() <= max;
    if (!in_range) {
      return Error(key, absl::StrFormat("%s is out of range [%d, %d]", value.dump(), min, max));
    }
    return static_cast<int>(value.get<int64_t>());
  }

  absl::StatusOr<int64_t> TokenIdValue(std::string_view key, const json& value) const {
    if (!value.is_number_integer()) {
      return Error(key, absl::StrFormat("expected integer token id, got %s", JsonTypeName(value)));
    }
    const bool negative = !value.is_number_unsigned() && value.get<int64_t>() < 0;
    const bool too_large = vocab_size_ && value.is_number_unsigned() &&
                           value.get<uint64_t>() >= static_cast<uint64_t>(*vocab_size_);
    if (negative || too_large) {
      return Error(key, vocab_size_ ? absl::StrFormat("token id %s is out of range [0, %d)",
                                                      value.dump(), *vocab_size_)
                                    : absl::StrFormat("token id %s is negative", value.dump()));
    }
    return value.get<int64_t>();
  }

  const json& object_;
  std::string_view source_;
  std::optional<int64_t> vocab_size_;
};

// Reads the generation fields of one object: generation_config.json with
// GenerationConfig's defaults, or config.json with its class's defaults.
absl::StatusOr<GenerationConfig> ReadGenerationFields(const GenerationFieldReader& reader,
                                                      const ClassTokenDefaults& defaults,
                                                      bool legacy_force_bos) {
  RETURN_IF_ERROR(reader.CheckNeutralOnlyKeys());
  GenerationConfig config;
  ASSIGN_OR_RETURN(config.max_length, reader.Int("max_length", 20, 2, kMaxGenerationLength));
  ASSIGN_OR_RETURN(config.max_new_tokens,
                   reader.OptionalInt("max_new_tokens", std::nullopt, 1, kMaxGenerationLength - 1));
  ASSIGN_OR_RETURN(config.min_length, reader.Int("min_length", 0, 0, kMaxGenerationLength));
  ASSIGN_OR_RETURN(config.num_beams, reader.Int("num_beams", 1, 1, kMaxNumBeams));
  ASSIGN_OR_RETURN(config.num_return_sequences,
                   reader.Int("num_return_sequences", 1, 1, config.num_beams));
  ASSIGN_OR_RETURN(config.length_penalty,
                   reader.Number("length_penalty", 1.0, -kMaxLengthPenaltyMagnitude,
                                 kMaxLengthPenaltyMagnitude));
  ASSIGN_OR_RETURN(config.early_stopping, reader.EarlyStoppingValue("early_stopping"));
  ASSIGN_OR_RETURN(config.no_repeat_ngram_size,
                   reader.Int("no_repeat_ngram_size", 0, 0, kMaxNoRepeatNgramSize));
  ASSIGN_OR_RETURN(config.bos_token_id, reader.TokenId("bos_token_id", defaults.bos));
  ASSIGN_OR_RETURN(config.eos_token_ids, reader.TokenIds("eos_token_id", defaults.eos));
  ASSIGN_OR_RETURN(config.pad_token_id, reader.TokenId("pad_token_id", defaults.pad));
  ASSIGN_OR_RETURN(config.forced_bos_token_id, reader.TokenId("forced_bos_token_id", std::nullopt));
  ASSIGN_OR_RETURN(config.forced_eos_token_ids,
                   reader.TokenIds("forced_eos_token_id", defaults.forced_eos));
  ASSIGN_OR_RETURN(const std::optional<int64_t> decoder_start,
                   reader.TokenId("decoder_start_token_id", defaults.decoder_start));

  // BartConfig.__init__: old BART-CNN configs say force_bos_token_to_be_generated.
  if (legacy_force_bos && !config.forced_bos_token_id) {
    const json* force_bos = reader.Find("force_bos_token_to_be_generated");
    if (force_bos != nullptr && force_bos->is_boolean() && force_bos->get<bool>()) {
      config.forced_bos_token_id = config.bos_token_id;
    }
  }
  // generate(): _get_decoder_start_token_id, and pad := eos for open-ended text.
  if (decoder_start) {
    config.decoder_start_token_id = *decoder_start;
  } else if (config.bos_token_id) {
    config.decoder_start_token_id = *config.bos_token_id;
  } else {
    return reader.Error("decoder_start_token_id",
                        "neither decoder_start_token_id nor bos_token_id is set");
  }
  if (!config.pad_token_id && !config.eos_token_ids.empty()) {
    config.pad_token_id = config.eos_token_ids.front();
  }
  return config;
}

absl::StatusOr<json> ReadJsonFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open"));
  try {
    return json::parse(in);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON: ", e.what()));
  }
}

bool FileExists(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0;
}

absl::Status RangeError(std::string_view field, int64_t value, int64_t min, int64_t max) {
  return absl::InvalidArgumentError(
      absl::StrFormat("generation.%s: must be in [%d, %d], got %d", field, min, max, value));
}

}  // namespace

absl::StatusOr<GenerationConfig> ParseGenerationConfig(const json& model_config,
                                                       const json* generation_config) {
  if (!model_config.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("config.json: expected a JSON object, got %s", JsonTypeName(model_config)));
  }
  std::optional<int64_t> vocab_size;
  if (const auto it = model_config.find("vocab_size");
      it != model_config.end() && it->is_number_integer() && it->get<int64_t>() > 0) {
    vocab_size = it->get<int64_t>();
  }
  std::string model_type;
  if (const auto it = model_config.find("model_type");
      it != model_config.end() && it->is_string()) {
    model_type = it->get<std::string>();
  }

  if (generation_config != nullptr) {
    if (!generation_config->is_object()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("generation_config.json: expected a JSON object, got %s",
                          JsonTypeName(*generation_config)));
    }
    // generate() re-derives an unmodified from-model-config generation config
    // from config.json, so config.json is what decides.
    const auto from_model = generation_config->find("_from_model_config");
    const bool derived = from_model != generation_config->end() && from_model->is_boolean() &&
                         from_model->get<bool>();
    if (!derived) {
      const GenerationFieldReader reader(*generation_config, "generation_config.json", vocab_size);
      return ReadGenerationFields(reader, ClassTokenDefaults{}, /*legacy_force_bos=*/false);
    }
  }
  const GenerationFieldReader reader(model_config, "config.json", vocab_size);
  return ReadGenerationFields(reader, TokenDefaultsFor(model_type), model_type == "bart");
}

absl::StatusOr<GenerationConfig> LoadGenerationConfig(const std::string& model_dir) {
  const std::string config_path = absl::StrCat(model_dir, "/config.json");
  if (!FileExists(config_path))
    return absl::NotFoundError(absl::StrCat(config_path, ": not found"));
  ASSIGN_OR_RETURN(const json model_config, ReadJsonFile(config_path));
  const std::string generation_path = absl::StrCat(model_dir, "/generation_config.json");
  if (!FileExists(generation_path)) return ParseGenerationConfig(model_config, nullptr);
  ASSIGN_OR_RETURN(const json generation_config, ReadJsonFile(generation_path));
  return ParseGenerationConfig(model_config, &generation_config);
}

absl::StatusOr<GenerationConfig> ApplyGenerationOverrides(const GenerationConfig& base,
                                                          const GenerationOverrides& overrides,
                                                          int max_length_limit) {
  if (max_length_limit < 2) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_length_limit %d leaves no room to generate", max_length_limit));
  }
  const int limit = std::min(max_length_limit, kMaxGenerationLength);
  GenerationConfig config = base;
  if (overrides.num_beams) {
    if (*overrides.num_beams < 1 || *overrides.num_beams > kMaxNumBeams) {
      return RangeError("num_beams", *overrides.num_beams, 1, kMaxNumBeams);
    }
    config.num_beams = *overrides.num_beams;
    if (config.num_return_sequences > config.num_beams) {
      return absl::InvalidArgumentError(absl::StrFormat(
          "generation.num_beams: must be at least the model's num_return_sequences (%d), got %d",
          config.num_return_sequences, config.num_beams));
    }
  }
  if (overrides.max_length) {
    if (*overrides.max_length < 2 || *overrides.max_length > limit) {
      return RangeError("max_length", *overrides.max_length, 2, limit);
    }
    config.max_length = *overrides.max_length;
    config.max_new_tokens.reset();
  }
  if (overrides.max_new_tokens) {
    if (*overrides.max_new_tokens < 1 || *overrides.max_new_tokens > limit - 1) {
      return RangeError("max_new_tokens", *overrides.max_new_tokens, 1, limit - 1);
    }
    config.max_new_tokens = *overrides.max_new_tokens;
  }
  if (config.max_total_length() > limit) {
    // Only the model's own value can get here: name what the request can set.
    return absl::InvalidArgumentError(absl::StrFormat(
        "generation.max_length: the model's default %s (%d) exceeds the decoder's limit of %d "
        "tokens; set generation.max_length or generation.max_new_tokens",
        config.max_new_tokens ? "max_new_tokens" : "max_length",
        config.max_new_tokens ? *config.max_new_tokens : config.max_length, limit));
  }
  if (overrides.min_length) {
    if (*overrides.min_length < 0 || *overrides.min_length > kMaxGenerationLength) {
      return RangeError("min_length", *overrides.min_length, 0, kMaxGenerationLength);
    }
    if (*overrides.min_length > config.max_total_length()) {
      return absl::InvalidArgumentError(
          absl::StrFormat("generation.min_length: must be at most the max_length in effect (%d), "
                          "got %d",
                          config.max_total_length(), *overrides.min_length));
    }
    config.min_length = *overrides.min_length;
  }
  if (overrides.length_penalty) {
    const double penalty = *overrides.length_penalty;
    if (!std::isfinite(penalty) || std::abs(penalty) > kMaxLengthPenaltyMagnitude) {
      return absl::InvalidArgumentError(
          absl::StrFormat("generation.length_penalty: must be in [%g, %g], got %g",
                          -kMaxLengthPenaltyMagnitude, kMaxLengthPenaltyMagnitude, penalty));
    }
    config.length_penalty = penalty;
  }
  if (overrides.early_stopping) {
    config.early_stopping =
        *overrides.early_stopping ? EarlyStopping::kWhenBeamsFinished : EarlyStopping::kHeuristic;
  }
  if (overrides.no_repeat_ngram_size) {
    if (*overrides.no_repeat_ngram_size < 0 ||
        *overrides.no_repeat_ngram_size > kMaxNoRepeatNgramSize) {
      return RangeError("no_repeat_ngram_size", *overrides.no_repeat_ngram_size, 0,
                        kMaxNoRepeatNgramSize);
    }
    config.no_repeat_ngram_size = *overrides.no_repeat_ngram_size;
  }
  return config;
}

double DecimalFloatToDouble(float value) {
  if (!std::isfinite(value)) return static_cast<double>(value);
  // The shortest decimal that reads back as `value`, read as a double.
  char buffer[64];
  const std::to_chars_result written = std::to_chars(buffer, buffer + sizeof(buffer) - 1, value);
  if (written.ec != std::errc()) return static_cast<double>(value);
  *written.ptr = '\0';
  return std::strtod(buffer, nullptr);
}

}  // namespace docsparse
