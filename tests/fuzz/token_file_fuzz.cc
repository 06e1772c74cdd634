// libFuzzer target for the token file parser and the bearer-token check
// (server/token_auth): any file text is either refused INVALID_ARGUMENT
// naming its line, or accepted with tokens that then authenticate exactly
// themselves; any authorization value is OK, UNAUTHENTICATED or
// PERMISSION_DENIED, never a crash.
//
// Not part of the CMake build (it needs clang): `scripts/fuzz [SECONDS]` builds
// and runs every target from its seeds in tests/fuzz/*_seeds/. By hand:
//   clang++ -std=c++17 -g -O1 -fsanitize=fuzzer,address,undefined -I. \
//     tests/fuzz/token_file_fuzz.cc server/token_auth.cc \
//     $(pkg-config --libs absl_status absl_statusor absl_strings) -o /tmp/token_file_fuzz
//   mkdir -p /tmp/token_corpus && cp tests/fuzz/token_file_seeds/* /tmp/token_corpus/
//   /tmp/token_file_fuzz -max_len=2048 -max_total_time=300 /tmp/token_corpus
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string>

#include "server/token_auth.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string text(reinterpret_cast<const char*>(data), size);
  // The file's text, and (after the last NUL, if any) an authorization value.
  const size_t split = text.rfind('\0');
  const std::string file = split == std::string::npos ? text : text.substr(0, split);
  const std::string authorization = split == std::string::npos ? "" : text.substr(split + 1);
  auto auth = docsparse::TokenAuthenticator::Parse(file, "tokens");
  if (!auth.ok()) {
    if (auth.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    if (std::string(auth.status().message()).rfind("tokens", 0) != 0) std::abort();
    return 0;
  }
  if ((*auth)->token_count() == 0) std::abort();
  const absl::Status checked = (*auth)->Authorize(authorization, "model");
  if (!checked.ok() && checked.code() != absl::StatusCode::kUnauthenticated &&
      checked.code() != absl::StatusCode::kPermissionDenied) {
    std::abort();
  }
  // Authentication agrees with authorization on who is known.
  const bool known = (*auth)->Authenticate(authorization).ok();
  if (known != (checked.code() != absl::StatusCode::kUnauthenticated)) std::abort();
  return 0;
}
