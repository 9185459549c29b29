#include "common/connection_flags.h"

#include <utility>

#include "absl/flags/flag.h"
#include "common/grpc_channels.h"

ABSL_FLAG(std::string, etcd, "",
          "replicated cluster: etcd's client endpoint (host:port), where membership and the ring "
          "live. Without it the cluster is static (--servers)");
ABSL_FLAG(std::string, cluster, "default", "with --etcd: the cluster's name (its etcd prefix)");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA bundle: verify the peers' certificates with it (enables TLS; a server also "
          "requires and verifies its clients' certificates: mutual TLS)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain of this process (a server's: required for TLS; a client's: "
          "presented to servers that require client certificates)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, token_file, "",
          "file holding this process's token, sent with every call (docs/ops/security.md)");

namespace ps {

ConnectionFlags GetConnectionFlags() {
  ConnectionFlags flags;
  flags.etcd = absl::GetFlag(FLAGS_etcd);
  flags.cluster = absl::GetFlag(FLAGS_cluster);
  flags.tls = {absl::GetFlag(FLAGS_tls_ca), absl::GetFlag(FLAGS_tls_cert),
               absl::GetFlag(FLAGS_tls_key)};
  flags.token_file = absl::GetFlag(FLAGS_token_file);
  return flags;
}

absl::Status SetPeerSecurityFromFlags(const ConnectionFlags& flags) {
  absl::StatusOr<PeerSecurity> peer = PeerSecurityFromFiles(flags.tls, flags.token_file);
  if (!peer.ok()) return peer.status();
  SetDefaultPeerSecurity(*std::move(peer));
  return absl::OkStatus();
}

}  // namespace ps
