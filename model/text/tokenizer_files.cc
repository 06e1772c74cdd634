#include "model/text/tokenizer_files.h"

#include <cerrno>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace docsparse {

using Json = nlohmann::json;

absl::StatusOr<std::string> ReadTokenizerFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open (", std::strerror(errno), ")"));
  }
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read error"));
  return text.str();
}

absl::StatusOr<Json> ReadTokenizerJsonObject(const std::string& path) {
  ASSIGN_OR_RETURN(const std::string text, ReadTokenizerFile(path));
  Json root;
  try {
    root = Json::parse(text);
  } catch (const Json::exception& e) {  // Syntax, and numbers out of range.
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON: ", e.what()));
  }
  if (!root.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": top level is not a JSON object"));
  }
  return root;
}

absl::Status JsonFieldReader::Error(const std::string& field, const std::string& what) const {
  return absl::InvalidArgumentError(absl::StrCat(file_, ": ", field, " ", what));
}

const Json* JsonFieldReader::Find(const Json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  const auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

std::string JsonFieldReader::Dotted(const std::string& field, const char* key) {
  return field.empty() ? std::string(key) : absl::StrCat(field, ".", key);
}

absl::Status JsonFieldReader::Read(const Json& obj, const std::string& field, const char* key,
                                   bool* out) const {
  const Json* value = Find(obj, key);
  if (value == nullptr) return absl::OkStatus();
  if (!value->is_boolean()) return Error(Dotted(field, key), "is not a boolean");
  *out = value->get<bool>();
  return absl::OkStatus();
}

absl::Status JsonFieldReader::Read(const Json& obj, const std::string& field, const char* key,
                                   std::string* out) const {
  const Json* value = Find(obj, key);
  if (value == nullptr) return absl::OkStatus();
  if (!value->is_string()) return Error(Dotted(field, key), "is not a string");
  *out = value->get<std::string>();
  return absl::OkStatus();
}

absl::Status JsonFieldReader::Read(const Json& obj, const std::string& field, const char* key,
                                   int64_t* out) const {
  const Json* value = Find(obj, key);
  if (value == nullptr) return absl::OkStatus();
  // is_number_integer() holds for unsigned values above INT64_MAX too: read
  // those as unsigned so they are refused, not wrapped.
  const bool in_range =
      value->is_number_unsigned()
          ? value->get<uint64_t>() <= static_cast<uint64_t>(std::numeric_limits<int32_t>::max())
          : value->is_number_integer() && value->get<int64_t>() >= 0 &&
                value->get<int64_t>() <= std::numeric_limits<int32_t>::max();
  if (!in_range) return Error(Dotted(field, key), "is not an integer in [0, 2^31)");
  *out = value->get<int64_t>();
  return absl::OkStatus();
}

std::optional<std::string> TransformersTokenizerConfig::Token(const std::string& key) const {
  const auto it = tokens.find(key);
  return it == tokens.end() ? std::nullopt : it->second;
}

absl::StatusOr<TransformersTokenizerConfig> ReadTransformersTokenizerConfig(
    const std::string& path) {
  ASSIGN_OR_RETURN(const Json root, ReadTokenizerJsonObject(path));
  const JsonFieldReader reader(path);
  TransformersTokenizerConfig config;
  for (const char* key : {"bos_token", "eos_token", "unk_token", "sep_token", "pad_token",
                          "cls_token", "mask_token", "mask_token_sent"}) {
    const auto it = root.find(key);
    if (it == root.end()) continue;
    if (it->is_null()) {
      config.tokens[key] = std::nullopt;
      continue;
    }
    std::string content;
    if (it->is_object()) {  // An AddedToken as older transformers wrote them.
      if (JsonFieldReader::Find(*it, "content") == nullptr) {
        return reader.Error(JsonFieldReader::Dotted(key, "content"), "is missing");
      }
      RETURN_IF_ERROR(reader.Read(*it, key, "content", &content));
    } else {
      RETURN_IF_ERROR(reader.Read(root, "", key, &content));
    }
    config.tokens[key] = std::move(content);
  }
  RETURN_IF_ERROR(
      reader.Read(root, "", "clean_up_tokenization_spaces", &config.clean_up_tokenization_spaces));
  RETURN_IF_ERROR(reader.Read(
      root, "", "clean_up_tokenization_spaces_for_bpe_even_though_it_will_corrupt_output",
      &config.clean_up_tokenization_spaces_for_bpe));
  if (JsonFieldReader::Find(root, "offset") != nullptr) {
    int64_t offset = 0;
    RETURN_IF_ERROR(reader.Read(root, "", "offset", &offset));
    config.offset = offset;
  }
  return config;
}

void CleanUpTokenizationSpaces(std::string* text) {
  static constexpr std::pair<std::string_view, std::string_view> kRules[] = {
      {" .", "."},     {" ?", "?"},   {" !", "!"},   {" ,", ","},     {" ' ", "'"},
      {" n't", "n't"}, {" 'm", "'m"}, {" 's", "'s"}, {" 've", "'ve"}, {" 're", "'re"}};
  for (const auto& [from, to] : kRules) {
    for (size_t pos = text->find(from); pos != std::string::npos; pos = text->find(from, pos)) {
      text->replace(pos, from.size(), to);
      pos += to.size();
    }
  }
}

}  // namespace docsparse
