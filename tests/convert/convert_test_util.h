// Helpers shared by the converter tests: temporary folders, running the
// docsparse-convert binary, reading tensors back.
#ifndef DOCSPARSE_TESTS_CONVERT_CONVERT_TEST_UTIL_H_
#define DOCSPARSE_TESTS_CONVERT_CONVERT_TEST_UTIL_H_

#include <gtest/gtest.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <string>

#include "tests/common/fixture_paths.h"

namespace docsparse::testing {

// A fresh folder under the system temp dir, removed with the object.
class TempDir {
 public:
  TempDir() {
    std::string pattern =
        (std::filesystem::temp_directory_path() / "docsparse-convert-test-XXXXXX").string();
    path_ = ::mkdtemp(pattern.data()) != nullptr ? pattern : "";
  }
  ~TempDir() {
    std::error_code ignored;
    if (!path_.empty()) std::filesystem::remove_all(path_, ignored);
  }
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::string& path() const { return path_; }
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

inline std::string LsgFixture(const std::string& relative) {
  return FixturePath("lsg_converter/" + relative);
}

inline std::string ConvertBinary() {
  return std::string(DOCSPARSE_BINARY_DIR) + "/convert/docsparse-convert";
}

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

// Runs `command` through the shell, capturing stdout and stderr.
inline CommandResult RunCommand(const std::string& command) {
  CommandResult result;
  FILE* pipe = ::popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  char buffer[4096];
  size_t n;
  while ((n = std::fread(buffer, 1, sizeof(buffer), pipe)) > 0) result.output.append(buffer, n);
  const int status = ::pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

}  // namespace docsparse::testing

#endif  // DOCSPARSE_TESTS_CONVERT_CONVERT_TEST_UTIL_H_
