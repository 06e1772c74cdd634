#include "server/kserve_request.h"

#include <google/protobuf/util/json_util.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace docsparse {

const char* const kKServeParameters[] = {"labels",
                                         "max_density",
                                         "max_attention_gflops",
                                         "edge_regularization",
                                         "strict",
                                         "attention",
                                         "seed",
                                         "overflow",
                                         "pooling",
                                         "normalize",
                                         "temperature",
                                         nullptr};

namespace {

using Parameter = inference::InferParameter;

std::string ParameterField(const std::string& name) { return absl::StrCat("parameters.", name); }

absl::Status WrongType(const std::string& name, const char* expected) {
  return absl::InvalidArgumentError(absl::StrCat(ParameterField(name), ": expected ", expected));
}

// Numbers arrive in whichever field the client could fill: Triton's client
// has double_param, KServe's InferenceGRPCClient only bool, int64 and
// string (it refuses a Python float), and clients infer the type from the
// value (`1` is a fine density cap). So a double accepts an int64 and a
// string holding a finite number.
absl::StatusOr<double> DoubleParameter(const std::string& name, const Parameter& value) {
  switch (value.parameter_choice_case()) {
    case Parameter::kDoubleParam:
      return value.double_param();
    case Parameter::kInt64Param:
      return static_cast<double>(value.int64_param());
    case Parameter::kStringParam: {
      double number = 0;
      if (absl::SimpleAtod(absl::StripAsciiWhitespace(value.string_param()), &number) &&
          std::isfinite(number)) {
        return number;
      }
      return absl::InvalidArgumentError(absl::StrCat(
          ParameterField(name), ": '", value.string_param(), "' is not a finite number"));
    }
    default:
      return WrongType(name, "a double, an int64 or a numeric string");
  }
}

absl::StatusOr<bool> BoolParameter(const std::string& name, const Parameter& value) {
  if (value.parameter_choice_case() == Parameter::kBoolParam) return value.bool_param();
  if (value.parameter_choice_case() == Parameter::kStringParam) {
    const std::string text = absl::AsciiStrToLower(value.string_param());
    if (text == "true") return true;
    if (text == "false") return false;
  }
  return WrongType(name, "a bool (or the string true or false)");
}

absl::StatusOr<std::string> StringParameter(const std::string& name, const Parameter& value) {
  if (value.parameter_choice_case() != Parameter::kStringParam) {
    return WrongType(name, "a string");
  }
  return value.string_param();
}

// `value` (lower case) among `choices`, or INVALID_ARGUMENT listing them.
absl::StatusOr<int> Choice(const std::string& name, const std::string& value,
                           const std::vector<std::string>& choices) {
  const std::string lower = absl::AsciiStrToLower(value);
  for (size_t i = 0; i < choices.size(); ++i) {
    if (choices[i] == lower) return static_cast<int>(i);
  }
  return absl::InvalidArgumentError(absl::StrCat(ParameterField(name), ": '", value,
                                                 "' is not one of ", absl::StrJoin(choices, ", ")));
}

// The budget cap is a oneof: a second cap is an error, not a silent override.
absl::Status SetCap(const std::string& name, double value, v1::SparsityBudget* budget) {
  if (budget->cap_case() != v1::SparsityBudget::CAP_NOT_SET) {
    return absl::InvalidArgumentError(
        absl::StrCat(ParameterField(name),
                     ": at most one of max_density, max_attention_gflops, edge_regularization"));
  }
  if (name == "max_density") budget->set_max_density(value);
  if (name == "max_attention_gflops") budget->set_max_attention_gflops(value);
  if (name == "edge_regularization") budget->set_edge_regularization(value);
  return absl::OkStatus();
}

absl::Status ApplyParameter(const std::string& name, const Parameter& value,
                            KServeInferCall* call) {
  if (name == "max_density" || name == "max_attention_gflops" || name == "edge_regularization") {
    ASSIGN_OR_RETURN(const double cap, DoubleParameter(name, value));
    return SetCap(name, cap, &call->budget);
  }
  if (name == "strict") {
    ASSIGN_OR_RETURN(const bool strict, BoolParameter(name, value));
    call->budget.set_strict(strict);
  } else if (name == "normalize") {
    ASSIGN_OR_RETURN(const bool normalize, BoolParameter(name, value));
    call->normalize = normalize;
  } else if (name == "temperature") {
    ASSIGN_OR_RETURN(const double temperature, DoubleParameter(name, value));
    call->temperature = static_cast<float>(temperature);
  } else if (name == "seed") {
    uint64_t seed = 0;
    if (value.parameter_choice_case() == Parameter::kUint64Param) {
      call->budget.set_seed(value.uint64_param());
    } else if (value.parameter_choice_case() == Parameter::kInt64Param &&
               value.int64_param() >= 0) {
      call->budget.set_seed(static_cast<uint64_t>(value.int64_param()));
    } else if (value.parameter_choice_case() == Parameter::kStringParam &&
               absl::SimpleAtoi(absl::StripAsciiWhitespace(value.string_param()), &seed)) {
      call->budget.set_seed(seed);
    } else {
      return WrongType(name, "a non-negative int64, a uint64 or a string holding one");
    }
  } else if (name == "overflow") {
    ASSIGN_OR_RETURN(const std::string text, StringParameter(name, value));
    ASSIGN_OR_RETURN(const int index, Choice(name, text, {"reject", "truncate", "chunk"}));
    static constexpr v1::Overflow kOverflow[] = {v1::OVERFLOW_REJECT, v1::OVERFLOW_TRUNCATE,
                                                 v1::OVERFLOW_CHUNK};
    call->options.set_overflow(kOverflow[index]);
  } else if (name == "pooling") {
    ASSIGN_OR_RETURN(const std::string text, StringParameter(name, value));
    ASSIGN_OR_RETURN(const int index, Choice(name, text, {"cls", "mean"}));
    call->pooling = index == 0 ? v1::POOLING_CLS : v1::POOLING_MEAN;
  } else if (name == "attention") {
    ASSIGN_OR_RETURN(const std::string text, StringParameter(name, value));
    v1::AttentionKind kind = v1::ATTENTION_KIND_UNSPECIFIED;
    if (!v1::AttentionKind_Parse(absl::StrCat("ATTENTION_KIND_", absl::AsciiStrToUpper(text)),
                                 &kind) ||
        kind == v1::ATTENTION_KIND_UNSPECIFIED) {
      return absl::InvalidArgumentError(absl::StrCat(
          ParameterField(name), ": '", text,
          "' is not an attention kind (dense, lsg, sbm, longformer, bigbird, sparse_transformer, "
          "star, modernbert, etc, lsh, routing, union)"));
    }
    call->budget.set_attention(kind);
  } else if (name == "labels") {
    ASSIGN_OR_RETURN(const std::string text, StringParameter(name, value));
    const std::vector<std::string> labels = absl::StrSplit(text, ',');
    for (size_t i = 0; i < labels.size(); ++i) {
      std::string label(absl::StripAsciiWhitespace(labels[i]));
      if (label.empty()) {
        return absl::InvalidArgumentError(
            absl::StrCat(ParameterField(name), ": label ", i, " is empty"));
      }
      call->labels.push_back(std::move(label));
    }
  } else {
    std::vector<std::string> known;
    for (const char* const* known_name = kKServeParameters; *known_name != nullptr; ++known_name) {
      known.push_back(*known_name);
    }
    return absl::InvalidArgumentError(absl::StrCat(
        ParameterField(name), ": unknown parameter (known: ", absl::StrJoin(known, ", "), ")"));
  }
  return absl::OkStatus();
}

std::string ShapeString(const google::protobuf::RepeatedField<int64_t>& shape) {
  return absl::StrCat("[", absl::StrJoin(shape, ", "), "]");
}

// N from a shape [N] or [N, 1].
absl::StatusOr<int64_t> DocumentCount(const inference::ModelInferRequest::InferInputTensor& input,
                                      const std::string& field) {
  const auto& shape = input.shape();
  const bool vector = shape.size() == 1 || (shape.size() == 2 && shape[1] == 1);
  if (!vector || shape[0] < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".shape: expected [N] or [N, 1], got ", ShapeString(shape)));
  }
  if (shape[0] == 0) return absl::InvalidArgumentError(absl::StrCat(field, ".shape: no documents"));
  if (shape[0] > kKServeMaxDocuments) {
    return absl::InvalidArgumentError(absl::StrCat(
        field, ".shape: ", shape[0], " documents; at most ", kKServeMaxDocuments, " per request"));
  }
  return shape[0];
}

