#include "server/token_auth.h"

#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace docsparse {
namespace {

// Equal without an early exit on the first difference: how long a
// comparison takes does not tell an attacker how much of a token was right.
bool ConstantTimeEqual(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    difference |= static_cast<unsigned char>(a[i] ^ b[i]);
  }
  return difference == 0;
}

absl::Status Unauthenticated(absl::string_view why) {
  return absl::UnauthenticatedError(
      absl::StrCat(why,
                   "; send \"authorization: Bearer TOKEN\" with a token of the server's "
                   "--auth_token_file"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<TokenAuthenticator>> TokenAuthenticator::Parse(
    absl::string_view text, absl::string_view source) {
  std::unique_ptr<TokenAuthenticator> auth(new TokenAuthenticator());
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    if (const size_t hash = line.find('#'); hash != absl::string_view::npos) {
      line = line.substr(0, hash);
    }
    const std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (fields.empty()) continue;
    const auto where = [&] { return absl::StrCat(source, ":", line_number, ": "); };
    if (fields.size() > 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), "expected TOKEN [MODEL,...], found ", fields.size(), " fields"));
    }
    Grant grant;
    grant.token = std::string(fields[0]);
    if (grant.token.size() < 16) {
      return absl::InvalidArgumentError(
          absl::StrCat(where(), "a token needs at least 16 characters"));
    }
    for (const Grant& other : auth->grants_) {
      if (other.token == grant.token) {
        return absl::InvalidArgumentError(absl::StrCat(where(), "the token appears twice"));
      }
    }
    if (fields.size() == 2) {
      for (absl::string_view model : absl::StrSplit(fields[1], ',', absl::SkipEmpty())) {
        grant.models.insert(std::string(model));
      }
      if (grant.models.empty()) {
        return absl::InvalidArgumentError(absl::StrCat(where(), "an empty model list"));
      }
    }
    auth->grants_.push_back(std::move(grant));
  }
  if (auth->grants_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": no tokens"));
  }
  return auth;
}

absl::StatusOr<std::unique_ptr<TokenAuthenticator>> TokenAuthenticator::Load(
    const std::string& path) {
  std::ifstream file(path);
  if (!file) return absl::NotFoundError(absl::StrCat("--auth_token_file: cannot read ", path));
  std::stringstream text;
  text << file.rdbuf();
  return Parse(text.str(), path);
}

const TokenAuthenticator::Grant* TokenAuthenticator::Find(absl::string_view authorization) const {
  authorization = absl::StripAsciiWhitespace(authorization);
  constexpr absl::string_view kBearer = "bearer ";
  if (authorization.size() <= kBearer.size() ||
      !absl::EqualsIgnoreCase(authorization.substr(0, kBearer.size()), kBearer)) {
    return nullptr;
  }
  const absl::string_view token = absl::StripAsciiWhitespace(authorization.substr(kBearer.size()));
  const Grant* found = nullptr;
  // Every grant is compared, found or not.
  for (const Grant& grant : grants_) {
    if (ConstantTimeEqual(grant.token, token)) found = &grant;
  }
  return found;
}

absl::Status TokenAuthenticator::Authenticate(absl::string_view authorization) const {
  if (authorization.empty()) return Unauthenticated("no credentials");
  if (Find(authorization) == nullptr) return Unauthenticated("unknown or malformed bearer token");
  return absl::OkStatus();
}

absl::Status TokenAuthenticator::Authorize(absl::string_view authorization,
                                           const std::string& model) const {
  if (authorization.empty()) return Unauthenticated("no credentials");
  const Grant* grant = Find(authorization);
  if (grant == nullptr) return Unauthenticated("unknown or malformed bearer token");
  if (!grant->models.empty() && grant->models.count(model) == 0) {
    return absl::PermissionDeniedError(absl::StrCat("this token may not use model '", model, "'"));
  }
  return absl::OkStatus();
}

}  // namespace docsparse
