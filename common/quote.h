// Quoting caller-supplied strings inside error messages. Messages travel back
// as gRPC trailers, which clients cap (8 KiB by default): an echoed 20 KB
// model name would turn a clear NOT_FOUND into a transport error.
#ifndef DOCSPARSE_COMMON_QUOTE_H_
#define DOCSPARSE_COMMON_QUOTE_H_

#include <cstddef>
#include <string>
#include <string_view>

namespace docsparse {

// 'text', or its first `max_bytes` bytes (cut at a UTF-8 boundary) followed
// by "...' (N bytes)".
inline std::string Quote(std::string_view text, size_t max_bytes = 64) {
  if (text.size() <= max_bytes) return "'" + std::string(text) + "'";
  size_t cut = max_bytes;
  // Step back over continuation bytes (10xxxxxx) so no character is split.
  while (cut > 0 && (static_cast<unsigned char>(text[cut]) & 0xC0) == 0x80) --cut;
  return "'" + std::string(text.substr(0, cut)) + "...' (" + std::to_string(text.size()) +
         " bytes)";
}

}  // namespace docsparse

#endif  // DOCSPARSE_COMMON_QUOTE_H_
