// docsparse-convert: checkpoint converters. `docsparse-convert COMMAND
// [flags]`; `docsparse-convert COMMAND --help` for a command's flags.
#include <cstdio>
#include <cstring>
#include <string>

#include "convert/commands.h"

namespace {

void PrintUsage(std::FILE* out) {
  std::fprintf(out,
               "usage: docsparse-convert COMMAND [flags]\n\n"
               "Converts Hugging Face checkpoints on disk (no network) for docsparse.\n\n"
               "commands:\n");
  for (const docsparse::convert::Command& command : docsparse::convert::kCommands) {
    std::fprintf(out, "  %-6s %s\n", command.name, command.summary);
  }
  std::fprintf(out, "\n'docsparse-convert COMMAND --help' lists a command's flags.\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return 2;
  }
  const std::string name = argv[1];
  if (name == "-h" || name == "--help" || name == "help") {
    PrintUsage(stdout);
    return 0;
  }
  for (const docsparse::convert::Command& command : docsparse::convert::kCommands) {
    if (name == command.name) return command.run(argc - 1, argv + 1);
  }
  std::fprintf(stderr, "docsparse-convert: unknown command \"%s\"\n\n", name.c_str());
  PrintUsage(stderr);
  return 2;
}
