#include "convert/flag_parser.h"

#include <algorithm>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace docsparse::convert {
namespace {

std::string Dashed(std::string name) {
  std::replace(name.begin(), name.end(), '_', '-');
  return name;
}

}  // namespace

void FlagParser::AddString(std::string name, std::string* value, std::string help, bool required) {
  flags_.push_back({Dashed(std::move(name)), value, std::move(help),
                    value->empty() ? "" : absl::StrCat("\"", *value, "\""), required});
}

void FlagParser::AddInt(std::string name, int64_t* value, std::string help, bool required) {
  flags_.push_back({Dashed(std::move(name)), value, std::move(help),
                    required ? "" : absl::StrCat(*value), required});
}

void FlagParser::AddBool(std::string name, bool* value, std::string help) {
  flags_.push_back(
      {Dashed(std::move(name)), value, std::move(help), *value ? "true" : "false", false});
}

FlagParser::Flag* FlagParser::Find(const std::string& name) {
  const std::string dashed = Dashed(name);
  for (Flag& flag : flags_) {
    if (flag.name == dashed) return &flag;
  }
  return nullptr;
}

bool FlagParser::WasSet(const std::string& name) const {
  const std::string dashed = Dashed(name);
  for (const Flag& flag : flags_) {
    if (flag.name == dashed) return flag.set;
  }
  return false;
}

absl::Status FlagParser::Assign(Flag& flag, const std::string& value) {
  if (auto* s = std::get_if<std::string*>(&flag.target)) {
    **s = value;
  } else if (auto* i = std::get_if<int64_t*>(&flag.target)) {
    if (!absl::SimpleAtoi(value, *i)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--%s: expected an integer, got \"%s\"", flag.name, value));
    }
  } else {
    const std::string lower = absl::AsciiStrToLower(value);
    bool* b = std::get<bool*>(flag.target);
    if (lower == "true" || lower == "1" || lower == "yes") {
      *b = true;
    } else if (lower == "false" || lower == "0" || lower == "no") {
      *b = false;
    } else {
      return absl::InvalidArgumentError(
          absl::StrFormat("--%s: expected true or false, got \"%s\"", flag.name, value));
    }
  }
  flag.set = true;
  return absl::OkStatus();
}

absl::Status FlagParser::Parse(int argc, char** argv, int first) {
  for (int i = first; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") {
      if (i + 1 < argc) {
        return absl::InvalidArgumentError(absl::StrFormat(
            "unexpected argument \"%s\" (this command takes only flags)", argv[i + 1]));
      }
      break;
    }
    if (arg == "-h" || arg == "--help" || arg == "-help") {
      help_requested_ = true;
      continue;
    }
    if (arg.size() < 2 || arg[0] != '-') {
      return absl::InvalidArgumentError(absl::StrFormat(
          "unexpected argument \"%s\" (this command takes only flags; see --help)", arg));
    }
    const size_t start = arg[1] == '-' ? 2 : 1;
    const size_t eq = arg.find('=');
    const std::string name =
        arg.substr(start, eq == std::string::npos ? std::string::npos : eq - start);
    Flag* flag = Find(name);
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrFormat("unknown flag --%s (see --help)", Dashed(name)));
    }
    if (eq != std::string::npos) {
      if (absl::Status s = Assign(*flag, arg.substr(eq + 1)); !s.ok()) return s;
      continue;
    }
    if (std::holds_alternative<bool*>(flag->target)) {
      *std::get<bool*>(flag->target) = true;
      flag->set = true;
      continue;
    }
    if (i + 1 >= argc) {
      return absl::InvalidArgumentError(absl::StrFormat("--%s needs a value", flag->name));
    }
    if (absl::Status s = Assign(*flag, argv[++i]); !s.ok()) return s;
  }
  if (help_requested_) return absl::OkStatus();
  for (const Flag& flag : flags_) {
    if (flag.required && !flag.set) {
      return absl::InvalidArgumentError(
          absl::StrFormat("--%s is required (see --help)", flag.name));
    }
  }
  return absl::OkStatus();
}

std::string FlagParser::Help() const {
  std::string text = absl::StrCat("usage: ", usage_, "\n\nflags ('-' or '_' in names):\n");
  for (const Flag& flag : flags_) {
    std::string left = absl::StrCat("  --", flag.name);
    if (std::holds_alternative<std::string*>(flag.target)) absl::StrAppend(&left, " STR");
    if (std::holds_alternative<int64_t*>(flag.target)) absl::StrAppend(&left, " N");
    if (std::holds_alternative<bool*>(flag.target)) absl::StrAppend(&left, "[=BOOL]");
    std::string right = flag.help;
    if (flag.required) {
      absl::StrAppend(&right, " (required)");
    } else if (!flag.default_text.empty()) {
      absl::StrAppend(&right, " (default ", flag.default_text, ")");
    }
    if (left.size() < 32) {
      absl::StrAppend(&text, left, std::string(32 - left.size(), ' '), right, "\n");
    } else {
      absl::StrAppend(&text, left, "\n", std::string(32, ' '), right, "\n");
    }
  }
  return text;
}

}  // namespace docsparse::convert
