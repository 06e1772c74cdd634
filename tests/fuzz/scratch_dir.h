// A fuzz target's own temporary folder, for parsers that read files: one per
// process (libFuzzer's -jobs run several processes at once), removed at exit.
#ifndef DOCSPARSE_TESTS_FUZZ_SCRATCH_DIR_H_
#define DOCSPARSE_TESTS_FUZZ_SCRATCH_DIR_H_

#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>

namespace docsparse {

// $TMPDIR/docsparse-TARGET-fuzz.PID, made on the first call.
inline const std::filesystem::path& FuzzScratchDir(const char* target) {
  namespace fs = std::filesystem;
  static const fs::path* dir = [target] {
    auto* path = new fs::path(fs::temp_directory_path() / (std::string("docsparse-") + target +
                                                           "-fuzz." + std::to_string(getpid())));
    fs::create_directories(*path);
    std::atexit([] { fs::remove_all(*dir); });
    return path;
  }();
  return *dir;
}

}  // namespace docsparse

#endif  // DOCSPARSE_TESTS_FUZZ_SCRATCH_DIR_H_