bool HasTypedContents(const inference::InferTensorContents& contents) {
  return contents.bool_contents_size() > 0 || contents.int_contents_size() > 0 ||
         contents.int64_contents_size() > 0 || contents.uint_contents_size() > 0 ||
         contents.uint64_contents_size() > 0 || contents.fp32_contents_size() > 0 ||
         contents.fp64_contents_size() > 0 || contents.bytes_contents_size() > 0;
}

absl::Status ParseInputs(const inference::ModelInferRequest& request, KServeInferCall* call) {
  const int raw_count = request.raw_input_contents_size();
  call->raw = raw_count > 0;
  if (call->raw && raw_count != request.inputs_size()) {
    return absl::InvalidArgumentError(absl::StrCat("raw_input_contents: ", raw_count,
                                                   " entries for ", request.inputs_size(),
                                                   " inputs (one per input expected)"));
  }
  int text_index = -1;
  for (int i = 0; i < request.inputs_size(); ++i) {
    const std::string field = absl::StrCat("inputs[", i, "]");
    const std::string& name = request.inputs(i).name();
    if (name != kKServeTextInput) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".name: unknown input '", name,
                                                     "' (the model has one input, 'text')"));
    }
    if (text_index >= 0) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".name: input 'text' given twice"));
    }
    text_index = i;
  }
  if (text_index < 0) return absl::InvalidArgumentError("inputs: missing input 'text'");

  const auto& input = request.inputs(text_index);
  const std::string field = absl::StrCat("inputs[", text_index, "]");
  if (input.datatype() != "BYTES") {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".datatype: expected BYTES, got '", input.datatype(), "'"));
  }
  ASSIGN_OR_RETURN(const int64_t count, DocumentCount(input, field));
  if (call->raw) {
    if (HasTypedContents(input.contents())) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".contents: must be empty when raw_input_contents is used"));
    }
    const std::string raw_field = absl::StrCat("raw_input_contents[", text_index, "]");
    ASSIGN_OR_RETURN(call->texts,
                     DecodeRawBytesTensor(request.raw_input_contents(text_index), raw_field));
    if (static_cast<int64_t>(call->texts.size()) != count) {
      return absl::InvalidArgumentError(absl::StrCat(
          raw_field, ": ", call->texts.size(), " elements for shape ", ShapeString(input.shape())));
    }
    return absl::OkStatus();
  }
  const inference::InferTensorContents& contents = input.contents();
  if (contents.bytes_contents_size() != count) {
    return absl::InvalidArgumentError(
        absl::StrCat(field, ".contents.bytes_contents: ", contents.bytes_contents_size(),
                     " elements for shape ", ShapeString(input.shape()),
                     HasTypedContents(contents) ? " (BYTES elements go in bytes_contents)" : ""));
  }
  call->texts.assign(contents.bytes_contents().begin(), contents.bytes_contents().end());
  return absl::OkStatus();
}

