// The subcommands of docsparse-convert. Adding one: write its Run*Command in
// a new <name>_command.cc (listed in convert/CMakeLists.txt) and add one line
// to kCommands below.
#ifndef DOCSPARSE_CONVERT_COMMANDS_H_
#define DOCSPARSE_CONVERT_COMMANDS_H_

namespace docsparse::convert {

// Each takes the arguments after the command name (argv[0] is the command
// name itself), prints its own --help, and returns the process exit code:
// 0 done, 1 conversion failed, 2 bad command line.
using CommandMain = int (*)(int argc, char** argv);

int RunLsgCommand(int argc, char** argv);
int RunSbmCommand(int argc, char** argv);

struct Command {
  const char* name;
  const char* summary;
  CommandMain run;
};

inline constexpr Command kCommands[] = {
    {"lsg", "extend a BERT/RoBERTa/DistilBERT/BART checkpoint to LSG attention", &RunLsgCommand},
    {"sbm", "attach SBM attention to an encoder and calibrate it on local text", &RunSbmCommand},
};

}  // namespace docsparse::convert

#endif  // DOCSPARSE_CONVERT_COMMANDS_H_
