// Transport: how PsClient reaches the servers. "Send this request to server
// i and call me back": one attempt per call, asynchronous, no retries, no
// routing (PsClient plans, retries and fans out on top of it).
//
// Implementations: GrpcTransport (worker/client/grpc_transport.h) and, for
// tests, an in-process transport over server cores with fault injection
// (tests/in_memory_transport.h).
//
// Contract of every call:
//  - `done` runs exactly once, on any thread, possibly before the call
//    returns. Its status is the server's (codes of proto/ps.proto), or
//    UNAVAILABLE / DEADLINE_EXCEEDED when the server could not be reached or
//    did not answer by `deadline` (the request may or may not have been
//    applied), or INTERNAL for a reply that does not decode.
//  - Everything the caller passes (requests, value pieces, reply pointers,
//    callbacks' captures) must stay valid until `done` runs; the transport
//    holds no reference to any of it after `done` has started.
//  - Replies are written before `done` runs, and only read by the caller
//    after it.
//  - `deadline` is a time on the client's Clock.
// Implementations are thread-safe: any number of calls may be in flight.
#ifndef PS_WORKER_CLIENT_TRANSPORT_H_
#define PS_WORKER_CLIENT_TRANSPORT_H_

#include <functional>
#include <string>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/raw_message.h"
#include "proto/ps.pb.h"

namespace ps {

class Transport {
 public:
  using Done = std::function<void(absl::Status)>;
  // Receives a pull reply's values (key-major float32 bytes, possibly in
  // several pieces that live only during the call). Its error becomes the
  // call's status.
  using ConsumeValues = std::function<absl::Status(const SegmentedBytes& values)>;

  virtual ~Transport() = default;

  // Number of servers; servers are 0 .. num_servers() - 1.
  virtual int num_servers() const = 0;
  // For messages: "server 1 (127.0.0.1:40239)".
  virtual std::string ServerName(int server) const = 0;

  // A push whose values field is the concatenation of `value_pieces`
  // (`header.values()` must be empty). The pieces may be sent without being
  // copied: they must stay valid and unchanged until `done` runs.
  virtual void Push(int server, const proto::PushRequest& header,
                    absl::Span<const absl::string_view> value_pieces, absl::Time deadline,
                    proto::PushResponse* reply, Done done) = 0;

  // A pull. On success, `reply_header` gets the reply without its values,
  // then consume_values(values) runs, then done(OK or consume's error). On
  // failure consume_values does not run.
  virtual void Pull(int server, const proto::PullRequest& request, absl::Time deadline,
                    proto::PullResponse* reply_header, ConsumeValues consume_values, Done done) = 0;

  // The Downpour step for several pushes (e.g. one per table) to one server
  // in one round trip: `header` carries the pushes without values (each
  // with its values_bytes), `value_pieces` their values concatenated (sent
  // as Push sends them). On success `reply_header` gets the per-push results
  // and consume_values the values read back, concatenated in push order.
  virtual void PushPull(int server, const proto::PushPullRequest& header,
                        absl::Span<const absl::string_view> value_pieces, absl::Time deadline,
                        proto::PushPullResponse* reply_header, ConsumeValues consume_values,
                        Done done) = 0;

  virtual void PushBatch(int server, const proto::PushBatchRequest& request, absl::Time deadline,
                         proto::PushBatchResponse* reply, Done done) = 0;
  virtual void CreateTable(int server, const proto::CreateTableRequest& request,
                           absl::Time deadline, proto::CreateTableResponse* reply, Done done) = 0;
  // wait_for_ready: a server that is not reachable yet is waited for until
  // the deadline instead of failing at once (used at connect).
  virtual void Info(int server, const proto::InfoRequest& request, absl::Time deadline,
                    bool wait_for_ready, proto::InfoResponse* reply, Done done) = 0;
  virtual void Heartbeat(int server, const proto::HeartbeatRequest& request, absl::Time deadline,
                         proto::HeartbeatResponse* reply, Done done) = 0;
  virtual void Stats(int server, const proto::StatsRequest& request, absl::Time deadline,
                     proto::StatsResponse* reply, Done done) = 0;
  // Sandblaster L-BFGS's vector ops on the server's part of a table.
  virtual void VectorOps(int server, const proto::VectorOpsRequest& request, absl::Time deadline,
                         proto::VectorOpsResponse* reply, Done done) = 0;
  // A worker's progress point, for the server's web UI.
  virtual void ReportProgress(int server, const proto::ReportProgressRequest& request,
                              absl::Time deadline, proto::ReportProgressResponse* reply,
                              Done done) = 0;
};

}  // namespace ps

#endif  // PS_WORKER_CLIENT_TRANSPORT_H_
