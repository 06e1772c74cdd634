// A small command-line parser for the docsparse-convert subcommands.
//
// Each subcommand owns its flags (Abseil flags are process-global, so one
// command's flags would show up in, and be accepted by, every other). Syntax:
//   --name=value   --name value   --bool-flag   --bool-flag=true|false
// Names may be written with '-' or '_' (--max-length = --max_length); the
// help shows the '-' spelling. "--" ends the flags; the command takes no
// positional arguments. `--help` / `-h` asks for the usage text.
// Errors name the flag: "--max-length: expected an integer, got \"abc\"",
// "unknown flag --max-lenght", "--input is required".
#ifndef DOCSPARSE_CONVERT_FLAG_PARSER_H_
#define DOCSPARSE_CONVERT_FLAG_PARSER_H_

#include <cstdint>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "absl/status/status.h"

namespace docsparse::convert {

class FlagParser {
 public:
  // `usage` is the first line(s) of the help, e.g.
  // "docsparse-convert lsg --input DIR --output DIR --max-length N [flags]".
  explicit FlagParser(std::string usage) : usage_(std::move(usage)) {}

  // Registers a flag bound to `*value`, whose current content is the default
  // shown in the help. `name` uses '-' (e.g. "max-length"). The pointers must
  // outlive Parse().
  void AddString(std::string name, std::string* value, std::string help, bool required = false);
  void AddInt(std::string name, int64_t* value, std::string help, bool required = false);
  void AddBool(std::string name, bool* value, std::string help);

  // Parses argv[first..argc). Returns OK, or INVALID_ARGUMENT naming the
  // flag. Sets help_requested() instead of failing when --help is present.
  absl::Status Parse(int argc, char** argv, int first = 1);

  bool help_requested() const { return help_requested_; }
  // Whether the flag was given on the command line (not just defaulted).
  bool WasSet(const std::string& name) const;
  // The usage line and one line per flag, with defaults.
  std::string Help() const;

 private:
  using Target = std::variant<std::string*, int64_t*, bool*>;
  struct Flag {
    std::string name;  // '-' spelling
    Target target;
    std::string help;
    std::string default_text;
    bool required = false;
    bool set = false;
  };

  Flag* Find(const std::string& name);
  absl::Status Assign(Flag& flag, const std::string& value);

  std::string usage_;
  std::vector<Flag> flags_;
  bool help_requested_ = false;
};

}  // namespace docsparse::convert

#endif  // DOCSPARSE_CONVERT_FLAG_PARSER_H_