absl::Status ParseOutputs(const inference::ModelInferRequest& request, KServeInferCall* call) {
  for (int i = 0; i < request.outputs_size(); ++i) {
    const std::string& name = request.outputs(i).name();
    if (name != kKServeEmbeddingOutput && name != kKServeScoresOutput) {
      return absl::InvalidArgumentError(absl::StrCat("outputs[", i, "].name: unknown output '",
                                                     name, "' (available: embedding, scores)"));
    }
    if (call->wants(name)) {
      return absl::InvalidArgumentError(
          absl::StrCat("outputs[", i, "].name: output '", name, "' requested twice"));
    }
    call->outputs.push_back(name);
  }
  if (call->outputs.empty()) call->outputs.push_back(kKServeEmbeddingOutput);
  return absl::OkStatus();
}

void AppendLittleEndian32(uint32_t value, std::string* out) {
  for (int shift = 0; shift < 32; shift += 8) out->push_back(static_cast<char>(value >> shift));
}

}  // namespace

bool KServeInferCall::wants(std::string_view output) const {
  return std::find(outputs.begin(), outputs.end(), output) != outputs.end();
}

absl::StatusOr<KServeInferCall> ParseKServeInferRequest(
    const inference::ModelInferRequest& request) {
  KServeInferCall call;
  RETURN_IF_ERROR(ParseInputs(request, &call));
  RETURN_IF_ERROR(ParseOutputs(request, &call));
  // A map's iteration order is unspecified: sort the names so that which of
  // two bad parameters is reported does not change from run to run.
  std::vector<std::string> names;
  for (const auto& [name, value] : request.parameters()) names.push_back(name);
  std::sort(names.begin(), names.end());
  for (const std::string& name : names) {
    RETURN_IF_ERROR(ApplyParameter(name, request.parameters().at(name), &call));
  }
  call.options.set_request_id(request.id());
  return call;
}

