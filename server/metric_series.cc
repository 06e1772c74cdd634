#include "server/metric_series.h"

#include <charconv>
#include <initializer_list>
#include <limits>

namespace docsparse {
namespace {

// Debian's Abseil has its own string_view, which StrCat takes and
// std::string_view does not convert to: concatenate by hand.
void Append(std::string* out, std::initializer_list<std::string_view> parts) {
  for (std::string_view part : parts) out->append(part.data(), part.size());
}

std::string Concat(std::initializer_list<std::string_view> parts) {
  std::string out;
  Append(&out, parts);
  return out;
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string Label(std::string_view name, std::string_view value) {
  return Concat({name, "=\"", EscapeLabelValue(value), "\""});
}

std::string LabelList(std::initializer_list<std::string_view> labels) {
  std::string out;
  for (std::string_view label : labels) {
    if (label.empty()) continue;
    if (!out.empty()) out += ',';
    Append(&out, {label});
  }
  return out;
}

std::string FormatNumber(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  // Shortest digits that read back to the same double (Go's ParseFloat, which
  // Prometheus uses, accepts the "1e+06" exponent form too).
  char buffer[32];
  const std::to_chars_result result = std::to_chars(buffer, buffer + sizeof(buffer), value);
  return std::string(buffer, result.ptr);
}

void AppendFamilyHeader(std::string_view name, std::string_view type, std::string_view help,
                        std::string* out) {
  std::string escaped;
  for (char c : help) {
    if (c == '\\') {
      escaped += "\\\\";
    } else if (c == '\n') {
      escaped += "\\n";
    } else {
      escaped += c;
    }
  }
  Append(out, {"# HELP ", name, " ", escaped, "\n# TYPE ", name, " ", type, "\n"});
}

namespace {

void AppendName(std::string_view name, std::string_view labels, std::string* out) {
  if (labels.empty()) {
    Append(out, {name, " "});
  } else {
    Append(out, {name, "{", labels, "} "});
  }
}

}  // namespace

void AppendSample(std::string_view name, std::string_view labels, double value, std::string* out) {
  AppendName(name, labels, out);
  Append(out, {FormatNumber(value), "\n"});
}

void AppendSample(std::string_view name, std::string_view labels, uint64_t value,
                  std::string* out) {
  AppendName(name, labels, out);
  Append(out, {std::to_string(value), "\n"});
}

void AppendSample(std::string_view name, std::string_view labels, int64_t value, std::string* out) {
  AppendName(name, labels, out);
  Append(out, {std::to_string(value), "\n"});
}

void AppendHistogram(std::string_view name, std::string_view labels,
                     const HistogramSnapshot& snapshot, std::string* out) {
  const std::string bucket = Concat({name, "_bucket"});
  for (size_t i = 0; i <= snapshot.bounds_size; ++i) {
    const double bound =
        i < snapshot.bounds_size ? snapshot.bounds[i] : std::numeric_limits<double>::infinity();
    AppendSample(bucket, LabelList({labels, Label("le", FormatNumber(bound))}),
                 snapshot.cumulative[i], out);
  }
  AppendSample(Concat({name, "_sum"}), labels, snapshot.sum, out);
  AppendSample(Concat({name, "_count"}), labels, snapshot.count(), out);
}

}  // namespace docsparse
