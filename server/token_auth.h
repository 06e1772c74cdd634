// Bearer-token authentication for every front end (gRPC DocumentService and
// KServe, the HTTP JSON API): a token file names the tokens that may call
// the server and, optionally, the models each may call.
//
// Token file (--auth_token_file): one token a line, then optionally the
// models it may use, comma-separated; '#' starts a comment.
//
//   s3cr3t-admin                   # every model
//   t0ken-for-minilm  minilm,minilm-lsg
//
// Clients send `authorization: Bearer TOKEN` (gRPC metadata or HTTP header).
// A missing or unknown token is UNAUTHENTICATED; a known token naming a model
// outside its list is PERMISSION_DENIED. Tokens are compared in constant time.
#ifndef DOCSPARSE_SERVER_TOKEN_AUTH_H_
#define DOCSPARSE_SERVER_TOKEN_AUTH_H_

#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace docsparse {

class TokenAuthenticator {
 public:
  // The tokens of a token file's text; INVALID_ARGUMENT naming the line for
  // a malformed one. `source` names the file in messages.
  static absl::StatusOr<std::unique_ptr<TokenAuthenticator>> Parse(absl::string_view text,
                                                                   absl::string_view source);
  // Reads and parses the file.
  static absl::StatusOr<std::unique_ptr<TokenAuthenticator>> Load(const std::string& path);

  // Whether `authorization` (the header's or metadata's value, "Bearer
  // TOKEN") may call at all: OK or UNAUTHENTICATED.
  absl::Status Authenticate(absl::string_view authorization) const;
  // Whether it may call `model` (the served model's name): OK,
  // UNAUTHENTICATED or PERMISSION_DENIED.
  absl::Status Authorize(absl::string_view authorization, const std::string& model) const;

  size_t token_count() const { return grants_.size(); }

 private:
  struct Grant {
    std::string token;
    std::set<std::string> models;  // empty: every model
  };
  TokenAuthenticator() = default;
  // The grant of the token `authorization` carries, or null.
  const Grant* Find(absl::string_view authorization) const;

  std::vector<Grant> grants_;
};

}  // namespace docsparse

#endif  // DOCSPARSE_SERVER_TOKEN_AUTH_H_
