// The gRPC ForwardTransport of a server: the PsReplication service of other
// servers (Forward, EtcdContact), over the peer channels of
// common/grpc_channels (TLS and token as configured).
#ifndef PS_SERVER_RPC_GRPC_FORWARD_TRANSPORT_H_
#define PS_SERVER_RPC_GRPC_FORWARD_TRANSPORT_H_

#include <memory>

#include "server/replication/forward_transport.h"

namespace ps {

// Keeps one channel per address. Thread-safe.
std::unique_ptr<ForwardTransport> NewGrpcForwardTransport();

}  // namespace ps

#endif  // PS_SERVER_RPC_GRPC_FORWARD_TRANSPORT_H_
