#include "model/checkpoint/serving_config.h"

#include <sys/stat.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <initializer_list>
#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/types/span.h"
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

// Validation helpers that know the file name and build "file: path: what".
class Validator {
 public:
  explicit Validator(std::string_view source) : source_(source) {}

  absl::Status Error(const std::string& path, std::string_view what) const {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s: %s", source_, path, what));
  }

  absl::Status TypeError(const std::string& path, std::string_view expected,
                         const json& value) const {
    return Error(path, absl::StrFormat("expected %s, got %s", expected, JsonTypeName(value)));
  }

  absl::StatusOr<bool> Bool(const std::string& path, const json& value) const {
    if (!value.is_boolean()) return TypeError(path, "boolean", value);
    return value.get<bool>();
  }

  absl::StatusOr<std::string> String(const std::string& path, const json& value) const {
    if (!value.is_string()) return TypeError(path, "string", value);
    return value.get<std::string>();
  }

  absl::StatusOr<std::string> NonEmptyString(const std::string& path, const json& value) const {
    ASSIGN_OR_RETURN(std::string text, String(path, value));
    if (text.empty()) return Error(path, "must not be empty");
    return text;
  }

  absl::StatusOr<int64_t> Int(const std::string& path, const json& value, int64_t min,
                              int64_t max) const {
    if (!value.is_number_integer()) return TypeError(path, "integer", value);
    // Non-negative literals parse as unsigned and may exceed int64.
    const bool in_range = value.is_number_unsigned()
                              ? value.get<uint64_t>() <= static_cast<uint64_t>(max)
                              : value.get<int64_t>() <= max;
    if (!in_range || value.get<int64_t>() < min) {
      return Error(path, absl::StrFormat("%s is out of range [%d, %d]", value.dump(), min, max));
    }
    return value.get<int64_t>();
  }

  // A finite number in [min, max], or (min, max] when `exclusive_min`.
  absl::StatusOr<double> Number(const std::string& path, const json& value, double min, double max,
                                bool exclusive_min = false) const {
    if (!value.is_number()) return TypeError(path, "number", value);
    const double v = value.get<double>();
    const bool above_min = exclusive_min ? v > min : v >= min;
    if (!std::isfinite(v) || !above_min || v > max) {
      return Error(path, absl::StrFormat("%s is out of range %c%g, %g]", value.dump(),
                                         exclusive_min ? '(' : '[', min, max));
    }
    return v;
  }

  // One of `names`, returned as it is.
  absl::StatusOr<std::string> Name(const std::string& path, const json& value,
                                   const std::vector<std::string_view>& names) const {
    ASSIGN_OR_RETURN(const std::string name, String(path, value));
    std::vector<std::string> quoted;
    for (std::string_view choice : names) {
      if (choice == name) return name;
      quoted.push_back(absl::StrCat("\"", std::string(choice), "\""));
    }
    return Error(path, absl::StrFormat("unsupported value \"%s\" (expected %s)", name,
                                       absl::StrJoin(quoted, " or ")));
  }

  template <typename T>
  absl::StatusOr<T> Enum(const std::string& path, const json& value,
                         absl::Span<const std::pair<std::string_view, T>> choices) const {
    ASSIGN_OR_RETURN(const std::string name, String(path, value));
    std::vector<std::string> names;
    for (const auto& [choice, result] : choices) {
      if (choice == name) return result;
      names.push_back(absl::StrCat("\"", std::string(choice), "\""));
    }
    return Error(path, absl::StrFormat("unsupported value \"%s\" (expected %s)", name,
                                       absl::StrJoin(names, " or ")));
  }

 private:
  std::string_view source_;
};

// One JSON object being read: remembers which keys were looked at, so the
// rest can be reported as unknown.
class ObjectReader {
 public:
  ObjectReader(const Validator& validator, std::string path, const json& object)
      : validator_(validator), path_(std::move(path)), object_(object) {}

  // Fails unless `value` is an object.
  static absl::StatusOr<ObjectReader> Make(const Validator& validator, std::string path,
                                           const json& value) {
    if (!value.is_object()) return validator.TypeError(path, "object", value);
    return ObjectReader(validator, std::move(path), value);
  }

  // The value at `key`, or nullptr when absent.
  const json* Get(std::string_view key) {
    known_.insert(std::string(key));
    const auto it = object_.find(key);
    return it == object_.end() ? nullptr : &*it;
  }

  std::string PathOf(std::string_view key) const {
    return path_.empty() ? std::string(key) : path_ + "." + std::string(key);
  }

  absl::Status CheckNoUnknownKeys() const {
    for (const auto& [key, value] : object_.items()) {
      if (known_.count(key) == 0) {
        return validator_.Error(PathOf(key), "unknown key");
      }
    }
    return absl::OkStatus();
  }

