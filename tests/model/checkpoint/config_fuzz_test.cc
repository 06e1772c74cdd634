// Mutation fuzzing of the JSON readers of a model folder: config.json
// (LoadEncoderConfig / ParseEncoderConfig), docsparse.json (LoadServingConfig /
// ParseServingConfig) and tokenizer.json (WordPieceTokenizer). Thousands of
// seeded mutations of real files (byte flips, truncation, key deletion and
// duplication, type changes, huge and negative numbers, deep nesting) must each
// give a sane config or an INVALID_ARGUMENT naming the file and a field: never
// a crash, an escaped exception, a runaway allocation or a hang.
//
// The cases run in forked children (with a cap on their address space), so a
// crash or a hang fails the test naming the case, saved to a file for
// reproduction, instead of taking the test binary down.
#include <cxxabi.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <typeinfo>
#include <vector>

#include "absl/strings/str_split.h"
#include "model/checkpoint/hf_config.h"
#include "model/checkpoint/serving_config.h"
#include "model/text/unicode_text.h"
#include "model/text/wordpiece_tokenizer.h"
#include "nlohmann/json.hpp"

namespace docsparse {
namespace {

using Json = nlohmann::json;

constexpr uint64_t kSeed = 0x646f6373ULL;  // "docs"
constexpr int kCasesPerReader = 3000;
// No progress for this long is a hang (a case takes well under 100 ms).
constexpr std::chrono::milliseconds kCaseTimeout(5000);

const std::string kSourceDir = DOCSPARSE_SOURCE_DIR;

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

void WriteText(const std::string& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
}

// Printable ASCII as is, everything else as \xNN, cut at `limit` bytes.
std::string Preview(std::string_view text, size_t limit = 200) {
  std::string out;
  for (size_t i = 0; i < text.size() && i < limit; ++i) {
    const unsigned char c = static_cast<unsigned char>(text[i]);
    if (c >= 0x20 && c < 0x7F && c != '\\') {
      out.push_back(static_cast<char>(c));
    } else {
      char hex[8];
      std::snprintf(hex, sizeof(hex), "\\x%02X", c);
      out += hex;
    }
  }
  if (text.size() > limit) out += "...(" + std::to_string(text.size()) + " bytes)";
  return out;
}

class Rng {
 public:
  explicit Rng(uint64_t seed) : engine_(seed) {}
  size_t Below(size_t n) {
    return n == 0 ? 0 : std::uniform_int_distribution<size_t>(0, n - 1)(engine_);
  }
  bool Chance(double p) { return std::bernoulli_distribution(p)(engine_); }
  template <typename T>
  const T& Pick(const std::vector<T>& items) {
    return items[Below(items.size())];
  }

