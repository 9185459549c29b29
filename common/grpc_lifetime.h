// gRPC's lifetime in a process that makes gRPC calls.
#ifndef PS_COMMON_GRPC_LIFETIME_H_
#define PS_COMMON_GRPC_LIFETIME_H_

namespace ps {

// Call once at the top of main() of a process that makes gRPC callback
// calls (clients). Keeps gRPC, and the completion queue that runs the
// callback API's completions, alive until the process exits.
//
// Why: in Debian's gRPC 1.51 that queue is shared by the channels that made
// callback calls and torn down when the last of them is destroyed. Clients
// were seen to abort right after their work was done, while main destroyed
// its last objects ("assertion failed: prior > 0" in grpc_cq_internal_unref,
// on the queue's thread): exit status and buffered output lost. A channel
// that never goes away keeps the queue from being torn down.
void KeepGrpcUntilExit();

}  // namespace ps

#endif  // PS_COMMON_GRPC_LIFETIME_H_
