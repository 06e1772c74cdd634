// Seeded mutation fuzzing of the files a loader reads, shared by fuzz tests:
// byte mutations (bit flips, truncation, erasure, inserted JSON tokens,
// duplicated ranges) and, for JSON, structural ones (key deletion, values of
// every type and boundary, raw number and string texts no serializer writes,
// deep nesting); an oracle for refusals (INVALID_ARGUMENT naming the file and
// a field); and a runner that executes cases in forked children with a
// capped address space, so that a crash, a runaway allocation or a hang
// fails the test naming the case. The approach of
// tests/model/checkpoint/config_fuzz_test.cc, in a header.
#ifndef DOCSPARSE_TESTS_COMMON_FILE_MUTATION_FUZZ_H_
#define DOCSPARSE_TESTS_COMMON_FILE_MUTATION_FUZZ_H_

#include <poll.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <iostream>
#include <limits>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "nlohmann/json.hpp"

namespace docsparse::testing::fuzz {

using Json = nlohmann::json;

// No progress for this long is a hang (a case takes milliseconds).
constexpr std::chrono::milliseconds kCaseTimeout(5000);

inline std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

inline void WriteText(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary | std::ios::trunc) << text;
}

inline std::string Preview(std::string_view text, size_t limit = 160) {
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
  return text.size() > limit ? out + "...(" + std::to_string(text.size()) + " bytes)" : out;
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

// Values a field may be replaced with: every JSON type, range boundaries,
// and strings tokenizer files use.
inline const std::vector<Json>& InterestingValues() {
  static const std::vector<Json> values = [] {
    std::vector<Json> v = {nullptr,
                           true,
                           false,
                           Json::array(),
                           Json::object(),
                           0,
                           1,
                           2,
                           3,
                           -1,
                           255,
                           256,
                           4000,
                           65535,
                           16777215,
                           16777216,
                           2147483647,
                           int64_t{2147483648},
                           int64_t{-2147483649},
                           std::numeric_limits<int64_t>::max(),
                           std::numeric_limits<uint64_t>::max(),
                           0.5,
                           -0.0,
                           1e308,
                           "",
                           "a",
                           "BPE",
                           "ByteLevel",
                           "RobertaProcessing",
                           "TemplateProcessing",
                           "Sequence",
                           "Unigram",
                           "WordPiece",
                           "<s>",
                           "</s>",
                           "<unk>",
                           "<mask>",
                           "\xc4\xa0",
                           "\xc4\xa0t",
                           "a b",
                           "a  b",
                           "#version: 0.2",
                           " ",
                           std::string(3000, 'x'),
                           std::string("\0", 1),
                           "\xe6\x97\xa5"};
    v.push_back(Json::array({"a", "b"}));
    v.push_back(Json::array({"\xc4\xa0", "t", "x"}));
    v.push_back(Json::array({1, 2}));
    v.push_back(Json{{"id", "<s>"}, {"ids", Json::array({0})}});
    v.push_back(Json{{"SpecialToken", {{"id", "<s>"}}}});
    v.push_back(Json{{"Sequence", {{"id", "A"}}}});
    v.push_back(Json{{"content", "<x>"}});
    v.push_back(Json::array({"<s>", 99999}));
    return v;
  }();
  return values;
}

// Raw JSON texts no serializer writes: overflowing numbers, bad escapes and
// UTF-8, truncated literals.
inline const std::vector<std::string>& RawValueTexts() {
  static const std::vector<std::string> texts = {"1e400",
                                                 "-1e400",
                                                 "123456789012345678901234567890",
                                                 "18446744073709551616",
                                                 "-0",
                                                 "01",
                                                 "NaN",
                                                 "\"\\ud800\"",
                                                 "\"\\udc00x\"",
                                                 "\"\xff\"",
                                                 "\"\xc0\xaf\"",
                                                 "\"\\u0000\"",
                                                 "tru",
                                                 "[1,]",
                                                 "{\"a\"}",
                                                 "\"unterminated"};
  return texts;
}

inline void CollectPointers(const Json& node, const Json::json_pointer& at, int depth,
                            std::vector<Json::json_pointer>* out) {
  out->push_back(at);
  if (depth >= 6) return;
  if (node.is_object()) {
    size_t n = 0;
    for (const auto& [key, value] : node.items()) {
      if (n++ >= 60) break;  // A vocabulary is big: sample its first entries.
      CollectPointers(value, at / key, depth + 1, out);
    }
  } else if (node.is_array()) {
    for (size_t i = 0; i < node.size() && i < 40; ++i) {
      CollectPointers(node[i], at / i, depth + 1, out);
    }
  }
}

inline std::string DumpWithRawValue(Json doc, const Json::json_pointer& at,
                                    const std::string& text) {
  const std::string marker = "\x02MARK";
  doc[at] = marker;
  std::string out = doc.dump();
  const std::string quoted = Json(marker).dump();
  out.replace(out.find(quoted), quoted.size(), text);
  return out;
}

struct Case {
  std::string text;
  std::string what;   // The mutations, for failure messages.
  bool deep = false;  // Deeply nested: only bytes are mutated from then on.
};

inline void MutateBytes(Rng& rng, Case* c) {
  std::string& t = c->text;
  const size_t pos = rng.Below(t.size() + 1);
  switch (rng.Below(5)) {
    case 0:
      if (!t.empty()) {
        const size_t at = rng.Below(t.size());
        t[at] = static_cast<char>(t[at] ^ (1 << rng.Below(8)));
        c->what += "flip bit at " + std::to_string(at) + "; ";
      }
      break;
    case 1:
      t.resize(pos);
      c->what += "truncate to " + std::to_string(pos) + "; ";
      break;
    case 2: {
      const size_t length = 1 + rng.Below(16);
      t.erase(pos, length);
      c->what += "erase " + std::to_string(length) + " at " + std::to_string(pos) + "; ";
      break;
    }
    case 3: {
      static const std::vector<std::string> tokens = {
          "{",           "}",        "[",     "]",  ",",    ":",        "\"",
          "\\",          "null",     "1e400", "-1", "\xff", "\xc0\xaf", std::string("\0", 1),
          "\"\\ud800\"", "{\"a\":1}"};
      const std::string& token = rng.Pick(tokens);
      t.insert(pos, token);
      c->what += "insert '" + Preview(token) + "' at " + std::to_string(pos) + "; ";
      break;
    }
    default: {
      const size_t begin = rng.Below(t.size() + 1);
      const size_t length = std::min(t.size() - begin, 1 + rng.Below(64));
      t.insert(pos, t.substr(begin, length));
      c->what += "duplicate " + std::to_string(length) + " bytes at " + std::to_string(pos) + "; ";
      break;
    }
  }
}

inline bool MutateStructure(Rng& rng, Case* c) {
  Json doc = Json::parse(c->text, nullptr, /*allow_exceptions=*/false);
  if (doc.is_discarded()) return false;
  std::vector<Json::json_pointer> all;
  CollectPointers(doc, Json::json_pointer(), 0, &all);
  const auto& at = rng.Pick(all);
  Json& node = doc[at];
  switch (rng.Below(6)) {
    case 0:  // Delete a key or an element.
      if (node.is_object() && !node.empty()) {
        auto it = node.begin();
        std::advance(it, static_cast<long>(rng.Below(node.size())));
        c->what += "delete " + at.to_string() + "/" + it.key() + "; ";
        node.erase(it);
      } else if (node.is_array() && !node.empty()) {
        const size_t i = rng.Below(node.size());
        c->what += "delete " + at.to_string() + "/" + std::to_string(i) + "; ";
        node.erase(i);
      } else {
        return false;
      }
      break;
    case 1:
    case 2: {  // Replace a value.
      const Json& value = rng.Pick(InterestingValues());
      c->what += "set " + at.to_string() + " = " + Preview(value.dump(), 40) + "; ";
      node = value;
      break;
    }
    case 3:  // Duplicate an array element, or add a key.
      if (node.is_array() && !node.empty()) {
        node.push_back(node[rng.Below(node.size())]);
        c->what += "duplicate an element of " + at.to_string() + "; ";
      } else if (node.is_object()) {
        const std::string key = rng.Pick(std::vector<std::string>{
            "type", "vocab", "merges", "unk_token", "dropout", "add_prefix_space", "sep", "x"});
        node[key] = rng.Pick(InterestingValues());
        c->what += "add " + at.to_string() + "/" + key + "; ";
      } else {
        return false;
      }
      break;
    case 4: {  // A raw value text.
      const std::string& raw = rng.Pick(RawValueTexts());
      c->text = DumpWithRawValue(doc, at, raw);
      c->what += "raw " + at.to_string() + " = " + Preview(raw) + "; ";
      return true;
    }
    default: {  // Deep nesting.
      static const std::vector<int> depths = {64, 1000, 10000, 100000};
      const int depth = rng.Pick(depths);
      c->text = DumpWithRawValue(doc, at, std::string(depth, '[') + std::string(depth, ']'));
      c->deep = true;
      c->what += "nest " + std::to_string(depth) + " at " + at.to_string() + "; ";
      return true;
    }
  }
  c->text = doc.dump();
  return true;
}

// Case `index` of a file: a pure function of the seed and the index.
inline Case MakeCase(const std::string& base, uint64_t seed, int index, bool json) {
  Rng rng(seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(index));
  Case c{base, "", false};
  const size_t rounds = 1 + rng.Below(3);
  for (size_t round = 0; round < rounds; ++round) {
    if (json && !c.deep && rng.Chance(0.7) && MutateStructure(rng, &c)) continue;
    MutateBytes(rng, &c);
  }
  return c;
}

// ---------------------------------------------------------------- oracle --

struct Outcome {
  bool accepted = false;
  std::string error;      // The message, when refused.
  std::string violation;  // What broke the contract; empty when fine.
};

inline void CollectKeys(const Json& node, int depth, std::set<std::string>* keys) {
  if (depth > 8) return;
  if (node.is_object()) {
    size_t n = 0;
    for (const auto& [key, value] : node.items()) {
      if (n++ < 60 || depth > 1) keys->insert(key);
      CollectKeys(value, depth + 1, keys);
    }
  } else if (node.is_array()) {
    for (size_t i = 0; i < node.size() && i < 40; ++i) CollectKeys(node[i], depth + 1, keys);
  }
}

// Field names an error may mention: the keys of the original file and of the
// mutated one (those of at least 3 bytes).
inline std::set<std::string> FieldNames(const std::string& base, const std::string& text) {
  std::set<std::string> names;
  const Json original = Json::parse(base, nullptr, false);
  if (!original.is_discarded()) CollectKeys(original, 0, &names);
  const Json doc = Json::parse(text, nullptr, false);
  if (!doc.is_discarded()) {
    std::set<std::string> mutated;
    CollectKeys(doc, 0, &mutated);
    for (const std::string& key : mutated) {
      if (key.size() >= 3) names.insert(key);
    }
  }
  return names;
}

// A refusal must be INVALID_ARGUMENT naming `file` and, unless the text is
// not JSON, a field.
inline std::string CheckError(const absl::Status& status, const std::string& file,
                              const std::set<std::string>& fields) {
  if (status.code() != absl::StatusCode::kInvalidArgument) {
    return "code " + absl::StatusCodeToString(status.code()) + ": " + std::string(status.message());
  }
  const std::string message(status.message());
  const size_t at = message.find(file + ":");
  if (at == std::string::npos) return "message does not name " + file + ": " + message;
  const std::string rest = message.substr(at + file.size());
  for (const char* general : {"not valid JSON", "top level", "not a SentencePiece model"}) {
    if (rest.find(general) != std::string::npos) return "";
  }
  for (const std::string& field : fields) {
    if (rest.find(field) != std::string::npos) return "";
  }
  return "message names no field: " + message;
}

// --------------------------------------------------------------- runner --

inline void WriteAll(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = write(fd, text.data() + done, text.size() - done);
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

inline std::string OneLine(std::string text) {
  std::replace(text.begin(), text.end(), '\n', ' ');
  return text;
}

struct RunReport {
  int accepted = 0;
  int rejected = 0;
  std::vector<std::pair<int, std::string>> violations;  // (case, what)
};

// Runs run_case(0 .. count-1) in forked children (address space capped at
// +2 GiB); a case that breaks the contract, kills its child or stalls for
// kCaseTimeout is reported, and a new child resumes after it.
inline RunReport RunIsolated(int count, const std::function<Outcome(int)>& run_case) {
  RunReport report;
  int next = 0;
  for (int restarts = 0; next < count && restarts < 40; ++restarts) {
    int fds[2];
    if (pipe(fds) != 0) {
      report.violations.push_back({-1, "pipe failed"});
      return report;
    }
    std::cout.flush();
    const pid_t pid = fork();
    if (pid == 0) {
      close(fds[0]);
      std::ifstream statm("/proc/self/statm");
      uint64_t pages = 0;
      statm >> pages;
      const rlim_t limit = pages * static_cast<uint64_t>(sysconf(_SC_PAGESIZE)) + (rlim_t{2} << 30);
      const rlimit cap{limit, limit};
      setrlimit(RLIMIT_AS, &cap);
      for (int i = next; i < count; ++i) {
        WriteAll(fds[1], "B " + std::to_string(i) + "\n");
        Outcome outcome;
        try {
          outcome = run_case(i);
        } catch (const std::exception& e) {
          outcome.violation = std::string("threw: ") + e.what();
        } catch (...) {
          outcome.violation = "threw a non-std exception";
        }
        std::string line = (outcome.accepted ? "A " : "R ") + std::to_string(i) + "\n";
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
    int current = next;
    bool ended = false, hung = false;
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
      for (size_t newline; (newline = buffer.find('\n')) != std::string::npos;) {
        const std::string line = buffer.substr(0, newline);
        buffer.erase(0, newline + 1);
        if (line == "E") {
          ended = true;
          continue;
        }
        const int index = std::atoi(line.c_str() + 2);
        const size_t space = line.find(' ', 2);
        if (line[0] == 'B') current = index;
        if (line[0] == 'A') ++report.accepted;
        if (line[0] == 'R') ++report.rejected;
        if (line[0] == 'V') report.violations.push_back({index, line.substr(space + 1)});
      }
    }
    if (hung) kill(pid, SIGKILL);
    int status = 0;
    waitpid(pid, &status, 0);
    close(fds[0]);
    if (ended && !hung && WIFEXITED(status) && WEXITSTATUS(status) == 0) return report;
    report.violations.push_back(
        {current, hung ? "hung"
                  : WIFSIGNALED(status)
                      ? std::string("crashed: ") + strsignal(WTERMSIG(status))
                      : "child exited with " + std::to_string(WEXITSTATUS(status))});
    next = current + 1;
  }
  if (next < count) report.violations.push_back({next, "stopped after 40 crashes or hangs"});
  return report;
}

}  // namespace docsparse::testing::fuzz

#endif  // DOCSPARSE_TESTS_COMMON_FILE_MUTATION_FUZZ_H_
