// The gRPC channels this project's processes open to each other (workers to
// servers, servers to servers), and the keepalive policy servers accept.
//
// Every such channel pings its peer while it has calls in flight: a peer
// that stops answering (stopped, frozen, or cut off by a partition that
// drops packets) is detected within kKeepaliveTime + kKeepaliveTimeout and
// the connection closed. Without this a connection to a stuck peer lives
// until TCP gives up (many minutes), and with it whatever gRPC still holds
// for it: a zero-copy push's values, and with them the push itself (its
// done waits until gRPC lets go of them), long after its deadline.
#ifndef PS_COMMON_GRPC_CHANNELS_H_
#define PS_COMMON_GRPC_CHANNELS_H_

#include <memory>
#include <string>

#include "absl/time/time.h"
#include "common/metrics.h"
#include "common/peer_security.h"
#include "grpcpp/channel.h"
#include "grpcpp/server_builder.h"

namespace ps {

inline constexpr absl::Duration kKeepaliveTime = absl::Seconds(2);
inline constexpr absl::Duration kKeepaliveTimeout = absl::Seconds(2);

// A channel to a peer at host:port: messages of any size, gRPC's own
// retries off (callers retry with their request ids), keepalive as above,
// TLS and a token as `security` says (null: the process's default, see
// SetDefaultPeerSecurity). Connects lazily.
std::shared_ptr<grpc::Channel> NewPeerChannel(const std::string& address,
                                              const PeerSecurity* security = nullptr);

// The security of the channels NewPeerChannel opens without one of their
// own (common/peer_security.h); at first plaintext without a token. For
// main(), from its flags, before it opens channels.
void SetDefaultPeerSecurity(PeerSecurity security);

// From now on, channels NewPeerChannel opens record their calls in
// `registry` (common/grpc_metrics.h); null: stop. For main() of a process
// that serves metrics, before it opens channels. `registry` must outlive
// every channel opened meanwhile.
void RecordPeerCallsIn(MetricsRegistry* registry);

// Lets clients ping as NewPeerChannel's do (gRPC servers otherwise answer
// pings more frequent than every 5 minutes, without data, with GOAWAY).
void AcceptPeerKeepalive(grpc::ServerBuilder* builder);

}  // namespace ps

#endif  // PS_COMMON_GRPC_CHANNELS_H_