 private:
  const Validator& validator_;
  std::string path_;
  const json& object_;
  std::set<std::string> known_;
};

absl::Status ParseTasks(const Validator& v, const json& value, std::vector<Task>& tasks) {
  const std::string path = "tasks";
  if (!value.is_array()) return v.TypeError(path, "array", value);
  if (value.empty()) return v.Error(path, "must name at least one task");
  tasks.clear();
  for (size_t i = 0; i < value.size(); ++i) {
    const std::string item = absl::StrFormat("tasks[%d]", i);
    ASSIGN_OR_RETURN(const Task task, v.Enum<Task>(item, value[i],
                                                   {{"embed", Task::kEmbed},
                                                    {"classify", Task::kClassify},
                                                    {"summarize", Task::kSummarize}}));
    if (std::find(tasks.begin(), tasks.end(), task) != tasks.end()) {
      return v.Error(item, absl::StrFormat("duplicate task \"%s\"", TaskName(task)));
    }
    tasks.push_back(task);
  }
  return absl::OkStatus();
}

// The planners whose plans are token pairs (model/attention/edge_plan.h): a
// union's parts.
const std::vector<std::string_view>& PairPlanners() {
  static const std::vector<std::string_view> names = {
      "sbm", "longformer", "bigbird", "sparse_transformer", "star", "modernbert",
      "etc", "lsh",        "routing"};
  return names;
}

absl::Status ParseAttention(const Validator& v, const json& value, AttentionChoice& attention) {
  ASSIGN_OR_RETURN(ObjectReader reader, ObjectReader::Make(v, "attention", value));
  if (const json* kind = reader.Get("kind")) {
    std::vector<std::string_view> kinds = {"native", "dense", "lsg"};
    kinds.insert(kinds.end(), PairPlanners().begin(), PairPlanners().end());
    kinds.push_back("union");
    ASSIGN_OR_RETURN(attention.kind, v.Name(reader.PathOf("kind"), *kind, kinds));
  }
  if (const json* parts = reader.Get("union")) {
    const std::string path = reader.PathOf("union");
    if (!parts->is_array()) return v.TypeError(path, "array", *parts);
    if (parts->size() < 2 || parts->size() > 4) {
      return v.Error(path, absl::StrFormat("has %d planners; a union takes 2 to 4",
                                           static_cast<int>(parts->size())));
    }
    for (size_t i = 0; i < parts->size(); ++i) {
      ASSIGN_OR_RETURN(std::string part,
                       v.Name(absl::StrCat(path, "[", i, "]"), (*parts)[i], PairPlanners()));
      if (std::find(attention.union_parts.begin(), attention.union_parts.end(), part) !=
          attention.union_parts.end()) {
        return v.Error(absl::StrCat(path, "[", i, "]"),
                       absl::StrFormat("\"%s\" is listed twice", part));
      }
      attention.union_parts.push_back(std::move(part));
    }
  }
  if (const json* knobs = reader.Get("knobs")) {
    // Names and ranges are the planner's, checked when the model loads.
    ASSIGN_OR_RETURN(ObjectReader knob_reader,
                     ObjectReader::Make(v, reader.PathOf("knobs"), *knobs));
    for (const auto& [name, number] : knobs->items()) {
      ASSIGN_OR_RETURN(attention.knobs[name],
                       v.Number(knob_reader.PathOf(name), number, -1e9, 1e9));
    }
  }
  return reader.CheckNoUnknownKeys();
}

