// A Prometheus text exposition read back for tests. Samples are keyed by
// series in a canonical form — labels sorted by name, "le" bounds as the
// numbers they stand for — so a test names a series as it reads
// (`docsparse_requests_total{model="m",task="embed",code="OK"}`), whatever
// label order and number format the serializer chose (prometheus-cpp sorts
// labels by name and writes bounds without exponents; Prometheus itself
// reads them the same way).
#ifndef DOCSPARSE_TESTS_COMMON_EXPOSITION_H_
#define DOCSPARSE_TESTS_COMMON_EXPOSITION_H_

#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <optional>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

namespace docsparse::testing {

// `name{b="2",a="1"}` -> `name{a="1",b="2"}`; an "le" value is rewritten as
// the shortest text that reads back as the same double, so "3e+09" and
// "3000000000" name the same bucket. Label values keep their escapes.
inline std::string CanonicalSeries(const std::string& series) {
  const size_t open = series.find('{');
  if (open == std::string::npos) return series;
  static const std::regex kLabel(R"re(([a-zA-Z_][a-zA-Z0-9_]*)="((?:[^"\\]|\\.)*)")re");
  std::vector<std::pair<std::string, std::string>> labels;
  const std::string body = series.substr(open + 1, series.rfind('}') - open - 1);
  for (auto it = std::sregex_iterator(body.begin(), body.end(), kLabel);
       it != std::sregex_iterator(); ++it) {
    std::string value = (*it)[2].str();
    if ((*it)[1].str() == "le" && value != "+Inf") {
      char text[32];
      std::snprintf(text, sizeof(text), "%.17g", std::strtod(value.c_str(), nullptr));
      value = text;
    }
    labels.emplace_back((*it)[1].str(), value);
  }
  std::sort(labels.begin(), labels.end());
  std::string out = series.substr(0, open) + "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    if (i > 0) out += ",";
    out += labels[i].first + "=\"" + labels[i].second + "\"";
  }
  return out + "}";
}

// The samples of an exposition by canonical series, checked on the way:
// every line is a comment or a well-formed sample, every sample belongs to
// the family of the TYPE line above it, no family is typed twice, no series
// appears twice.
class Exposition {
 public:
  explicit Exposition(const std::string& text) {
    static const std::regex kSample(
        R"(^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{([a-zA-Z_][a-zA-Z0-9_]*="([^"\\]|\\.)*",?)*\})? (\S+)$)");
    std::istringstream lines(text);
    std::string line;
    std::string family;
    std::set<std::string> typed;
    while (std::getline(lines, line)) {
      if (line.empty() || line.rfind("# HELP ", 0) == 0) continue;
      if (line.rfind("# TYPE ", 0) == 0) {
        family = line.substr(7, line.find(' ', 7) - 7);
        if (!typed.insert(family).second) errors_.push_back("typed twice: " + line);
        types_[family] = line.substr(line.rfind(' ') + 1);
        continue;
      }
      std::smatch match;
      if (!std::regex_match(line, match, kSample)) {
        errors_.push_back("malformed: " + line);
        continue;
      }
      if (match[1].str().rfind(family, 0) != 0) errors_.push_back("outside its family: " + line);
      const std::string series = CanonicalSeries(line.substr(0, line.rfind(' ')));
      if (!samples_.emplace(series, std::strtod(match[5].str().c_str(), nullptr)).second) {
        errors_.push_back("duplicate: " + line);
      }
    }
  }

  const std::vector<std::string>& errors() const { return errors_; }
  const std::map<std::string, std::string>& types() const { return types_; }
  bool Has(const std::string& series) const { return samples_.count(CanonicalSeries(series)) > 0; }
  std::optional<double> Find(const std::string& series) const {
    const auto it = samples_.find(CanonicalSeries(series));
    if (it == samples_.end()) return std::nullopt;
    return it->second;
  }
  // The value of `series`; fails the test (and returns -1) if absent.
  double Value(const std::string& series) const {
    const std::optional<double> value = Find(series);
    if (!value) {
      ADD_FAILURE() << "no series " << series;
      return -1;
    }
    return *value;
  }
  // Whether some sample's name is `name`.
  bool HasName(const std::string& name) const {
    for (const auto& [series, value] : samples_) {
      if (series == name || series.rfind(name + "{", 0) == 0) return true;
    }
    return false;
  }
  // Whether some sample is named `name` and carries every label of
  // `labels` (`model="m",task="embed"`), whatever its other labels.
  bool HasWithLabels(const std::string& name, const std::string& labels) const {
    const std::string wanted = CanonicalSeries(name + "{" + labels + "}");
    const std::string wanted_body = wanted.substr(name.size() + 1, wanted.size() - name.size() - 2);
    std::vector<std::string> parts;
    static const std::regex kLabel(R"re([a-zA-Z_][a-zA-Z0-9_]*="(?:[^"\\]|\\.)*")re");
    for (auto it = std::sregex_iterator(wanted_body.begin(), wanted_body.end(), kLabel);
         it != std::sregex_iterator(); ++it) {
      parts.push_back(it->str());
    }
    for (const auto& [series, value] : samples_) {
      if (series.rfind(name + "{", 0) != 0) continue;
      if (std::all_of(parts.begin(), parts.end(), [&](const std::string& part) {
            return series.find("{" + part) != std::string::npos ||
                   series.find("," + part) != std::string::npos;
          })) {
        return true;
      }
    }
    return false;
  }

 private:
  std::map<std::string, double> samples_;
  std::map<std::string, std::string> types_;
  std::vector<std::string> errors_;
};

}  // namespace docsparse::testing

#endif  // DOCSPARSE_TESTS_COMMON_EXPOSITION_H_
