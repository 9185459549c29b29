// The flags every binary that talks to a cluster shares (ps_server,
// ps_worker, ps_admin): where the cluster is (--etcd, --cluster) and how to
// authenticate (--tls_ca, --tls_cert, --tls_key, --token_file). Defined once
// here, for main() files only: libraries take the ConnectionFlags struct.
//
// Thread-safe after absl::ParseCommandLine (it only reads flags).
#ifndef PS_COMMON_CONNECTION_FLAGS_H_
#define PS_COMMON_CONNECTION_FLAGS_H_

#include <string>

#include "absl/status/status.h"
#include "common/peer_security.h"

namespace ps {

struct ConnectionFlags {
  std::string etcd;     // etcd's client endpoint ("": a static cluster)
  std::string cluster;  // the cluster's name, its etcd prefix
  TlsFiles tls;
  std::string token_file;  // this process's token ("": none)
};

// The flags' values; call after absl::ParseCommandLine.
ConnectionFlags GetConnectionFlags();

// Sets the process's default security for its outgoing channels
// (common/grpc_channels.h) from the TLS and token flags. Errors: those of
// PeerSecurityFromFiles, naming the file that could not be read.
absl::Status SetPeerSecurityFromFlags(const ConnectionFlags& flags);

}  // namespace ps

#endif  // PS_COMMON_CONNECTION_FLAGS_H_