absl::Status ParseZeroShot(const Validator& v, const json& value, ZeroShotConfig& zero_shot) {
  ASSIGN_OR_RETURN(ObjectReader reader, ObjectReader::Make(v, "zero_shot", value));
  if (const json* t = reader.Get("temperature")) {
    // Similarities lie in [-1, 1]: below 1e-4 the softmax overflows float,
    // above 1e4 it is uniform. Requests are held to the same range.
    ASSIGN_OR_RETURN(zero_shot.temperature, v.Number(reader.PathOf("temperature"), *t, 1e-4, 1e4));
  }
  if (const json* t = reader.Get("hypothesis_template")) {
    const std::string path = reader.PathOf("hypothesis_template");
    ASSIGN_OR_RETURN(zero_shot.hypothesis_template, v.String(path, *t));
    const size_t first = zero_shot.hypothesis_template.find("{}");
    if (first == std::string::npos ||
        zero_shot.hypothesis_template.find("{}", first + 2) != std::string::npos) {
      return v.Error(path,
                     "must contain \"{}\" exactly once (the label name "
                     "goes there)");
    }
  }
  if (const json* labels = reader.Get("labels")) {
    const std::string path = reader.PathOf("labels");
    if (!labels->is_array()) return v.TypeError(path, "array", *labels);
    std::set<std::string> names;
    zero_shot.labels.clear();
    for (size_t i = 0; i < labels->size(); ++i) {
      ASSIGN_OR_RETURN(ObjectReader item,
                       ObjectReader::Make(v, absl::StrFormat("%s[%d]", path, i), (*labels)[i]));
      ZeroShotLabel label;
      const json* name = item.Get("name");
      if (name == nullptr) {
        return v.Error(item.PathOf("name"), "missing (every label needs one)");
      }
      ASSIGN_OR_RETURN(label.name, v.NonEmptyString(item.PathOf("name"), *name));
      if (!names.insert(label.name).second) {
        return v.Error(item.PathOf("name"), absl::StrFormat("duplicate label \"%s\"", label.name));
      }
      if (const json* description = item.Get("description")) {
        ASSIGN_OR_RETURN(label.description,
                         v.NonEmptyString(item.PathOf("description"), *description));
      }
      RETURN_IF_ERROR(item.CheckNoUnknownKeys());
      zero_shot.labels.push_back(std::move(label));
    }
  }
  return reader.CheckNoUnknownKeys();
}

absl::Status ParseExtractive(const Validator& v, const json& value, ExtractiveConfig& extractive) {
  ASSIGN_OR_RETURN(ObjectReader reader, ObjectReader::Make(v, "extractive", value));
  if (const json* n = reader.Get("max_sentences")) {
    ASSIGN_OR_RETURN(extractive.max_sentences, v.Int(reader.PathOf("max_sentences"), *n, 1, 1000));
  }
  if (const json* d = reader.Get("diversity")) {
    ASSIGN_OR_RETURN(extractive.diversity, v.Number(reader.PathOf("diversity"), *d, 0, 1));
  }
  return reader.CheckNoUnknownKeys();
}

absl::Status ParseBatching(const Validator& v, const json& value, BatchingConfig& batching) {
  ASSIGN_OR_RETURN(ObjectReader reader, ObjectReader::Make(v, "batching", value));
  if (const json* n = reader.Get("max_batch_size")) {
    ASSIGN_OR_RETURN(batching.max_batch_size, v.Int(reader.PathOf("max_batch_size"), *n, 1, 4096));
  }
  if (const json* n = reader.Get("max_queue_size")) {
    ASSIGN_OR_RETURN(batching.max_queue_size,
                     v.Int(reader.PathOf("max_queue_size"), *n, 1, 1 << 20));
  }
  if (const json* n = reader.Get("max_queue_delay_ms")) {
    ASSIGN_OR_RETURN(batching.max_queue_delay_ms,
                     v.Int(reader.PathOf("max_queue_delay_ms"), *n, 0, 10000));
  }
  if (const json* n = reader.Get("max_batch_tokens")) {
    ASSIGN_OR_RETURN(batching.max_batch_tokens,
                     v.Int(reader.PathOf("max_batch_tokens"), *n, 1, int64_t{1} << 30));
  }
  if (const json* n = reader.Get("max_batch_attention_gflops")) {
    ASSIGN_OR_RETURN(batching.max_batch_attention_gflops,
                     v.Number(reader.PathOf("max_batch_attention_gflops"), *n, 1e-6, 1e9));
  }
  // A queue that cannot hold one full batch would make max_batch_size a lie.
  if (batching.max_queue_size < batching.max_batch_size) {
    return v.Error(reader.PathOf("max_queue_size"),
                   absl::StrFormat("%d is smaller than max_batch_size %d", batching.max_queue_size,
                                   batching.max_batch_size));
  }
  return reader.CheckNoUnknownKeys();
}

// Parses JSON refusing duplicate keys at any depth: nlohmann keeps the last
// of two equal keys silently, and in a hand-edited file that hides mistakes.
absl::StatusOr<json> ParseStrictJson(const std::string& text, const std::string& source) {
  std::vector<std::set<std::string>> open_objects;
  std::string duplicate;
  json::parser_callback_t on_event = [&](int /*depth*/, json::parse_event_t event, json& parsed) {
    switch (event) {
      case json::parse_event_t::object_start:
        open_objects.emplace_back();
        break;
      case json::parse_event_t::object_end:
        if (!open_objects.empty()) open_objects.pop_back();
        break;
      case json::parse_event_t::key:
        if (!open_objects.empty() && duplicate.empty() &&
            !open_objects.back().insert(parsed.get<std::string>()).second) {
          duplicate = parsed.get<std::string>();
        }
        break;
      default:
        break;
    }
    return true;
  };
  json root;
  try {
    root = json::parse(text, on_event);
  } catch (const json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": not valid JSON: ", e.what()));
  }
  if (!duplicate.empty()) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: key '%s' appears twice", source, duplicate));
  }
  return root;
}

}  // namespace

