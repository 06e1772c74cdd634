#include "server/http_json.h"

#include <google/protobuf/descriptor.h>
#include <google/protobuf/util/json_util.h>

#include <cctype>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace docsparse::http {
namespace {

using google::protobuf::FieldDescriptor;

std::string TypeName(const Json& value) { return value.type_name(); }

// The proto's JSON mapping writes 64-bit integers as strings; a JSON client
// wants numbers. Rewrites them, following the message's descriptor.
void Int64AsNumbers(const google::protobuf::Descriptor& descriptor, Json& json) {
  for (int i = 0; i < descriptor.field_count(); ++i) {
    const FieldDescriptor& field = *descriptor.field(i);
    const auto it = json.find(field.name());
    if (it == json.end()) continue;
    const auto fix = [&field](Json& value) {
      if (field.cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
        if (value.is_object()) Int64AsNumbers(*field.message_type(), value);
        return;
      }
      if (!value.is_string()) return;
      const std::string text = value.get<std::string>();
      if (field.cpp_type() == FieldDescriptor::CPPTYPE_INT64) {
        int64_t number = 0;
        if (absl::SimpleAtoi(text, &number)) value = number;
      } else if (field.cpp_type() == FieldDescriptor::CPPTYPE_UINT64) {
        uint64_t number = 0;
        if (absl::SimpleAtoi(text, &number)) value = number;
      }
    };
    if (it->is_array()) {
      for (Json& element : *it) fix(element);
    } else {
      fix(*it);
    }
  }
}

absl::StatusOr<v1::AttentionKind> ReadAttention(const Json& value) {
  if (!value.is_string()) {
    return FieldError("budget.attention", absl::StrCat("must be a string, not ", TypeName(value)));
  }
  const std::string text = value.get<std::string>();
  v1::AttentionKind kind = v1::ATTENTION_KIND_UNSPECIFIED;
  if (v1::AttentionKind_Parse(text, &kind)) return kind;
  if (v1::AttentionKind_Parse("ATTENTION_KIND_" + absl::AsciiStrToUpper(text), &kind)) {
    return kind;
  }
  std::vector<std::string> names;
  for (int i = v1::AttentionKind_MIN + 1; i <= v1::AttentionKind_MAX; ++i) {
    if (v1::AttentionKind_IsValid(i)) names.push_back(AttentionName(v1::AttentionKind(i)));
  }
  return FieldError("budget.attention",
                    absl::StrCat(Quoted(text), " is not one of ", absl::StrJoin(names, ", ")));
}

absl::StatusOr<v1::SparsityBudget> ReadBudget(const Json& json) {
  v1::SparsityBudget budget;
  if (json.is_null()) return budget;
  if (!json.is_object()) {
    return FieldError("budget", absl::StrCat("must be an object, not ", TypeName(json)));
  }
  int caps = 0;
  for (const auto& [key, value] : json.items()) {
    const std::string field = "budget." + key;
    if (key == "max_density" || key == "max_attention_gflops" || key == "edge_regularization") {
      if (value.is_null()) continue;
      if (!value.is_number()) {
        return FieldError(field, absl::StrCat("must be a number, not ", TypeName(value)));
      }
      ++caps;
      const double number = value.get<double>();
      if (key == "max_density") budget.set_max_density(number);
      if (key == "max_attention_gflops") budget.set_max_attention_gflops(number);
      if (key == "edge_regularization") budget.set_edge_regularization(number);
    } else if (key == "attention") {
      if (value.is_null()) continue;
      absl::StatusOr<v1::AttentionKind> kind = ReadAttention(value);
      if (!kind.ok()) return kind.status();
      budget.set_attention(*kind);
    } else if (key == "seed") {
      if (value.is_null()) continue;
      if (!value.is_number_unsigned()) {
        return FieldError(field, "must be an integer in [0, 2^64)");
      }
      budget.set_seed(value.get<uint64_t>());
    } else if (key == "strict") {
      if (value.is_null()) continue;
      if (!value.is_boolean()) {
        return FieldError(field, absl::StrCat("must be a boolean, not ", TypeName(value)));
      }
      budget.set_strict(value.get<bool>());
    } else {
      // The key is the client's: quoted, never part of the field name.
      return FieldError("budget", absl::StrCat("unknown field ", Quoted(key),
                                               " (known: max_density, max_attention_gflops, "
                                               "edge_regularization, attention, seed, strict)"));
    }
  }
  if (caps > 1) {
    return FieldError("budget",
                      "at most one of max_density, max_attention_gflops and "
                      "edge_regularization");
  }
  return budget;
}

}  // namespace

std::string Quoted(absl::string_view text) {
  return Json(std::string(text)).dump(-1, ' ', false, Json::error_handler_t::replace);
}

absl::Status FieldError(absl::string_view field, absl::string_view problem) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", problem));
}

absl::StatusOr<Json> ParseBody(const std::string& body) {
  Json json = Json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return FieldError("body", "is not valid JSON");
  if (!json.is_object()) {
    return FieldError("body", absl::StrCat("must be a JSON object, not ", TypeName(json)));
  }
  return json;
}

