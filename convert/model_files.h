// Small file helpers for the converters: read JSON/text from a model folder,
// write outputs atomically (temporary file in the same folder, then rename),
// so that an interrupted conversion never leaves a half-written file under
// its final name.
#ifndef DOCSPARSE_CONVERT_MODEL_FILES_H_
#define DOCSPARSE_CONVERT_MODEL_FILES_H_

#include <optional>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "nlohmann/json.hpp"

namespace docsparse::convert {

std::string JoinPath(std::string_view dir, std::string_view name);
bool IsRegularFile(const std::string& path);

// The whole file; NOT_FOUND naming the path when it cannot be opened.
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

// Parses `path` as JSON (ordered_json keeps the file's key order when it is
// written back). nullopt when the file does not exist; INVALID_ARGUMENT
// naming the file when it is not JSON.
absl::StatusOr<std::optional<nlohmann::ordered_json>> ReadJsonFileIfExists(const std::string& path);

// Writes `contents` to `path` via `path`.tmp + rename.
absl::Status WriteFileAtomically(const std::string& path, std::string_view contents);

// Copies `from` to `to` (atomically on the `to` side).
absl::Status CopyFileAtomically(const std::string& from, const std::string& to);

}  // namespace docsparse::convert

#endif  // DOCSPARSE_CONVERT_MODEL_FILES_H_