std::string_view TaskName(Task task) {
  switch (task) {
    case Task::kEmbed:
      return "embed";
    case Task::kClassify:
      return "classify";
    case Task::kSummarize:
      return "summarize";
  }
  return "?";
}

std::string_view PoolingModeName(PoolingMode pooling) {
  return pooling == PoolingMode::kCls ? "cls" : "mean";
}

std::string_view OverflowPolicyName(OverflowPolicy overflow) {
  switch (overflow) {
    case OverflowPolicy::kReject:
      return "reject";
    case OverflowPolicy::kTruncate:
      return "truncate";
    case OverflowPolicy::kChunk:
      return "chunk";
  }
  return "?";
}

std::string ZeroShotConfig::LabelText(const ZeroShotLabel& label) const {
  if (!label.description.empty()) return label.description;
  std::string text = hypothesis_template;
  const size_t at = text.find("{}");
  if (at != std::string::npos) text.replace(at, 2, label.name);
  return text;
}

bool ServingConfig::HasTask(Task task) const {
  return std::find(tasks.begin(), tasks.end(), task) != tasks.end();
}

absl::StatusOr<ServingConfig> ParseServingConfig(const nlohmann::json& config,
                                                 std::string_view source) {
  if (!config.is_object()) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: expected a JSON object at the top level, got %s", source, JsonTypeName(config)));
  }
  const Validator v(source);
  ObjectReader reader(v, "", config);
  ServingConfig result;
  if (const json* tasks = reader.Get("tasks")) {
    RETURN_IF_ERROR(ParseTasks(v, *tasks, result.tasks));
  }
  if (const json* pooling = reader.Get("pooling")) {
    ASSIGN_OR_RETURN(result.pooling, v.Enum<PoolingMode>("pooling", *pooling,
                                                         {{"mean", PoolingMode::kMean},
                                                          {"cls", PoolingMode::kCls}}));
  }
  if (const json* normalize = reader.Get("normalize")) {
    ASSIGN_OR_RETURN(result.normalize, v.Bool("normalize", *normalize));
  }
  if (const json* is_default = reader.Get("default")) {
    ASSIGN_OR_RETURN(result.default_model, v.Bool("default", *is_default));
  }
  if (const json* attention = reader.Get("attention")) {
    RETURN_IF_ERROR(ParseAttention(v, *attention, result.attention));
  }
  if (const json* precision = reader.Get("precision")) {
    std::vector<std::pair<std::string_view, Precision>> choices;
    for (Precision choice : kPrecisions) choices.emplace_back(PrecisionName(choice), choice);
    ASSIGN_OR_RETURN(result.precision, v.Enum<Precision>("precision", *precision, choices));
  }
  if (const json* max_tokens = reader.Get("max_document_tokens")) {
    ASSIGN_OR_RETURN(result.max_document_tokens,
                     v.Int("max_document_tokens", *max_tokens, 1, 1 << 24));
  }
  if (const json* overflow = reader.Get("overflow")) {
    ASSIGN_OR_RETURN(result.overflow,
                     v.Enum<OverflowPolicy>("overflow", *overflow,
                                            {{"reject", OverflowPolicy::kReject},
                                             {"truncate", OverflowPolicy::kTruncate},
                                             {"chunk", OverflowPolicy::kChunk}}));
  }
  if (const json* zero_shot = reader.Get("zero_shot")) {
    RETURN_IF_ERROR(ParseZeroShot(v, *zero_shot, result.zero_shot));
  }
  if (const json* extractive = reader.Get("extractive")) {
    RETURN_IF_ERROR(ParseExtractive(v, *extractive, result.extractive));
  }
  if (const json* batching = reader.Get("batching")) {
    RETURN_IF_ERROR(ParseBatching(v, *batching, result.batching));
  }
  RETURN_IF_ERROR(reader.CheckNoUnknownKeys());
  return result;
}

absl::StatusOr<ServingConfig> LoadServingConfig(const std::string& path) {
  struct stat st;
  if (::stat(path.c_str(), &st) != 0) {
    return absl::NotFoundError(
        absl::StrCat(path, ": not found (every model folder needs a docsparse.json)"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::PermissionDeniedError(absl::StrCat(path, ": cannot open"));
  }
  const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  ASSIGN_OR_RETURN(const json config, ParseStrictJson(text, path));
  return ParseServingConfig(config, path);
}

}  // namespace docsparse
