#include "model/checkpoint/config_field_reader.h"

#include <algorithm>
#include <cmath>
#include <optional>
#include <vector>

#include "absl/strings/str_format.h"
#include "common/status_macros.h"

namespace docsparse {

using json = nlohmann::json;

absl::StatusOr<BigBirdFields> ReadBigBirdFields(FieldReader& reader, bool use_bias_default) {
  BigBirdFields bigbird;
  if (const json* type = reader.Find("attention_type")) {
    ASSIGN_OR_RETURN(const std::string kind, reader.String("attention_type", *type));
    if (kind != "block_sparse" && kind != "original_full") {
      return reader.Error("attention_type",
                          absl::StrFormat("unsupported value \"%s\" (supported: block_sparse, "
                                          "original_full)",
                                          kind));
    }
    bigbird.block_sparse = kind == "block_sparse";
  }
  ASSIGN_OR_RETURN(bigbird.block_size, reader.OptionalInt("block_size", 64, 1, 1 << 16));
  ASSIGN_OR_RETURN(bigbird.num_random_blocks,
                   reader.OptionalInt("num_random_blocks", 3, 0, 1 << 10));
  ASSIGN_OR_RETURN(bigbird.use_bias, reader.OptionalBool("use_bias", use_bias_default));
  return bigbird;
}

absl::StatusOr<int> ReadUniformAttentionWindow(FieldReader& reader, int layers) {
  constexpr std::string_view kKey = "attention_window";
  ASSIGN_OR_RETURN(const json* window, reader.Require(kKey));
  std::vector<int> windows;
  if (window->is_array()) {
    if (static_cast<int>(window->size()) != layers) {
      return reader.Error(kKey,
                          absl::StrFormat("%d entries for %d layers", window->size(), layers));
    }
    for (const json& entry : *window) {
      ASSIGN_OR_RETURN(const int w, reader.Int(kKey, entry, 2, 1 << 20));
      windows.push_back(w);
    }
  } else {
    ASSIGN_OR_RETURN(const int w, reader.Int(kKey, *window, 2, 1 << 20));
    windows.assign(static_cast<size_t>(layers), w);
  }
  for (const int w : windows) {
    if (w % 2 != 0) {
      return reader.Error(
          kKey,
          absl::StrFormat("%d is odd; Longformer needs an even window (w/2 on each side)", w));
    }
    if (w != windows.front()) {
      return reader.Error(kKey, absl::StrFormat("layers differ (%d and %d); one window for every "
                                                "layer is supported",
                                                windows.front(), w));
    }
  }
  return windows.front();
}

std::string_view JsonTypeName(const json& value) {
  if (value.is_number_integer()) return "integer";
  if (value.is_number_float()) return "number";
  return value.type_name();
}

absl::Status FieldReader::Error(std::string_view key, std::string_view what) const {
  return absl::InvalidArgumentError(absl::StrFormat("%s: field '%s': %s", source_, key, what));
}

const json* FieldReader::Find(std::string_view key) {
  consumed_.insert(std::string(key));
  const auto it = object_.find(key);
  return it == object_.end() ? nullptr : &*it;
}

absl::StatusOr<const json*> FieldReader::Require(std::string_view key) {
  const json* value = Find(key);
  if (value == nullptr) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: missing field '%s'", source_, key));
  }
  return value;
}

absl::StatusOr<int> FieldReader::Int(std::string_view key, const json& value, int min,
                                     int max) const {
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

absl::StatusOr<int> FieldReader::RequireInt(std::string_view key, int min, int max) {
  ASSIGN_OR_RETURN(const json* value, Require(key));
  return Int(key, *value, min, max);
}

absl::StatusOr<int> FieldReader::OptionalInt(std::string_view key, int fallback, int min, int max) {
  const json* value = Find(key);
  if (value == nullptr) return fallback;
  return Int(key, *value, min, max);
}

absl::StatusOr<std::string> FieldReader::String(std::string_view key, const json& value) const {
  if (!value.is_string()) {
    return Error(key, absl::StrFormat("expected string, got %s", JsonTypeName(value)));
  }
  return value.get<std::string>();
}

absl::StatusOr<std::string> FieldReader::RequireString(std::string_view key) {
  ASSIGN_OR_RETURN(const json* value, Require(key));
  return String(key, *value);
}

absl::StatusOr<bool> FieldReader::Bool(std::string_view key, const json& value) const {
  if (!value.is_boolean()) {
    return Error(key, absl::StrFormat("expected boolean, got %s", JsonTypeName(value)));
  }
  return value.get<bool>();
}

absl::StatusOr<bool> FieldReader::RequireBool(std::string_view key) {
  ASSIGN_OR_RETURN(const json* value, Require(key));
  return Bool(key, *value);
}

absl::StatusOr<bool> FieldReader::OptionalBool(std::string_view key, bool fallback) {
  const json* value = Find(key);
  if (value == nullptr) return fallback;
  return Bool(key, *value);
}

absl::StatusOr<double> FieldReader::RequirePositiveNumber(std::string_view key) {
  ASSIGN_OR_RETURN(const json* value, Require(key));
  if (!value->is_number()) {
    return Error(key, absl::StrFormat("expected number, got %s", JsonTypeName(*value)));
  }
  const double v = value->get<double>();
  if (!(v > 0) || !std::isfinite(v)) {
    return Error(key, absl::StrFormat("%s must be a positive number", value->dump()));
  }
  return v;
}

absl::Status FieldReader::OnlyNeutralBool(std::string_view key, bool neutral,
                                          std::string_view why) {
  const json* value = Find(key);
  if (value == nullptr) return absl::OkStatus();
  ASSIGN_OR_RETURN(const bool given, Bool(key, *value));
  if (given != neutral) {
    return Error(key, absl::StrFormat("%s is not supported (%s)", value->dump(), why));
  }
  return absl::OkStatus();
}

absl::Status FieldReader::OnlyNeutral(std::string_view key, const json& neutral,
                                      std::string_view why) {
  return OnlyAmong(key, {neutral}, why);
}

absl::Status FieldReader::OnlyAmong(std::string_view key, const std::vector<json>& allowed,
                                    std::string_view why) {
  const json* value = Find(key);
  if (value == nullptr || std::find(allowed.begin(), allowed.end(), *value) != allowed.end()) {
    return absl::OkStatus();
  }
  return Error(key, absl::StrFormat("%s is not supported (%s)", value->dump(), why));
}

absl::Status FieldReader::CheckNoUnknownKeys(std::string_view model_type) const {
  for (const auto& [key, value] : object_.items()) {
    const bool harmless =
        std::find(harmless_keys_.begin(), harmless_keys_.end(), key) != harmless_keys_.end();
    if (consumed_.count(key) == 0 && !harmless) {
      return absl::InvalidArgumentError(
          absl::StrFormat("%s: unknown field '%s' for model_type %s", source_, key, model_type));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<LsgConfig> ReadLsgFields(FieldReader& reader) {
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
  // LSG*Config.__init__: mask_first_token needs pool_with_global.
  if (lsg.mask_first_token) lsg.pool_with_global = true;
  RETURN_IF_ERROR(ValidateLsgConfig(lsg, reader.source()));
  reader.Find("auto_map");  // the reference's remote-code map; we have our own code
  return lsg;
}

}  // namespace docsparse