 private:
  std::mt19937_64 engine_;
};

// ------------------------------------------------------------ mutations --

Json Nested(int depth) {
  Json value = 1;
  for (int i = 0; i < depth; ++i) value = Json::array({value});
  return value;
}

// Values a field may be replaced with: every JSON type, boundaries of the
// ranges the readers check, and the values of other fields.
const std::vector<Json>& InterestingValues() {
  static const std::vector<Json> values = [] {
    std::vector<Json> v = {nullptr, true, false, Json::array(), Json::object(), Nested(40)};
    for (int64_t n :
         {0,     1,     2,     3,     12,      384,     1000,     1001,     4096,       4097,
          10000, 10001, 65536, 65537, 1048576, 1048577, 16777216, 16777217, 2147483647, -1}) {
      v.push_back(n);
    }
    for (int64_t n :
         {int64_t{2147483648}, int64_t{-2147483648}, int64_t{-2147483649}, int64_t{4294967296},
          std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()}) {
      v.push_back(n);
    }
    v.push_back(std::numeric_limits<uint64_t>::max());
    for (double x : {1.5, -0.5, 0.0, -0.0, 1e-300, 1e-40, 1e308, -1e308}) v.push_back(x);
    // Other fields' values, and strings the readers look for.
    for (absl::string_view text :
         absl::StrSplit("x gelu swish bert roberta distilbert dense lsg mean cls chunk reject "
                        "embed [UNK] ## {} {}{} \xe6\x97\xa5",
                        ' ')) {
      v.push_back(std::string(text));
    }
    for (const char* text : {"", "This text is about {}."}) v.push_back(text);
    v.push_back(std::string(5000, 'a'));
    v.push_back(std::string("\0", 1));
    v.push_back(Json::array({1, "a", nullptr}));
    v.push_back(Json{{"name", "x"}});
    v.push_back(Json{{"a", 1}});
    return v;
  }();
  return values;
}

// Raw JSON text that no Json value serialises to.
const std::vector<std::string>& RawValueTexts() {
  static const std::vector<std::string> texts = {"1e400",
                                                 "-1e400",
                                                 "1e-400",
                                                 "123456789012345678901234567890",
                                                 "-123456789012345678901234567890",
                                                 "18446744073709551616",
                                                 "-0",
                                                 "01",
                                                 "1.",
                                                 ".5",
                                                 "NaN",
                                                 "Infinity",
                                                 "-",
                                                 "0x10",
                                                 "\"\\ud800\"",
                                                 "\"\\udc00x\"",
                                                 "\"\xff\"",
                                                 "\"\xc0\xaf\"",
                                                 "\"\\u0000\"",
                                                 "tru",
                                                 "nul",
                                                 "[1,]",
                                                 "{\"a\"}",
                                                 "{,}",
                                                 "\"unterminated"};
  return texts;
}

void CollectPointers(const Json& node, const Json::json_pointer& at, int depth,
                     std::vector<Json::json_pointer>* out) {
  out->push_back(at);
  if (depth >= 6) return;
  if (node.is_object()) {
    for (const auto& [key, value] : node.items()) CollectPointers(value, at / key, depth + 1, out);
  } else if (node.is_array()) {
    for (size_t i = 0; i < node.size() && i < 40; ++i) {
      CollectPointers(node[i], at / i, depth + 1, out);
    }
  }
}

std::vector<Json::json_pointer> Pointers(const Json& doc) {
  std::vector<Json::json_pointer> out;
  CollectPointers(doc, Json::json_pointer(), 0, &out);
  return out;
}

// The pointers whose value satisfies `keep`.
std::vector<Json::json_pointer> PointersWhere(const Json& doc,
                                              const std::function<bool(const Json&)>& keep) {
  std::vector<Json::json_pointer> out;
  for (const auto& pointer : Pointers(doc)) {
    if (keep(doc.at(pointer))) out.push_back(pointer);
  }
  return out;
}

// `doc` serialised with the value at `at` replaced by the raw `text`.
std::string DumpWithRawValue(Json doc, const Json::json_pointer& at, const std::string& text) {
  const std::string marker = "\x02MARK";
  doc[at] = marker;
  std::string out = doc.dump();
  const std::string quoted = Json(marker).dump();
  out.replace(out.find(quoted), quoted.size(), text);
  return out;
}

struct Case {
  std::string text;
  std::string what;  // the mutations applied, for failure messages
  // Deeply nested: only bytes are mutated from then on (dump() recurses).
  bool deep = false;
};

void MutateBytes(Rng& rng, Case* c) {
  std::string& t = c->text;
  const size_t pos = rng.Below(t.size() + 1);
  switch (rng.Below(6)) {
    case 0:
      if (!t.empty()) {
        const size_t at = rng.Below(t.size());
        t[at] = static_cast<char>(t[at] ^ (1 << rng.Below(8)));
        c->what += "flip bit at " + std::to_string(at) + "; ";
      }
      break;
    case 1:
      if (!t.empty()) {
        const size_t at = rng.Below(t.size());
        t[at] = static_cast<char>(rng.Below(256));
        c->what += "random byte at " + std::to_string(at) + "; ";
      }
      break;
    case 2:
      t.resize(pos);
      c->what += "truncate to " + std::to_string(pos) + "; ";
      break;
    case 3: {
      const size_t length = 1 + rng.Below(16);
      t.erase(pos, length);
      c->what += "erase " + std::to_string(length) + " at " + std::to_string(pos) + "; ";
      break;
    }
    case 4: {
      static const std::vector<std::string> tokens = {"{",
                                                      "}",
                                                      "[",
                                                      "]",
                                                      ",",
                                                      ":",
                                                      "\"",
                                                      "\\",
                                                      "null",
                                                      "1e400",
                                                      "-1",
                                                      "\xff",
                                                      "\xc0\xaf",
                                                      "/*",
                                                      "NaN",
                                                      "\\u0000",
                                                      std::string("\0", 1),
                                                      "\"\\ud800\"",
                                                      "{\"a\":1}"};
      const std::string& token = rng.Pick(tokens);
      t.insert(pos, token);
      c->what += "insert '" + Preview(token) + "' at " + std::to_string(pos) + "; ";
      break;
    }
    default: {
      const size_t begin = rng.Below(t.size() + 1);
      const size_t length = std::min(t.size() - begin, 1 + rng.Below(64));
      t.insert(pos, t.substr(begin, length));
      c->what += "duplicate bytes [" + std::to_string(begin) + ", +" + std::to_string(length) +
                 ") at " + std::to_string(pos) + "; ";
      break;
    }
  }
}

// One structural mutation through nlohmann::json; false when the text does
// not parse (the caller then mutates bytes).
bool MutateStructure(Rng& rng, Case* c) {
  Json doc = Json::parse(c->text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return false;
  const std::vector<Json::json_pointer> all = Pointers(doc);
  const auto objects = PointersWhere(doc, [](const Json& v) { return v.is_object(); });
  const auto keyed = PointersWhere(doc, [](const Json& v) { return v.is_object() && !v.empty(); });
  const auto numbers = PointersWhere(doc, [](const Json& v) { return v.is_number(); });
  const auto arrays = PointersWhere(doc, [](const Json& v) { return v.is_array(); });
  switch (rng.Below(8)) {
    case 0: {  // delete a key
      if (keyed.empty()) return false;
      const auto& at = rng.Pick(keyed);
      auto it = doc[at].begin();
      std::advance(it, static_cast<long>(rng.Below(doc[at].size())));
      c->what += "delete " + at.to_string() + "/" + it.key() + "; ";
      doc[at].erase(it);
      break;
    }
    case 1: {  // duplicate a key with another value (nlohmann cannot hold one)
      if (keyed.empty()) return false;
      const auto& at = rng.Pick(keyed);
      auto it = doc[at].begin();
      std::advance(it, static_cast<long>(rng.Below(doc[at].size())));
      const std::string key = it.key();
      const Json value = rng.Chance(0.5) ? it.value() : rng.Pick(InterestingValues());
      const std::string marker =
          "\x01"
          "DUP";
      doc[at][marker] = 0;
      std::string text = doc.dump();
      const std::string marker_pair = Json(marker).dump() + ":0";
      text.replace(text.find(marker_pair), marker_pair.size(),
                   Json(key).dump() + ":" + value.dump());
      c->text = text;
      c->what += "duplicate key " + at.to_string() + "/" + key + "; ";
      return true;
    }
    case 2: {  // change a value's type or value
      const auto& at = rng.Pick(all);
      const Json& value = rng.Pick(InterestingValues());
      c->what += "set " + at.to_string() + " = " + Preview(value.dump(), 40) + "; ";
      doc[at] = value;
      break;
    }
    case 3: {  // a number at a boundary, negated, doubled
      if (numbers.empty()) return false;
      const auto& at = rng.Pick(numbers);
      const double old = doc[at].get<double>();
      const std::vector<Json> candidates = {
          -old, old * 2, old + 1, old - 1, 0, -1, std::numeric_limits<int64_t>::max(), 1e300};
      const Json& value = rng.Pick(candidates);
      c->what += "number " + at.to_string() + " = " + value.dump() + "; ";
      doc[at] = value;
      break;
    }
    case 4: {  // unknown or odd key
      if (objects.empty()) return false;
      const auto& at = rng.Pick(objects);
      static const std::vector<std::string> keys = {"foo",  "",      std::string("\0", 1), "type",
                                                    "name", "vocab", "\xe2\x82\xac"};
      const std::string& key = rng.Pick(keys);
      c->what += "add key " + at.to_string() + "/" + Preview(key) + "; ";
      doc[at][key] = rng.Pick(InterestingValues());
      break;
    }
    case 5: {  // array edits
      if (arrays.empty()) return false;
      const auto& at = rng.Pick(arrays);
      Json& array = doc[at];
      const size_t choice = rng.Below(3);
      if (choice == 0 || array.empty()) {
        array.push_back(rng.Chance(0.5) && !array.empty() ? array[rng.Below(array.size())]
                                                          : rng.Pick(InterestingValues()));
        c->what += "append to " + at.to_string() + "; ";
      } else if (choice == 1) {
        array.erase(rng.Below(array.size()));
        c->what += "erase from " + at.to_string() + "; ";
      } else {
        array.clear();
        c->what += "clear " + at.to_string() + "; ";
      }
      break;
    }
    case 6: {  // a raw value text: huge numbers, bad escapes
      const auto& at = rng.Pick(all);
      const std::string& raw = rng.Pick(RawValueTexts());
      c->text = DumpWithRawValue(doc, at, raw);
      c->what += "raw " + at.to_string() + " = " + Preview(raw) + "; ";
      return true;
    }
    default: {  // deep nesting
      const auto& at = rng.Pick(all);
      // Up to 100000 deep, which overflows the stack of a recursive reader
      // (a deep case costs milliseconds, so most are shallower).
      static const std::vector<int> depths = {64, 64, 1000, 1000, 10000, 100000};
      const bool arrays_only = rng.Chance(0.5);
      const int depth = rng.Pick(depths);
      const std::string nested =
          arrays_only ? std::string(depth, '[') + std::string(depth, ']') : [&] {
            std::string s;
            for (int i = 0; i < depth; ++i) s += "{\"a\":";
            return s + "1" + std::string(depth, '}');
          }();
      c->text = DumpWithRawValue(doc, at, nested);
      c->deep = true;
      c->what += "nest " + std::to_string(depth) + (arrays_only ? " arrays" : " objects") + " at " +
                 at.to_string() + "; ";
      return true;
    }
  }
  c->text = rng.Chance(0.5) ? doc.dump() : doc.dump(2);
  return true;
}

// Case `index`: a pure function of the seed, so a failure can be regenerated.
Case MakeCase(const std::string& base_text, uint64_t seed, int index) {
  Rng rng(seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(index));
  Case c{base_text, "", false};
  const size_t rounds = 1 + rng.Below(3);
  for (size_t round = 0; round < rounds; ++round) {
    if (!c.deep && rng.Chance(0.6) && MutateStructure(rng, &c)) continue;
    MutateBytes(rng, &c);
  }
  return c;
}

// ---------------------------------------------------------------- oracle --

void CollectKeys(const Json& node, int depth, std::set<std::string>* keys) {
  if (depth > 8) return;
  if (node.is_object()) {
    for (const auto& [key, value] : node.items()) {
      keys->insert(key);
      CollectKeys(value, depth + 1, keys);
    }
  } else if (node.is_array()) {
    for (size_t i = 0; i < node.size() && i < 40; ++i) CollectKeys(node[i], depth + 1, keys);
  }
}

// Field names an error may mention: those of the original file, and those of
// at least 3 bytes in the mutated one (an unknown key is named as written).
std::set<std::string> FieldNames(const std::string& base_text, const std::string& text) {
  std::set<std::string> names;
  CollectKeys(Json::parse(base_text), 0, &names);
  const Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!doc.is_discarded()) {
    std::set<std::string> mutated;
    CollectKeys(doc, 0, &mutated);
    for (const std::string& key : mutated) {
      if (key.size() >= 3) names.insert(key);
    }
  }
  return names;
}

struct Outcome {
  bool accepted = false;
  std::string error;      // the reader's message when it refused the file
  std::string violation;  // what broke the contract; empty when fine
};

// An error must be INVALID_ARGUMENT, start with `source` and name a field.
std::string CheckError(const absl::Status& status, const std::string& source,
                       const std::set<std::string>& fields) {
  if (status.code() != absl::StatusCode::kInvalidArgument) {
    return "code " + absl::StatusCodeToString(status.code()) + ": " + std::string(status.message());
  }
  const std::string message(status.message());
  if (message.rfind(source + ":", 0) != 0)
    return "message does not start with the source: " + message;
  const std::string rest = message.substr(source.size());
  for (const char* general :
       {"not valid JSON", "top level", "expected a JSON object", "unknown key", "unknown field"}) {
    if (rest.find(general) != std::string::npos) return "";
  }
  for (const std::string& field : fields) {
    if (!field.empty() && rest.find(field) != std::string::npos) return "";
  }
  return "message names no field: " + message;
}

std::string CheckEncoderConfig(const EncoderConfig& c) {
  std::ostringstream bad;
  if (c.vocab_size < 1) bad << "vocab_size " << c.vocab_size << "; ";
  if (c.hidden_size < 1) bad << "hidden_size " << c.hidden_size << "; ";
  if (c.num_layers < 1) bad << "num_layers " << c.num_layers << "; ";
  if (c.num_heads < 1 || (c.num_heads > 0 && c.hidden_size % c.num_heads != 0)) {
    bad << c.num_heads << " heads for hidden " << c.hidden_size << "; ";
  }
  if (c.intermediate_size < 1) bad << "intermediate_size " << c.intermediate_size << "; ";
  if (c.max_position_embeddings < 1) bad << "max_position " << c.max_position_embeddings << "; ";
  const bool distil = c.architecture == Architecture::kDistilBert;
  if (distil ? c.type_vocab_size != 0 : c.type_vocab_size < 1) {
    bad << "type_vocab_size " << c.type_vocab_size << "; ";
  }
  if (c.pad_token_id < -1 || c.pad_token_id >= c.vocab_size)
    bad << "pad " << c.pad_token_id << "; ";
  if (c.architecture == Architecture::kRoberta && c.pad_token_id < 0) bad << "roberta pad; ";
  if (!(c.layer_norm_eps > 0) || !std::isfinite(c.layer_norm_eps)) {
    bad << "layer_norm_eps " << c.layer_norm_eps << "; ";
  }
  if (c.id2label.size() > (1u << 20)) bad << c.id2label.size() << " labels; ";
  if (c.has_classification_head && c.id2label.empty()) bad << "head without labels; ";
  return bad.str();
}

std::string CheckServingConfig(const ServingConfig& c) {
  std::ostringstream bad;
  if (c.tasks.empty()) bad << "no tasks; ";
  if (std::set<Task>(c.tasks.begin(), c.tasks.end()).size() != c.tasks.size()) {
    bad << "duplicate tasks; ";
  }
  if (c.attention.kind != "native" && c.attention.kind != "dense" && c.attention.kind != "lsg" &&
      c.attention.kind != "sbm") {
    bad << "attention " << c.attention.kind << "; ";
  }
  if (c.max_document_tokens < 1 || c.max_document_tokens > (1 << 24)) {
    bad << "max_document_tokens " << c.max_document_tokens << "; ";
  }
  const ZeroShotConfig& z = c.zero_shot;
  // The server divides similarities by the temperature as a float: below
  // FLT_MIN it becomes 0 or a subnormal, and every score NaN.
  if (!(static_cast<float>(z.temperature) >= std::numeric_limits<float>::min()) ||
      !std::isfinite(z.temperature)) {
    bad << "temperature " << z.temperature << "; ";
  }
  const size_t braces = z.hypothesis_template.find("{}");
  if (braces == std::string::npos ||
      z.hypothesis_template.find("{}", braces + 2) != std::string::npos) {
    bad << "template " << z.hypothesis_template << "; ";
  }
  std::set<std::string> names;
  for (const ZeroShotLabel& label : z.labels) {
    if (label.name.empty() || !names.insert(label.name).second)
      bad << "label '" << label.name << "'; ";
  }
  if (c.extractive.max_sentences < 1 || c.extractive.max_sentences > 1000) bad << "max_sentences; ";
  if (!(c.extractive.diversity >= 0 && c.extractive.diversity <= 1)) bad << "diversity; ";
  const BatchingConfig& b = c.batching;
  if (b.max_batch_size < 1 || b.max_batch_size > 4096) bad << "max_batch_size; ";
  if (b.max_queue_size < b.max_batch_size || b.max_queue_size > (1 << 20))
    bad << "max_queue_size; ";
  if (b.max_queue_delay_ms < 0 || b.max_queue_delay_ms > 10000) bad << "max_queue_delay_ms; ";
  return bad.str();
}

// A tokenizer that loaded must encode to ids it has and decode to UTF-8.
std::string CheckTokenizer(const WordPieceTokenizer& t) {
  std::ostringstream bad;
  const int32_t size = t.vocab_size();
  if (size < 1) return "empty vocabulary; ";
  if (t.special_tokens().unk < 0 || t.special_tokens().unk >= size) bad << "unk id; ";
  for (const std::string& text : std::vector<std::string>{
           "Hello, world! unaffable", "\xe6\x97\xa5\xe6\x9c\xac [UNK] [CLS] ##s", "a\xcc\x81 \t x",
           "", std::string(300, 'x'), std::string("\0 \x01", 3)}) {
    const std::vector<int32_t> ids = t.Encode(text);
    for (const int32_t id : ids) {
      if (id < 0 || id >= size || !t.IdToToken(id).has_value()) {
        bad << "Encode(\"" << Preview(text, 30) << "\") gave id " << id << "; ";
        break;
      }
    }
    if (!ValidateUtf8(t.Decode(ids)).ok()) bad << "Decode gave invalid UTF-8; ";
  }
  return bad.str();
}

// --------------------------------------------------------------- runner --

std::string TypeName(const std::type_info& type) {
  int status = 0;
  char* name = abi::__cxa_demangle(type.name(), nullptr, nullptr, &status);
  const std::string out = status == 0 && name != nullptr ? name : type.name();
  std::free(name);
  return out;
}

std::string OneLine(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

void WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// Caps the child's address space at its current size plus 2 GiB, so a
// runaway allocation fails (std::bad_alloc) instead of exhausting the host.
void LimitAddressSpace() {
  std::ifstream statm("/proc/self/statm");
  uint64_t pages = 0;
  statm >> pages;
  const rlim_t limit = pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) + (rlim_t{2} << 30);
  const rlimit cap{limit, limit};
  setrlimit(RLIMIT_AS, &cap);
}

struct CaseReport {
  int index = -1;
  std::string what;
};

struct RunReport {
  int accepted = 0;
  int rejected = 0;
  std::vector<CaseReport> violations;
  std::map<std::string, int> error_kinds;  // message shape -> count
};

// The shape of an error message: the source cut off, digits collapsed,
// at most 70 bytes.
std::string ErrorKind(const std::string& message, size_t source_size) {
  std::string out;
  for (size_t i = std::min(source_size, message.size()); i < message.size() && out.size() < 70;
       ++i) {
    const char c = message[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      if (out.empty() || out.back() != '#') out.push_back('#');
    } else {
      out.push_back(c);
    }
  }
  return out;
}

// Runs run_case(0 .. count-1) in forked children. A case whose outcome has a
// violation, that kills its child or that makes no progress for kCaseTimeout
// is reported; after a crash or hang a new child resumes at the next case.
RunReport RunIsolated(int count, size_t source_size, const std::function<Outcome(int)>& run_case) {
  RunReport report;
  int next = 0;
  int restarts = 0;
  while (next < count) {
    int fds[2];
    if (pipe(fds) != 0) {
      report.violations.push_back({-1, "pipe failed"});
      return report;
    }
    std::cout.flush();
    std::cerr.flush();
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      LimitAddressSpace();
      for (int i = next; i < count; ++i) {
        WriteAll(fds[1], "B " + std::to_string(i) + "\n");
        Outcome outcome;
        try {
          outcome = run_case(i);
        } catch (const std::exception& e) {
          outcome.violation = "threw " + TypeName(typeid(e)) + ": " + e.what();
        } catch (...) {
          outcome.violation = "threw a non-std exception";
        }
        std::string line = outcome.accepted ? "A " : "R ";
        line += std::to_string(i) + " " + OneLine(ErrorKind(outcome.error, source_size)) + "\n";
        if (!outcome.violation.empty()) {
          line += "V " + std::to_string(i) + " " + OneLine(outcome.violation) + "\n";
        }
        WriteAll(fds[1], line);
      }
      WriteAll(fds[1], "E\n");
      _exit(0);
    }
    close(fds[1]);
    std::string buffer;
    int current = next - 1;
    bool ended = false;
    bool hung = false;
    while (true) {
      pollfd p{fds[0], POLLIN, 0};
      if (poll(&p, 1, static_cast<int>(kCaseTimeout.count())) == 0) {
        hung = true;
        break;
      }
      char chunk[4096];
      const ssize_t n = read(fds[0], chunk, sizeof(chunk));
      if (n <= 0) break;
      buffer.append(chunk, static_cast<size_t>(n));
      size_t newline;
      while ((newline = buffer.find('\n')) != std::string::npos) {
        const std::string line = buffer.substr(0, newline);
        buffer.erase(0, newline + 1);
        if (line == "E") {
          ended = true;
          continue;
        }
        const size_t space = line.find(' ', 2);
        const int index = std::atoi(line.c_str() + 2);
        const std::string rest = space == std::string::npos ? "" : line.substr(space + 1);
        switch (line[0]) {
          case 'B':
            current = index;
            break;
          case 'A':
            ++report.accepted;
            break;
          case 'R':
            ++report.rejected;
            ++report.error_kinds[rest];
            break;
          case 'V':
            report.violations.push_back({index, rest});
            break;
        }
      }
    }
    if (hung) kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    close(fds[0]);
    if (ended && !hung && WIFEXITED(status) && WEXITSTATUS(status) == 0) break;
    std::string why =
        hung ? "hung (no progress for " + std::to_string(kCaseTimeout.count()) + " ms)"
        : WIFSIGNALED(status) ? std::string("crashed: ") + strsignal(WTERMSIG(status))
                              : "child exited with code " + std::to_string(WEXITSTATUS(status));
    report.violations.push_back({current, why});
    next = std::max(current + 1, next + 1);
    if (++restarts >= 40) {
      report.violations.push_back({next, "stopped after 40 crashes or hangs"});
      break;
    }
  }
  return report;
}

// One reader under test: the file it reads and how to check one outcome.
struct Reader {
  std::string name;       // e.g. "config" (names the temp folder)
  std::string file_name;  // e.g. "config.json"
  std::string base_text;
  // Checks the reader on `path`, which holds `text`.
  std::function<Outcome(const std::string& path, const std::string& text,
                        const std::set<std::string>& fields)>
      check;
};

void Fuzz(const Reader& reader, int cases) {
  ASSERT_FALSE(reader.base_text.empty());
  const std::string dir =
      ::testing::TempDir() + "config_fuzz_" + reader.name + "_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/" + reader.file_name;
  const auto run_case = [&](int index) {
    const Case c = MakeCase(reader.base_text, kSeed, index);
    WriteText(path, c.text);
    return reader.check(path, c.text, FieldNames(reader.base_text, c.text));
  };
  const auto start = std::chrono::steady_clock::now();
  const RunReport report = RunIsolated(cases, path.size(), run_case);
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();

  std::cout << "[ fuzz ] " << reader.file_name << ": " << cases << " cases (seed " << kSeed
            << ") in " << seconds << " s: " << report.accepted << " accepted, " << report.rejected
            << " rejected, " << report.violations.size() << " violations\n";
  std::vector<std::pair<int, std::string>> kinds;
  for (const auto& [kind, count] : report.error_kinds) kinds.emplace_back(count, kind);
  std::sort(kinds.rbegin(), kinds.rend());
  for (size_t i = 0; i < kinds.size() && i < 12; ++i) {
    std::cout << "[ fuzz ]   " << kinds[i].first << " x \"" << Preview(kinds[i].second, 90)
              << "\"\n";
  }
  // One failure per kind of violation (its first case), with the count.
  std::map<std::string, std::vector<const CaseReport*>> by_kind;
  for (const CaseReport& violation : report.violations) {
    by_kind[ErrorKind(violation.what, 0).substr(0, 60)].push_back(&violation);
  }
  for (const auto& [kind, reports] : by_kind) {
    const CaseReport& violation = *reports.front();
    const std::string count = std::to_string(reports.size()) + " case(s) like this; first: ";
    if (violation.index < 0 || violation.index >= cases) {
      ADD_FAILURE() << reader.file_name << ": " << count << violation.what;
      continue;
    }
    const Case c = MakeCase(reader.base_text, kSeed, violation.index);
    const std::string saved = dir + "/case_" + std::to_string(violation.index) + ".json";
    WriteText(saved, c.text);
    ADD_FAILURE() << reader.file_name << ": " << count << "case " << violation.index << " ("
                  << c.what << "): " << violation.what << "\n  input saved to " << saved
                  << "\n  starts: " << Preview(c.text);
  }
}

// ----------------------------------------------------------------- tests --

// A small valid tokenizer.json in Hugging Face's layout: a few tokens.
Json SmallTokenizerJson() {
  Json vocab = Json::object();
  const char* tokens[] = {"[PAD]",  "[UNK]",        "[CLS]", "[SEP]", "[MASK]", "hello",
                          "world",  "##s",          ",",     "!",     "un",     "##aff",
                          "##able", "\xe6\x97\xa5", "a",     "x",     "##x"};
  for (int i = 0; i < static_cast<int>(std::size(tokens)); ++i) vocab[tokens[i]] = i;
  Json added = Json::array();
  for (int i = 0; i < 5; ++i) {
    added.push_back({{"id", i},
                     {"content", tokens[i]},
                     {"single_word", false},
                     {"lstrip", false},
                     {"rstrip", false},
                     {"normalized", false},
                     {"special", true}});
  }
  return {{"version", "1.0"},
          {"truncation", nullptr},
          {"padding", nullptr},
          {"added_tokens", added},
          {"normalizer",
           {{"type", "BertNormalizer"},
            {"clean_text", true},
            {"handle_chinese_chars", true},
            {"strip_accents", nullptr},
            {"lowercase", true}}},
          {"pre_tokenizer", {{"type", "BertPreTokenizer"}}},
          {"post_processor",
           {{"type", "TemplateProcessing"},
            {"single", Json::array({{{"SpecialToken", {{"id", "[CLS]"}, {"type_id", 0}}}},
                                    {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
                                    {{"SpecialToken", {{"id", "[SEP]"}, {"type_id", 0}}}}})},
            {"special_tokens",
             {{"[CLS]", {{"id", "[CLS]"}, {"ids", {2}}, {"tokens", {"[CLS]"}}}},
              {"[SEP]", {{"id", "[SEP]"}, {"ids", {3}}, {"tokens", {"[SEP]"}}}}}}}},
          {"decoder", {{"type", "WordPiece"}, {"prefix", "##"}, {"cleanup", true}}},
          {"model",
           {{"type", "WordPiece"},
            {"unk_token", "[UNK]"},
            {"continuing_subword_prefix", "##"},
            {"max_input_chars_per_word", 100},
            {"vocab", vocab}}}};
}

template <typename T>
Outcome Judge(const absl::StatusOr<T>& result, const std::string& source,
              const std::set<std::string>& fields,
              const std::function<std::string(const T&)>& sane) {
  Outcome outcome;
  outcome.accepted = result.ok();
  if (result.ok()) {
    const std::string bad = sane(*result);
    if (!bad.empty()) outcome.violation = "accepted with insane values: " + bad;
  } else {
    outcome.error = std::string(result.status().message());
    outcome.violation = CheckError(result.status(), source, fields);
  }
  return outcome;
}

// Both the file reader and, when the text is JSON, the in-memory parser.
template <typename T>
Outcome JudgeBoth(const absl::StatusOr<T>& loaded, const std::string& path, const std::string& text,
                  const std::set<std::string>& fields,
                  const std::function<absl::StatusOr<T>(const Json&)>& parse,
                  const std::function<std::string(const T&)>& sane) {
  Outcome outcome = Judge<T>(loaded, path, fields, sane);
  const Json doc = Json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (outcome.violation.empty() && !doc.is_discarded()) {
    const Outcome parsed = Judge<T>(parse(doc), "in-memory", fields, sane);
    if (!parsed.violation.empty()) outcome.violation = "Parse*(json): " + parsed.violation;
  }
  return outcome;
}

TEST(ConfigFuzzTest, EncoderConfigMutationsGiveASaneConfigOrANamedError) {
  Reader reader{
      "encoder", "config.json", ReadText(kSourceDir + "/models/minilm/config.json"),
      [](const std::string& path, const std::string& text, const std::set<std::string>& fields) {
        return JudgeBoth<EncoderConfig>(
            LoadEncoderConfig(path), path, text, fields,
            [](const Json& doc) { return ParseEncoderConfig(doc, "in-memory"); },
            CheckEncoderConfig);
      }};
  Fuzz(reader, kCasesPerReader);
}

TEST(ConfigFuzzTest, ServingConfigMutationsGiveASaneConfigOrANamedError) {
  Reader reader{
      "serving", "docsparse.json", ReadText(kSourceDir + "/scripts/models/minilm.docsparse.json"),
      [](const std::string& path, const std::string& text, const std::set<std::string>& fields) {
        return JudgeBoth<ServingConfig>(
            LoadServingConfig(path), path, text, fields,
            [](const Json& doc) { return ParseServingConfig(doc, "in-memory"); },
            CheckServingConfig);
      }};
  Fuzz(reader, kCasesPerReader);
}

TEST(ConfigFuzzTest, TokenizerJsonMutationsGiveAWorkingTokenizerOrANamedError) {
  Reader reader{
      "tokenizer", "tokenizer.json", SmallTokenizerJson().dump(2),
      [](const std::string& path, const std::string&, const std::set<std::string>& fields) {
        auto loaded = WordPieceTokenizer::FromTokenizerJson(path);
        Outcome outcome;
        outcome.accepted = loaded.ok();
        if (loaded.ok()) {
          const std::string bad = CheckTokenizer(**loaded);
          if (!bad.empty()) outcome.violation = "loaded but broken: " + bad;
        } else {
          outcome.error = std::string(loaded.status().message());
          outcome.violation = CheckError(loaded.status(), path, fields);
        }
        return outcome;
      }};
  Fuzz(reader, kCasesPerReader);
}

// What the fuzzer found in the tokenizer.json reader, one reproduction per
// bug, isolated like the fuzz cases: each must be refused naming `field` (or
// load into a working tokenizer), not end the process.
void ExpectTokenizerJsonHandled(const std::string& what, const std::string& text,
                                const std::string& field) {
  const std::string dir =
      ::testing::TempDir() + "config_fuzz_regression_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  const std::string path = dir + "/tokenizer.json";
  WriteText(path, text);
  const RunReport report = RunIsolated(1, path.size(), [&](int) {
    Outcome outcome;
    auto loaded = WordPieceTokenizer::FromTokenizerJson(path);
    outcome.accepted = loaded.ok();
    if (loaded.ok()) {
      outcome.violation = CheckTokenizer(**loaded);
    } else {
      outcome.error = std::string(loaded.status().message());
      outcome.violation = CheckError(loaded.status(), path, {field});
    }
    return outcome;
  });
  for (const CaseReport& violation : report.violations) {
    ADD_FAILURE() << "the small tokenizer.json with " << what << " (saved to " << path
                  << "): " << violation.what;
  }
}

TEST(ConfigFuzzTest, TokenizerJsonWithAnOverflowingNumberIsAnError) {
  // nlohmann reports 1e400 as out_of_range.406, not as a parse_error.
  ExpectTokenizerJsonHandled(
      "truncation = {\"max_length\": 1e400}",
      DumpWithRawValue(SmallTokenizerJson(), Json::json_pointer("/truncation"),
                       R"({"max_length": 1e400})"),
      "not valid JSON");
}

TEST(ConfigFuzzTest, TokenizerJsonWithANonStringPostProcessorTypeIsRefusedOrIgnored) {
  Json doc = SmallTokenizerJson();
  doc["post_processor"]["type"] = 5;
  ExpectTokenizerJsonHandled("post_processor.type = 5", doc.dump(), "post_processor.type");
  doc["post_processor"]["type"] = Json::array({"TemplateProcessing"});
  ExpectTokenizerJsonHandled("post_processor.type = [\"TemplateProcessing\"]", doc.dump(),
                             "post_processor.type");
}

TEST(ConfigFuzzTest, TokenizerJsonWithAVocabIdAtInt32MaxIsRefusedOrLoads) {
  Json doc = SmallTokenizerJson();
  doc["model"]["vocab"]["hello"] = 2147483647;  // id + 1 overflows int32
  ExpectTokenizerJsonHandled("model.vocab[\"hello\"] = 2147483647", doc.dump(), "model.vocab");
}

TEST(ConfigFuzzTest, TokenizerJsonWithAHugeSparseVocabIdIsRefusedOrCheap) {
  // 17 tokens, one of them with id 2^31 - 2: the id tables are sized by the
  // largest id (about 24 bytes per id, twice), so this must not load by
  // allocating tens of GB.
  Json doc = SmallTokenizerJson();
  doc["model"]["vocab"]["hello"] = 2147483646;
  ExpectTokenizerJsonHandled("model.vocab[\"hello\"] = 2147483646", doc.dump(), "model.vocab");
}

TEST(ConfigFuzzTest, ServingConfigTemperatureBelowFloatRangeIsAnError) {
  // Accepted as "> 0", but the server computes in float: 1e-300 becomes 0
  // (every classify request then fails "temperature: must be a finite number
  // > 0", blaming the request) and 1e-40 a subnormal (every score NaN).
  for (const char* temperature : {"1e-300", "1e-40"}) {
    Json doc = Json::parse(ReadText(kSourceDir + "/scripts/models/minilm.docsparse.json"));
    const std::string text =
        DumpWithRawValue(doc, Json::json_pointer("/zero_shot/temperature"), temperature);
    const auto parsed = ParseServingConfig(Json::parse(text), "docsparse.json");
    EXPECT_FALSE(parsed.ok()) << "zero_shot.temperature " << temperature << " accepted (as float: "
                              << static_cast<float>(parsed->zero_shot.temperature) << ")";
    if (!parsed.ok()) {
      EXPECT_NE(parsed.status().message().find("zero_shot.temperature"), std::string::npos)
          << parsed.status();
    }
  }
}

}  // namespace
}  // namespace docsparse
