#include "server/rpc/authorizer.h"

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

constexpr char kWorker[] = "w0rker-token-0123456789";
constexpr char kAdmin[] = "adm1n-token-0123456789";

TEST(AuthorizerTest, RolesAreOrderedAndTokensChecked) {
  auto auth = Authorizer::Parse(
      absl::StrCat("# tokens\n\nworker ", kWorker, "\n  admin\t", kAdmin, "  # ops\n"), "tokens");
  ASSERT_TRUE(auth.ok()) << auth.status();
  const std::string worker = absl::StrCat("Bearer ", kWorker);
  const std::string admin = absl::StrCat("Bearer ", kAdmin);
  EXPECT_TRUE((*auth)->CheckAuthorization(worker, Role::kWorker, "Push").ok());
  EXPECT_TRUE((*auth)->CheckAuthorization(admin, Role::kWorker, "Push").ok());
  EXPECT_TRUE((*auth)->CheckAuthorization(admin, Role::kAdmin, "Checkpoint").ok());
  absl::Status denied = (*auth)->CheckAuthorization(worker, Role::kAdmin, "Checkpoint");
  EXPECT_EQ(denied.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(denied.message(),
              HasSubstr("Checkpoint needs role admin; this token has role worker"));
  absl::Status missing = (*auth)->CheckAuthorization("", Role::kWorker, "Pull");
  EXPECT_EQ(missing.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(missing.message(), HasSubstr("Pull: this server needs a token"));
  EXPECT_EQ((*auth)->CheckAuthorization(kWorker, Role::kWorker, "Pull").code(),
            absl::StatusCode::kUnauthenticated)
      << "no Bearer prefix";
  absl::Status unknown =
      (*auth)->CheckAuthorization("Bearer w0rker-token-0123456780", Role::kWorker, "Pull");
  EXPECT_EQ(unknown.code(), absl::StatusCode::kUnauthenticated);
  EXPECT_THAT(unknown.message(), HasSubstr("unknown token"));
  EXPECT_EQ((*auth)->CheckAuthorization(worker + "x", Role::kWorker, "Pull").code(),
            absl::StatusCode::kUnauthenticated)
      << "a token's prefix is not the token";
}

// Servers' tokens: above admin, and optionally bound to one server id.
TEST(AuthorizerTest, ServerTokensAreAboveAdminAndMayNameTheirServer) {
  constexpr char kAny[] = "any-server-token-0123456789";
  constexpr char kThree[] = "server-3-token-0123456789";
  auto auth = Authorizer::Parse(
      absl::StrCat("admin ", kAdmin, "\nserver ", kAny, "\nserver:3 ", kThree, "\n"), "tokens");
  ASSERT_TRUE(auth.ok()) << auth.status();
  absl::StatusOr<Caller> any =
      (*auth)->Identify(absl::StrCat("Bearer ", kAny), Role::kServer, "Forward");
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ(any->server_id, -1);
  absl::StatusOr<Caller> three =
      (*auth)->Identify(absl::StrCat("Bearer ", kThree), Role::kAdmin, "Checkpoint");
  ASSERT_TRUE(three.ok()) << three.status();
  EXPECT_EQ(three->role, Role::kServer);
  EXPECT_EQ(three->server_id, 3);
  absl::Status admin =
      (*auth)->CheckAuthorization(absl::StrCat("Bearer ", kAdmin), Role::kServer, "Forward");
  EXPECT_EQ(admin.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_THAT(admin.message(), HasSubstr("Forward needs role server; this token has role admin"));
  EXPECT_THAT(Authorizer::Parse(absl::StrCat("server:x ", kAny), "tokens").status().message(),
              HasSubstr("unknown role 'server:x'"));
}

TEST(AuthorizerTest, MalformedFilesNameTheLine) {
  struct Case {
    std::string text;
    std::string message;
  };
  const Case cases[] = {
      {"worker\n", "tokens:1: expected '<role> <token>', got 1 field(s)"},
      {absl::StrCat("# x\nroot ", kWorker, "\n"), "tokens:2: unknown role 'root'"},
      {"worker short\n", "tokens:1: a token of 5 characters"},
      {absl::StrCat("worker ", kWorker, "\nadmin ", kWorker, "\n"),
       "tokens:2: a token listed twice"},
      {"# nothing\n\n", "tokens: no token in it"},
      {absl::StrCat("worker ", kWorker, " extra\n"), "tokens:1: expected '<role> <token>', got 3"},
  };
  for (const Case& c : cases) {
    auto auth = Authorizer::Parse(c.text, "tokens");
    ASSERT_FALSE(auth.ok()) << c.text;
    EXPECT_EQ(auth.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(auth.status().message(), HasSubstr(c.message)) << c.text;
  }
  EXPECT_THAT(Authorizer::FromFile("/nonexistent/tokens").status().message(),
              HasSubstr("--tokens_file=/nonexistent/tokens: cannot read it"));
}

}  // namespace
}  // namespace ps
