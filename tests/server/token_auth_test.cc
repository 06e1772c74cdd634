#include "server/token_auth.h"

#include <gtest/gtest.h>

namespace docsparse {
namespace {

constexpr char kFile[] =
    "# tokens\n"
    "admin-0123456789abcdef\n"
    "  scoped-0123456789abcdef  minilm,minilm-lsg   # two models\n"
    "\n";

std::unique_ptr<TokenAuthenticator> Tokens() {
  auto auth = TokenAuthenticator::Parse(kFile, "tokens.txt");
  EXPECT_TRUE(auth.ok()) << auth.status();
  return auth.ok() ? *std::move(auth) : nullptr;
}

TEST(TokenAuthTest, KnownTokensMayCallTheirModels) {
  const auto auth = Tokens();
  ASSERT_NE(auth, nullptr);
  EXPECT_EQ(auth->token_count(), 2u);
  EXPECT_TRUE(auth->Authorize("Bearer admin-0123456789abcdef", "bart").ok());
  EXPECT_TRUE(auth->Authorize("bearer   scoped-0123456789abcdef ", "minilm-lsg").ok());
  const absl::Status denied = auth->Authorize("Bearer scoped-0123456789abcdef", "bart");
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(denied.message(), "this token may not use model 'bart'");
  EXPECT_TRUE(auth->Authenticate("Bearer scoped-0123456789abcdef").ok());
}

TEST(TokenAuthTest, MissingWrongOrMalformedCredentialsAreUnauthenticated) {
  const auto auth = Tokens();
  ASSERT_NE(auth, nullptr);
  for (const char* authorization :
       {"", "Bearer", "Bearer ", "admin-0123456789abcdef", "Basic admin-0123456789abcdef",
        "Bearer admin-0123456789abcdeF", "Bearer admin-0123456789abcde",
        "Bearer admin-0123456789abcdef0"}) {
    SCOPED_TRACE(authorization);
    EXPECT_EQ(auth->Authorize(authorization, "minilm").code(), absl::StatusCode::kUnauthenticated);
    EXPECT_EQ(auth->Authenticate(authorization).code(), absl::StatusCode::kUnauthenticated);
  }
}

TEST(TokenAuthTest, BadFilesAreNamedByLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"", "t.txt: no tokens"},
      {"# only a comment\n", "t.txt: no tokens"},
      {"short\n", "t.txt:1: a token needs at least 16 characters"},
      {"a-token-long-enough a b\n", "t.txt:1: expected TOKEN [MODEL,...], found 3 fields"},
      {"\na-token-long-enough ,\n", "t.txt:2: an empty model list"},
      {"a-token-long-enough\na-token-long-enough m\n", "t.txt:2: the token appears twice"},
  };
  for (const auto& [text, message] : cases) {
    SCOPED_TRACE(text);
    const auto auth = TokenAuthenticator::Parse(text, "t.txt");
    ASSERT_FALSE(auth.ok());
    EXPECT_EQ(auth.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_EQ(auth.status().message(), message);
  }
  EXPECT_EQ(TokenAuthenticator::Load("/nonexistent/tokens").status().code(),
            absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace docsparse