absl::StatusOr<std::vector<std::string>> ReadTexts(const Json& body, const char* field,
                                                   size_t max_inputs) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null()) return FieldError(field, "is required");
  if (it->is_string()) return std::vector<std::string>{it->get<std::string>()};
  if (!it->is_array()) {
    return FieldError(field,
                      absl::StrCat("must be a string or an array of strings, not ", TypeName(*it)));
  }
  if (it->empty()) return FieldError(field, "must not be empty");
  if (it->size() > max_inputs) {
    return FieldError(
        field, absl::StrCat("has ", it->size(), " inputs; at most ", max_inputs, " per request"));
  }
  std::vector<std::string> texts;
  for (size_t i = 0; i < it->size(); ++i) {
    const Json& element = (*it)[i];
    if (!element.is_string()) {
      return FieldError(absl::StrCat(field, "[", i, "]"),
                        absl::StrCat("must be a string, not ", TypeName(element)));
    }
    texts.push_back(element.get<std::string>());
  }
  return texts;
}

absl::StatusOr<std::optional<bool>> ReadBool(const Json& body, const char* field) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null()) return std::optional<bool>();
  if (!it->is_boolean()) {
    return FieldError(field, absl::StrCat("must be a boolean, not ", TypeName(*it)));
  }
  return std::optional<bool>(it->get<bool>());
}

absl::StatusOr<std::optional<double>> ReadNumber(const Json& body, const char* field) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null()) return std::optional<double>();
  if (!it->is_number()) {
    return FieldError(field, absl::StrCat("must be a number, not ", TypeName(*it)));
  }
  return std::optional<double>(it->get<double>());
}

absl::StatusOr<std::optional<int64_t>> ReadInteger(const Json& body, const char* field) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null()) return std::optional<int64_t>();
  if (it->is_number_unsigned() &&
      it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int32_t>::max())) {
    return FieldError(field, "is too large");
  }
  if (!it->is_number_integer()) {
    return FieldError(field, absl::StrCat("must be an integer, not ", TypeName(*it)));
  }
  const int64_t value = it->get<int64_t>();
  if (value < std::numeric_limits<int32_t>::min()) return FieldError(field, "is too small");
  return std::optional<int64_t>(value);
}

absl::StatusOr<std::optional<std::string>> ReadString(const Json& body, const char* field) {
  const auto it = body.find(field);
  if (it == body.end() || it->is_null()) return std::optional<std::string>();
  if (!it->is_string()) {
    return FieldError(field, absl::StrCat("must be a string, not ", TypeName(*it)));
  }
  return std::optional<std::string>(it->get<std::string>());
}

absl::StatusOr<CommonFields> ReadCommon(const Json& body) {
  CommonFields common;
  absl::StatusOr<std::optional<std::string>> model = ReadString(body, "model");
  if (!model.ok()) return model.status();
  common.model = model->value_or("");
  if (const auto it = body.find("budget"); it != body.end()) {
    absl::StatusOr<v1::SparsityBudget> budget = ReadBudget(*it);
    if (!budget.ok()) return budget.status();
    common.budget = *std::move(budget);
  }
  absl::StatusOr<std::optional<bool>> mask_map = ReadBool(body, "return_mask_map");
  if (!mask_map.ok()) return mask_map.status();
  common.options.set_return_mask_map(mask_map->value_or(false));
  absl::StatusOr<std::optional<bool>> truncate = ReadBool(body, "truncate");
  if (!truncate.ok()) return truncate.status();
  if (truncate->value_or(false)) common.options.set_overflow(v1::OVERFLOW_TRUNCATE);
  absl::StatusOr<std::optional<std::string>> overflow = ReadString(body, "overflow");
  if (!overflow.ok()) return overflow.status();
  if (overflow->has_value()) {
    v1::Overflow value = v1::OVERFLOW_UNSPECIFIED;
    if (!v1::Overflow_Parse("OVERFLOW_" + absl::AsciiStrToUpper(**overflow), &value) ||
        value == v1::OVERFLOW_UNSPECIFIED) {
      return FieldError("overflow",
                        absl::StrCat(Quoted(**overflow), " is not one of reject, truncate, chunk"));
    }
    common.options.set_overflow(value);
  }
  absl::StatusOr<std::optional<std::string>> request_id = ReadString(body, "request_id");
  if (!request_id.ok()) return request_id.status();
  common.options.set_request_id(request_id->value_or(""));
  return common;
}

Json CostJson(const v1::CostReport& cost) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string text;
  if (!google::protobuf::util::MessageToJsonString(cost, &text, options).ok()) return Json();
  Json json = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (json.is_discarded()) return Json();
  Int64AsNumbers(*v1::CostReport::descriptor(), json);
  return json;
}

std::string AttentionName(v1::AttentionKind kind) {
  std::string name = v1::AttentionKind_Name(kind);
  constexpr absl::string_view kPrefix = "ATTENTION_KIND_";
  if (absl::StartsWith(name, kPrefix)) name = name.substr(kPrefix.size());
  return absl::AsciiStrToLower(name);
}

absl::Status RenameDocumentField(const absl::Status& status, absl::string_view field) {
  constexpr absl::string_view kDocument = "document";
  const absl::string_view message = status.message();
  if (status.ok() || !absl::StartsWith(message, kDocument)) return status;
  // "document.text: ..." / "document: ..." -> "inputs: ..."
  const size_t end = message.find(':');
  if (end == absl::string_view::npos) return status;
  return absl::Status(status.code(), absl::StrCat(field, message.substr(end)));
}

}  // namespace docsparse::http
