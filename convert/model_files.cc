#include "convert/model_files.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"

namespace docsparse::convert {

std::string JoinPath(std::string_view dir, std::string_view name) {
  std::string path(dir);
  if (!path.empty() && path.back() != '/') path += '/';
  path += name;
  return path;
}

bool IsRegularFile(const std::string& path) {
  struct stat st;
  return ::stat(path.c_str(), &st) == 0 && S_ISREG(st.st_mode);
}

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return absl::NotFoundError(absl::StrCat(path, ": cannot open: ", std::strerror(errno)));
  }
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return std::move(contents).str();
}

absl::StatusOr<std::optional<nlohmann::ordered_json>> ReadJsonFileIfExists(
    const std::string& path) {
  if (!IsRegularFile(path)) return std::optional<nlohmann::ordered_json>();
  absl::StatusOr<std::string> text = ReadTextFile(path);
  if (!text.ok()) return text.status();
  try {
    return std::optional<nlohmann::ordered_json>(nlohmann::ordered_json::parse(*text));
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not valid JSON: ", e.what()));
  }
}

absl::Status WriteFileAtomically(const std::string& path, std::string_view contents) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (!out) {
      return absl::PermissionDeniedError(
          absl::StrCat(tmp, ": cannot create: ", std::strerror(errno)));
    }
    out.write(contents.data(), static_cast<std::streamsize>(contents.size()));
    out.flush();
    if (!out) {
      std::remove(tmp.c_str());
      return absl::DataLossError(absl::StrCat(tmp, ": write failed"));
    }
  }
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    const int error = errno;
    std::remove(tmp.c_str());
    return absl::Status(
        absl::ErrnoToStatusCode(error),
        absl::StrCat(path, ": cannot rename ", tmp, " to it: ", std::strerror(error)));
  }
  return absl::OkStatus();
}

absl::Status CopyFileAtomically(const std::string& from, const std::string& to) {
  absl::StatusOr<std::string> contents = ReadTextFile(from);
  if (!contents.ok()) return contents.status();
  return WriteFileAtomically(to, *contents);
}

}  // namespace docsparse::convert
