// Paths of the committed fixtures and of the model repository that
// scripts/setup fills, for tests.
#ifndef DOCSPARSE_TESTS_COMMON_FIXTURE_PATHS_H_
#define DOCSPARSE_TESTS_COMMON_FIXTURE_PATHS_H_

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

namespace docsparse::testing {

// The checkout the tests were built from, or $DOCSPARSE_SOURCE_DIR where set
// (a copy of the tree on another machine: scripts/device-test).
inline std::string SourcePath(const std::string& relative) {
  const char* moved = std::getenv("DOCSPARSE_SOURCE_DIR");
  return std::string(moved != nullptr && *moved != '\0' ? moved : DOCSPARSE_SOURCE_DIR) + "/" +
         relative;
}

inline std::string FixturePath(const std::string& relative) {
  return SourcePath("tests/fixtures/" + relative);
}

// The default model folder; tests that need it fail (not skip) without it.
inline std::string MiniLmDir() { return SourcePath("models/minilm"); }

inline ::testing::AssertionResult MiniLmPresent() {
  if (std::filesystem::exists(MiniLmDir() + "/model.safetensors")) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << MiniLmDir() << " is missing: run scripts/setup to fetch the default model";
}

// A model repository holding only models/minilm (dense, 512 positions), for
// tests written against that model's behaviour (chunking at 512 tokens,
// HF-exact embeddings); models/minilm-lsg is the repository's default. The
// folder is a symlink, nothing is copied.
inline std::string MiniLmOnlyRepository() {
  namespace fs = std::filesystem;
  // Per process: tests run as separate processes at once.
  const fs::path dir =
      fs::path(::testing::TempDir()) / ("docsparse-minilm-only." + std::to_string(getpid()));
  fs::create_directories(dir);
  // A link left by an earlier run under the same pid may dangle: replace it.
  const fs::path link = dir / "minilm";
  if (fs::is_symlink(fs::symlink_status(link)) && fs::read_symlink(link) != MiniLmDir()) {
    fs::remove(link);
  }
  if (!fs::exists(fs::symlink_status(link))) fs::create_directory_symlink(MiniLmDir(), link);
  return dir.string();
}

inline std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace docsparse::testing

#endif  // DOCSPARSE_TESTS_COMMON_FIXTURE_PATHS_H_
