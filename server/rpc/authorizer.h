// Token authentication with roles, checked by every RPC handler.
//
// A tokens file gives each accepted token a role, one per line:
//     worker    3f9c2a...      # comment
//     admin     b71e04...
//     server    9d02c7...      # any server of the cluster
//     server:3  51aa0e...      # server 3 only
// Blank lines and #-comments are skipped. A token is 16 to 256 printable
// characters without spaces. Roles are ordered: admin may do everything a
// worker may, and server everything an admin may. Workers' calls
// (ParameterServer) need worker; checkpoints (PsAdmin) need admin; the
// servers' calls to each other along a chain (PsReplication) need server,
// which an operator's admin token does not have. A token bound to one
// server ("server:<id>") may only speak for that server (Forward checks
// from_server against it); with mutual TLS, a client certificate whose
// common name is "ps-server-<id>" binds the call the same way.
//
// A call carries its token as metadata `authorization: Bearer <token>`
// (common/grpc_channels.h adds it). Errors: UNAUTHENTICATED when the token
// is missing or unknown, PERMISSION_DENIED when its role is too low.
// Without a tokens file every call is allowed. Thread-safe (immutable).
#ifndef PS_SERVER_RPC_AUTHORIZER_H_
#define PS_SERVER_RPC_AUTHORIZER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"

namespace ps {

enum class Role { kWorker = 1, kAdmin = 2, kServer = 3 };

const char* RoleName(Role role);

// Who made a call, as far as its token says.
struct Caller {
  Role role = Role::kServer;  // without tokens, every call is allowed
  int64_t server_id = -1;     // a token bound to one server: its id; -1: none
};

class Authorizer {
 public:
  // Parses a tokens file's text; `source` names it in errors, which give
  // the line: INVALID_ARGUMENT for an unknown role, a malformed or short
  // token, a token listed twice, or no token at all.
  static absl::StatusOr<std::unique_ptr<Authorizer>> Parse(absl::string_view text,
                                                           const std::string& source);
  static absl::StatusOr<std::unique_ptr<Authorizer>> FromFile(const std::string& path);

  // OK when the call's token has at least `needed`; `what` names the call
  // in errors ("Push", "Checkpoint").
  absl::Status Check(const grpc::ServerContextBase& ctx, Role needed, absl::string_view what) const;
  // The same, from the metadata value ("" when absent).
  absl::Status CheckAuthorization(absl::string_view authorization, Role needed,
                                  absl::string_view what) const;
  // As CheckAuthorization, and who the caller is.
  absl::StatusOr<Caller> Identify(absl::string_view authorization, Role needed,
                                  absl::string_view what) const;

 private:
  explicit Authorizer(std::vector<std::pair<std::string, Caller>> tokens)
      : tokens_(std::move(tokens)) {}
  std::vector<std::pair<std::string, Caller>> tokens_;
};

// A chain call (PsReplication.Forward) speaks for `from_server`: OK when
// the call's token (null authorizer: none needed) has role server and, if
// bound to one server, is that server's; and when the client certificate,
// if its common name is "ps-server-<id>", names that server. Errors:
// UNAUTHENTICATED, PERMISSION_DENIED (an admin's or worker's token; another
// server's token or certificate), naming what was found.
absl::Status AuthorizeServer(const Authorizer* auth, const grpc::ServerContextBase& ctx,
                             uint32_t from_server, absl::string_view what);

// Check with a null authorizer allowing everything.
inline absl::Status Authorize(const Authorizer* auth, const grpc::ServerContextBase& ctx,
                              Role needed, absl::string_view what) {
  return auth == nullptr ? absl::OkStatus() : auth->Check(ctx, needed, what);
}

}  // namespace ps

#endif  // PS_SERVER_RPC_AUTHORIZER_H_