absl::StatusOr<std::vector<std::string>> DecodeRawBytesTensor(std::string_view raw,
                                                              const std::string& field) {
  std::vector<std::string> elements;
  size_t offset = 0;
  while (offset < raw.size()) {
    if (raw.size() - offset < 4) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": element ", elements.size(),
                                                     " at byte ", offset,
                                                     ": truncated 4-byte length prefix"));
    }
    uint32_t length = 0;
    for (int i = 0; i < 4; ++i) {
      length |= static_cast<uint32_t>(static_cast<unsigned char>(raw[offset + i])) << (8 * i);
    }
    offset += 4;
    if (length > raw.size() - offset) {
      return absl::InvalidArgumentError(absl::StrCat(field, ": element ", elements.size(),
                                                     " claims ", length, " bytes but ",
                                                     raw.size() - offset, " remain"));
    }
    elements.emplace_back(raw.substr(offset, length));
    offset += length;
  }
  return elements;
}

std::string EncodeRawBytesTensor(const std::vector<std::string>& elements) {
  std::string raw;
  for (const std::string& element : elements) {
    AppendLittleEndian32(static_cast<uint32_t>(element.size()), &raw);
    raw += element;
  }
  return raw;
}

void AddFp32Output(const std::string& name, const std::vector<int64_t>& shape,
                   const std::vector<float>& values, bool raw,
                   inference::ModelInferResponse* response) {
  inference::ModelInferResponse::InferOutputTensor* output = response->add_outputs();
  output->set_name(name);
  output->set_datatype("FP32");
  output->mutable_shape()->Add(shape.begin(), shape.end());
  if (!raw) {
    output->mutable_contents()->mutable_fp32_contents()->Add(values.begin(), values.end());
    return;
  }
  // The protocol fixes little-endian; write it byte by byte rather than
  // assume the host's order.
  std::string* bytes = response->add_raw_output_contents();
  bytes->reserve(values.size() * 4);
  for (const float value : values) {
    uint32_t bits = 0;
    std::memcpy(&bits, &value, sizeof(bits));
    AppendLittleEndian32(bits, bytes);
  }
}

void KServeCostTotals::Add(const v1::CostReport& cost) {
  if (empty_) {
    summary_.set_attention(cost.attention());
    *summary_.mutable_knobs() = cost.knobs();
    *summary_.mutable_budget() = cost.budget();
    summary_.set_budget_met(true);
    empty_ = false;
  }
  // Dense pairs are not reported, but edges / density recovers them: the
  // request's density is then total edges over total dense pairs.
  if (cost.attention_edges() > 0 && cost.mean_density() > 0) {
    dense_pairs_ += static_cast<double>(cost.attention_edges()) / cost.mean_density();
  }
  summary_.set_attention_edges(summary_.attention_edges() + cost.attention_edges());
  summary_.set_mean_density(
      dense_pairs_ > 0 ? static_cast<double>(summary_.attention_edges()) / dense_pairs_ : 0.0);
  summary_.set_input_tokens(summary_.input_tokens() + cost.input_tokens());
  summary_.set_padded_tokens(summary_.padded_tokens() + cost.padded_tokens());
  summary_.set_windows(summary_.windows() + cost.windows());
  summary_.set_truncated(summary_.truncated() || cost.truncated());
  summary_.set_attention_flops(summary_.attention_flops() + cost.attention_flops());
  summary_.set_planner_flops(summary_.planner_flops() + cost.planner_flops());
  summary_.set_total_flops(summary_.total_flops() + cost.total_flops());
  summary_.set_dense_equivalent_flops(summary_.dense_equivalent_flops() +
                                      cost.dense_equivalent_flops());
  summary_.set_budget_met(summary_.budget_met() && cost.budget_met());
}

void KServeCostTotals::WriteParameters(inference::ModelInferResponse* response) const {
  auto& parameters = *response->mutable_parameters();
  parameters["density"].set_double_param(summary_.mean_density());
  parameters["attention_gflops"].set_double_param(summary_.attention_flops() / 1e9);
  parameters["total_gflops"].set_double_param(summary_.total_flops() / 1e9);
  parameters["dense_equivalent_gflops"].set_double_param(summary_.dense_equivalent_flops() / 1e9);
  parameters["input_tokens"].set_int64_param(summary_.input_tokens());
  parameters["budget_met"].set_bool_param(empty_ || summary_.budget_met());
  // KServe's client drops double parameters: the whole report, as JSON in
  // a string, is readable by every client.
  parameters["cost"].set_string_param(CostJson());
}

std::string KServeCostTotals::CostJson() const {
  v1::CostReport report = summary_;
  report.set_budget_met(empty_ || summary_.budget_met());
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(report, &json, options).ok()) return "{}";
  return json;
}

}  // namespace docsparse
