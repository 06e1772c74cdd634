#include "convert/sbm_corpus.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "model/text/unicode_text.h"

namespace docsparse::convert {
namespace fs = std::filesystem;

absl::StatusOr<std::vector<std::string>> ListCorpusFiles(const std::vector<std::string>& paths) {
  std::set<std::string> files;
  for (const std::string& path : paths) {
    std::error_code error;
    const fs::file_status status = fs::status(path, error);
    if (error || !fs::exists(status)) {
      return absl::NotFoundError(absl::StrCat("--corpus: ", path, " does not exist"));
    }
    if (fs::is_regular_file(status)) {
      files.insert(path);
      continue;
    }
    for (fs::recursive_directory_iterator
             it(path, fs::directory_options::skip_permission_denied, error),
         end;
         it != end && !error; it.increment(error)) {
      if (it->is_regular_file(error)) files.insert(it->path().string());
    }
    if (error)
      return absl::InternalError(absl::StrCat("--corpus: walking ", path, ": ", error.message()));
  }
  return std::vector<std::string>(files.begin(), files.end());
}

absl::StatusOr<TokenChunks> LoadTokenChunks(const Tokenizer& tokenizer,
                                            const CorpusOptions& options) {
  if (options.chunk_tokens < 8) {
    return absl::InvalidArgumentError(
        absl::StrCat("chunk tokens: ", options.chunk_tokens, " is below 8"));
  }
  absl::StatusOr<std::vector<std::string>> files = ListCorpusFiles(options.paths);
  if (!files.ok()) return files.status();
  TokenChunks result;
  const size_t frame = tokenizer.FramePrefix().size() + tokenizer.FrameSuffix().size();
  const size_t piece = static_cast<size_t>(options.chunk_tokens) - frame;
  for (const std::string& file : *files) {
    if (result.bytes >= options.max_bytes) break;
    std::ifstream in(file, std::ios::binary);
    std::stringstream buffer;
    buffer << in.rdbuf();
    std::string text = buffer.str();
    if (!in || text.empty() || text.find('\0') != std::string::npos || !ValidateUtf8(text).ok()) {
      ++result.skipped;
      continue;
    }
    if (static_cast<int64_t>(text.size()) > options.max_bytes - result.bytes) {
      // Cut at a character boundary.
      size_t cut = static_cast<size_t>(options.max_bytes - result.bytes);
      while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
      text.resize(cut);
    }
    result.bytes += static_cast<int64_t>(text.size());
    result.files.push_back(file);
    const std::vector<int32_t> ids = tokenizer.Encode(text);
    for (size_t begin = 0; begin < ids.size(); begin += piece) {
      const size_t end = std::min(ids.size(), begin + piece);
      if (end - begin < piece / 2) break;
      std::vector<int32_t> chunk =
          tokenizer.Frame(std::vector<int32_t>(ids.begin() + begin, ids.begin() + end),
                          static_cast<size_t>(options.chunk_tokens));
      // A short last piece is padded with more of the file's start, so every
      // chunk has the same length (one batch, no padding in the teacher).
      for (size_t fill = 0; chunk.size() < static_cast<size_t>(options.chunk_tokens); ++fill) {
        chunk.insert(chunk.end() - static_cast<std::ptrdiff_t>(tokenizer.FrameSuffix().size()),
                     ids[fill % ids.size()]);
      }
      result.chunks.push_back(std::move(chunk));
    }
  }
  if (result.chunks.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--corpus: no text to calibrate on (",
                                                   files->size(), " files, ", result.skipped,
                                                   " not UTF-8 text)"));
  }
  return result;
}

}  // namespace docsparse::convert
