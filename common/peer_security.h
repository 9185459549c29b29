// TLS and tokens for the connections between this project's processes.
//
// TLS: every process names a CA bundle (--tls_ca) to verify its peers, and
// servers their certificate and key (--tls_cert, --tls_key). Servers
// require and verify client certificates (mutual TLS): clients present
// theirs (--tls_cert and --tls_key on workers and ps_admin too), and
// servers connecting to each other present their own, which must therefore
// be valid for client authentication as well. Clients check
// that the server's certificate names the host they dial (an IP address
// needs an IP subjectAltName).
//
// Tokens: see server/authorizer.h; a process reads its own from a file
// (--token_file) so that it never shows on a command line.
#ifndef PS_COMMON_PEER_SECURITY_H_
#define PS_COMMON_PEER_SECURITY_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"

// Declared only: gRPC's headers cost every file that includes this one
// (the client library's users among them) about half a second to compile.
namespace grpc {
class ChannelCredentials;
class ServerCredentials;
}  // namespace grpc

namespace ps {

struct TlsFiles {
  std::string ca;    // PEM CA bundle ("": none)
  std::string cert;  // PEM certificate chain ("": none)
  std::string key;   // PEM private key ("": none)
  bool enabled() const { return !ca.empty() || !cert.empty() || !key.empty(); }
};

// How a process's channels to its peers authenticate.
struct PeerSecurity {
  std::shared_ptr<grpc::ChannelCredentials> credentials;  // null: plaintext
  std::string token;                                      // "": none sent
};

// Client side: needs `ca`; `cert` and `key` both or neither. Errors:
// INVALID_ARGUMENT naming the flag and file that cannot be read or is not
// PEM.
absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> ClientTlsCredentials(
    const TlsFiles& files);
// Server side: needs `cert`, `key` and `ca`; client certificates are
// required and verified against `ca`.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> ServerTlsCredentials(
    const TlsFiles& files);

// A token file's token (surrounding whitespace removed). INVALID_ARGUMENT
// naming the file when it cannot be read or holds no token.
absl::StatusOr<std::string> ReadTokenFile(const std::string& path);

// What main() reads from --tls_ca, --tls_cert, --tls_key and --token_file
// for a process's outgoing channels.
absl::StatusOr<PeerSecurity> PeerSecurityFromFiles(const TlsFiles& files,
                                                   const std::string& token_file);

}  // namespace ps

#endif  // PS_COMMON_PEER_SECURITY_H_
