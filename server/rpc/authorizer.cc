#include "server/rpc/authorizer.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ps {

namespace {

constexpr size_t kMinToken = 16;
constexpr size_t kMaxToken = 256;

// Equal in time independent of where they differ.
bool SameToken(absl::string_view a, absl::string_view b) {
  if (a.size() != b.size()) return false;
  unsigned char diff = 0;
  for (size_t i = 0; i < a.size(); ++i) diff |= static_cast<unsigned char>(a[i] ^ b[i]);
  return diff == 0;
}

}  // namespace

const char* RoleName(Role role) {
  switch (role) {
    case Role::kWorker:
      return "worker";
    case Role::kAdmin:
      return "admin";
    case Role::kServer:
      return "server";
  }
  return "?";
}

absl::StatusOr<std::unique_ptr<Authorizer>> Authorizer::Parse(absl::string_view text,
                                                              const std::string& source) {
  std::vector<std::pair<std::string, Caller>> tokens;
  int line_number = 0;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    ++line_number;
    const std::string where = absl::StrCat(source, ":", line_number, ": ");
    if (size_t hash = line.find('#'); hash != absl::string_view::npos) line = line.substr(0, hash);
    line = absl::StripAsciiWhitespace(line);
    if (line.empty()) continue;
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, "expected '<role> <token>', got ", fields.size(), " field(s)"));
    }
    Caller caller;
    uint32_t id = 0;
    if (fields[0] == "worker") {
      caller.role = Role::kWorker;
    } else if (fields[0] == "admin") {
      caller.role = Role::kAdmin;
    } else if (fields[0] == "server") {
      caller.role = Role::kServer;
    } else if (absl::StartsWith(fields[0], "server:") &&
               absl::SimpleAtoi(fields[0].substr(7), &id)) {
      caller.role = Role::kServer;
      caller.server_id = id;
    } else {
      return absl::InvalidArgumentError(absl::StrCat(
          where, "unknown role '", fields[0], "'; expected worker, admin, server or server:<id>"));
    }
    const absl::string_view token = fields[1];
    if (token.size() < kMinToken || token.size() > kMaxToken) {
      return absl::InvalidArgumentError(absl::StrCat(where, "a token of ", token.size(),
                                                     " characters; expected ", kMinToken, " to ",
                                                     kMaxToken, " (e.g. openssl rand -hex 32)"));
    }
    for (char c : token) {
      if (!absl::ascii_isgraph(static_cast<unsigned char>(c))) {
        return absl::InvalidArgumentError(
            absl::StrCat(where, "the token has a non-printable character"));
      }
    }
    for (const auto& [known, r] : tokens) {
      if (known == token)
        return absl::InvalidArgumentError(absl::StrCat(where, "a token listed twice"));
    }
    tokens.emplace_back(std::string(token), caller);
  }
  if (tokens.empty()) return absl::InvalidArgumentError(absl::StrCat(source, ": no token in it"));
  return std::unique_ptr<Authorizer>(new Authorizer(std::move(tokens)));
}

absl::StatusOr<std::unique_ptr<Authorizer>> Authorizer::FromFile(const std::string& path) {
  std::ifstream in(path);
  if (!in)
    return absl::InvalidArgumentError(absl::StrCat("--tokens_file=", path, ": cannot read it"));
  std::stringstream text;
  text << in.rdbuf();
  return Parse(text.str(), path);
}

absl::Status Authorizer::Check(const grpc::ServerContextBase& ctx, Role needed,
                               absl::string_view what) const {
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find("authorization");
  const absl::string_view value = it == metadata.end()
                                      ? absl::string_view()
                                      : absl::string_view(it->second.data(), it->second.size());
  return CheckAuthorization(value, needed, what);
}

absl::Status Authorizer::CheckAuthorization(absl::string_view authorization, Role needed,
                                            absl::string_view what) const {
  return Identify(authorization, needed, what).status();
}

absl::StatusOr<Caller> Authorizer::Identify(absl::string_view authorization, Role needed,
                                            absl::string_view what) const {
  if (authorization.empty()) {
    return absl::UnauthenticatedError(
        absl::StrCat(what,
                     ": this server needs a token (metadata 'authorization: Bearer <token>'; "
                     "see --token_file)"));
  }
  if (!absl::ConsumePrefix(&authorization, "Bearer ")) {
    return absl::UnauthenticatedError(
        absl::StrCat(what, ": the authorization metadata is not 'Bearer <token>'"));
  }
  const Caller* caller = nullptr;
  for (const auto& [token, c] : tokens_) {
    if (SameToken(token, authorization)) caller = &c;
  }
  if (caller == nullptr) {
    return absl::UnauthenticatedError(
        absl::StrCat(what, ": unknown token (not in this server's --tokens_file)"));
  }
  if (static_cast<int>(caller->role) < static_cast<int>(needed)) {
    return absl::PermissionDeniedError(absl::StrCat(
        what, " needs role ", RoleName(needed), "; this token has role ", RoleName(caller->role)));
  }
  return *caller;
}

absl::Status AuthorizeServer(const Authorizer* auth, const grpc::ServerContextBase& ctx,
                             uint32_t from_server, absl::string_view what) {
  if (auth != nullptr) {
    const auto& metadata = ctx.client_metadata();
    auto it = metadata.find("authorization");
    const absl::string_view value = it == metadata.end()
                                        ? absl::string_view()
                                        : absl::string_view(it->second.data(), it->second.size());
    absl::StatusOr<Caller> caller = auth->Identify(value, Role::kServer, what);
    if (!caller.ok()) return caller.status();
    if (caller->server_id >= 0 && caller->server_id != static_cast<int64_t>(from_server)) {
      return absl::PermissionDeniedError(absl::StrCat(what, " says it comes from server ",
                                                      from_server, ", but its token is server ",
                                                      caller->server_id, "'s"));
    }
  }
  if (std::shared_ptr<const grpc::AuthContext> context = ctx.auth_context()) {
    for (const grpc::string_ref& name : context->FindPropertyValues("x509_common_name")) {
      absl::string_view cn(name.data(), name.size());
      uint32_t id = 0;
      if (absl::ConsumePrefix(&cn, "ps-server-") && absl::SimpleAtoi(cn, &id) &&
          id != from_server) {
        return absl::PermissionDeniedError(
            absl::StrCat(what, " says it comes from server ", from_server,
                         ", but the client certificate is server ", id, "'s (ps-server-", id, ")"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace ps
