// Reading a Hugging Face config.json strictly: typed fields with ranges,
// errors naming the file and the field, and every key either read or known
// to be harmless, so that a setting we do not implement is refused instead
// of silently ignored. Shared by the encoder (model/checkpoint/hf_config.h) and
// encoder-decoder (model/checkpoint/bart_config.h) parsers, which differ only in the
// fields they read and the keys they call harmless.
#ifndef DOCSPARSE_MODEL_CHECKPOINT_CONFIG_FIELD_READER_H_
#define DOCSPARSE_MODEL_CHECKPOINT_CONFIG_FIELD_READER_H_

#include <functional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "model/checkpoint/hf_config.h"
#include "model/checkpoint/lsg_config.h"
#include "nlohmann/json.hpp"

namespace docsparse {

// Reads fields of one JSON object, remembering which keys it consumed so
// that whatever is left over can be reported as unknown.
class FieldReader {
 public:
  // `source` names the file in errors; `harmless_keys` may be left unread.
  // Both must outlive the reader.
  FieldReader(const nlohmann::json& object, std::string_view source,
              absl::Span<const std::string_view> harmless_keys)
      : object_(object), source_(source), harmless_keys_(harmless_keys) {}

  std::string_view source() const { return source_; }
  absl::Status Error(std::string_view key, std::string_view what) const;

  // The value of `key` (null when absent); the key counts as read.
  const nlohmann::json* Find(std::string_view key);
  absl::StatusOr<const nlohmann::json*> Require(std::string_view key);

  absl::StatusOr<int> Int(std::string_view key, const nlohmann::json& value, int min,
                          int max) const;
  absl::StatusOr<int> RequireInt(std::string_view key, int min, int max);
  absl::StatusOr<int> OptionalInt(std::string_view key, int fallback, int min, int max);
  absl::StatusOr<std::string> String(std::string_view key, const nlohmann::json& value) const;
  absl::StatusOr<std::string> RequireString(std::string_view key);
  absl::StatusOr<bool> Bool(std::string_view key, const nlohmann::json& value) const;
  absl::StatusOr<bool> RequireBool(std::string_view key);
  absl::StatusOr<bool> OptionalBool(std::string_view key, bool fallback);
  absl::StatusOr<double> RequirePositiveNumber(std::string_view key);

  // A bool that only its `neutral` value is supported for (absent = neutral).
  absl::Status OnlyNeutralBool(std::string_view key, bool neutral, std::string_view why);
  // A key whose only supported value is the model's own (absent = that value).
  absl::Status OnlyNeutral(std::string_view key, const nlohmann::json& neutral,
                           std::string_view why);
  absl::Status OnlyAmong(std::string_view key, const std::vector<nlohmann::json>& allowed,
                         std::string_view why);

  // The first key neither read nor harmless, as an error.
  absl::Status CheckNoUnknownKeys(std::string_view model_type) const;

 private:
  const nlohmann::json& object_;
  std::string_view source_;
  absl::Span<const std::string_view> harmless_keys_;
  std::set<std::string, std::less<>> consumed_;
};

// The fields the reference's LSG*Config classes add (block_size, …,
// base_model_prefix "lsg", auto_map), with their defaults and the
// mask_first_token → pool_with_global fix-up of LSG*Config.__init__,
// validated (model/checkpoint/lsg_config.h). The caller decides whether the config is
// an LSG one.
absl::StatusOr<LsgConfig> ReadLsgFields(FieldReader& reader);

// Longformer's attention_window (Longformer, LED): an even number >= 2, or a
// list of them with one entry per layer (`layers`), all equal: our
// Longformer planner has one window for every layer. Errors name the field.
absl::StatusOr<int> ReadUniformAttentionWindow(FieldReader& reader, int layers);

// BigBird's attention fields (BigBird, BigBird-Pegasus): attention_type
// ("block_sparse" or "original_full"), block_size, num_random_blocks and
// use_bias, transformers' defaults where absent (use_bias: `use_bias_default`,
// true in BigBirdConfig, false in BigBirdPegasusConfig). rescale_embeddings is
// the encoder's to read. Errors name the field.
absl::StatusOr<BigBirdFields> ReadBigBirdFields(FieldReader& reader, bool use_bias_default);

// "integer", "number", or nlohmann's type name: for "expected X, got Y".
std::string_view JsonTypeName(const nlohmann::json& value);

}  // namespace docsparse

#endif  // DOCSPARSE_MODEL_CHECKPOINT_CONFIG_FIELD_READER_H_
