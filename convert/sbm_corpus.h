// Text a machine already has (e.g. /usr/share/doc) as calibration data for
// `docsparse-convert sbm`: files (folders walked), tokenized with the model's
// tokenizer and cut into framed chunks of a fixed length.
#ifndef DOCSPARSE_CONVERT_SBM_CORPUS_H_
#define DOCSPARSE_CONVERT_SBM_CORPUS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "model/text/tokenizer.h"

namespace docsparse::convert {

struct CorpusOptions {
  // Files or folders (walked recursively); the files are taken in sorted
  // path order, so a corpus is the same on every run.
  std::vector<std::string> paths;
  // Stop reading after this many bytes of text (the rest is not needed to
  // calibrate a few thousand parameters, and tokenizing it takes time).
  int64_t max_bytes = 4 << 20;
  // Tokens per chunk, special tokens included (>= 8).
  int chunk_tokens = 128;
};

struct TokenChunks {
  std::vector<std::vector<int32_t>> chunks;  // each exactly chunk_tokens, framed
  std::vector<std::string> files;            // the files read, in order
  int64_t bytes = 0;                         // text bytes read
  int skipped = 0;                           // files that were not text
};

// Every regular file under `paths` (a path may be a file), sorted, without
// duplicates. NOT_FOUND naming the path when one does not exist.
absl::StatusOr<std::vector<std::string>> ListCorpusFiles(const std::vector<std::string>& paths);

// Reads text files (valid UTF-8 without NUL bytes; others are skipped and
// counted), tokenizes each, and cuts each file's ids into pieces of
// chunk_tokens minus the frame, dropping a last piece shorter than half.
// INVALID_ARGUMENT when nothing usable is left.
absl::StatusOr<TokenChunks> LoadTokenChunks(const Tokenizer& tokenizer,
                                            const CorpusOptions& options);

}  // namespace docsparse::convert

#endif  // DOCSPARSE_CONVERT_SBM_CORPUS_H_
