// PsClient: a worker's connection to every parameter-server shard.
//
// It routes keys by the same Placement as the servers: the planner
// (worker/client/planner.h) splits each request by owning server and into
// parts of at most max_values_per_request values; the request codec
// (request_codec.h) turns parts into requests that view the caller's memory;
// all parts are sent at once over a Transport (gRPC by default,
// worker/client/grpc_transport.h) by a CallRunner and waited for. Pulled
// values are copied once, into the caller's buffers. Every attempt has a
// deadline; parts that fail with UNAVAILABLE or DEADLINE_EXCEEDED are
// retried with the same request id, so a retried push is applied once.
// Small asynchronous pushes (from several threads, or kept in flight by
// PushAsync) are batched (push_batcher.h). With a lease, a LeaseKeeper
// (lease_keeper.h) renews it by heartbeats from a thread of its own.
//
// Thread-safe: several threads may share one client (the trainer uses one
// per worker). The Transport and Clock must outlive the client.
#ifndef PS_WORKER_CLIENT_PS_CLIENT_H_
#define PS_WORKER_CLIENT_PS_CLIENT_H_

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/clock.h"
#include "common/peer_security.h"
#include "common/placement.h"
#include "proto/ps.pb.h"
#include "worker/client/call_runner.h"
#include "worker/client/key_list_memory.h"
#include "worker/client/lease_keeper.h"
#include "worker/client/param_client.h"
#include "worker/client/planner.h"
#include "worker/client/push_batcher.h"
#include "worker/client/push_report.h"
#include "worker/client/request_codec.h"
#include "worker/client/shard_directory.h"
#include "worker/client/table_cache.h"
#include "worker/client/transport.h"

namespace ps {

struct PsClientOptions {
  std::vector<std::string> servers;  // host:port, in shard order
  // Instead of `servers`: a replicated cluster's shards, each reached at its
  // primary (worker/client/shard_directory.h). Retries (max_attempts,
  // retry_backoff) then also cover a failover.
  std::shared_ptr<const ShardDirectory> directory;
  // TLS and token of the connections (common/peer_security.h); null: the
  // process's default (common/grpc_channels.h), plaintext unless main() set
  // one from its flags.
  std::shared_ptr<const PeerSecurity> security;
  PlacementConfig placement;  // must match the servers' (checked)
  uint32_t worker_id = 0;
  absl::Duration timeout = absl::Seconds(10);          // per attempt
  absl::Duration connect_timeout = absl::Seconds(30);  // waiting for servers at Connect
  int max_attempts = 3;
  absl::Duration retry_backoff = absl::Milliseconds(50);
  uint64_t max_values_per_request = 1 << 20;
  // PushPull sends each server its parts (of every table) in calls of at
  // most this many values, all at once: with several calls in flight the
  // upload of one overlaps the reply of another (measured: 256K values per
  // call moved 1M-float push+pulls 1.34x faster than one 1M call).
  uint64_t pushpull_values_per_call = 1 << 18;
  // A thread whose push or pull of at most spin_max_values values is the
  // only one of this client waiting spins this long for the reply before
  // sleeping (0: sleeps at once): a lone small round trip is shorter than a
  // sleep and a wake-up.
  absl::Duration spin_wait = absl::Microseconds(100);
  uint64_t spin_max_values = 4096;
  // Async pushes of one request of at most this many values are batched:
  // while one PushBatch to a server is in flight, other threads' small
  // pushes to it wait and go out together in the next. 0 disables.
  uint64_t batch_max_values = 16 << 10;
  // Stamped on every pull and push: how stale the parameters a pull returns
  // may be (see proto::Consistency; staleness 0 with BOUNDED is BSP).
  proto::Consistency consistency = proto::CONSISTENCY_ASYNC;
  uint32_t staleness = 0;
  // BSP only: with reduce.size() > 0, every dense push asks for the
  // servers' deterministic reduction of its round (PushRequest.reduce): its
  // gradient is the sum of logical workers [reduce.first, + reduce.size).
  proto::RoundBlock reduce;
  // How values travel (pushed gradients and pulled parameters): float32, or
  // 16-bit floats at half the bytes (proto::ValueEncoding). Tables stay
  // float32 on the servers.
  proto::ValueEncoding value_encoding = proto::VALUES_F32;
  // Key-list caching (PullKeys, PushKeys, PushPullKeys): a key list sent to a
  // server once is sent again as its signature alone, while the client
  // believes the server still holds it (at most key_lists_per_server lists
  // are remembered per server); a server that does not answers so, and the
  // list is sent again at once.
  bool key_list_caching = false;
  size_t key_lists_per_server = 1 << 16;
  // > 0: register with every server and renew the lease by heartbeats every
  // lease / 4, so the servers count this worker in their clock minimum.
  absl::Duration lease = absl::ZeroDuration();
  // Sent in every heartbeat, so that servers refuse a second live process
  // with the same worker_id. 0: a random nonzero value is drawn.
  uint64_t incarnation = 0;
  // Time of deadlines, retry backoff and the heartbeat period. Not owned.
  Clock* clock = Clock::Real();
};

// For a client of a replicated cluster (options->directory set): retries
// that span a failover (the dead server's lease, then the new ring): 40
// attempts, at most kMaxBackoff (call_runner.h) apart, of at most 2.5 s
// each, which stays inside the servers' de-duplication retention (120 s).
// Used by ps_worker --etcd and the Python module.
void SpanFailoverWithRetries(PsClientOptions* options);

// Per-server statistics from the Stats RPC.
struct ServerStats {
  int server = 0;
  proto::StatsResponse stats;
};

// PushPartReport and PushReport: worker/client/push_report.h.

class PsClient final : public ParamClient {
 public:
  // Connects over gRPC to every server and checks with Info that server i is
  // shard i of the same ring. With a lease, registers with every server.
  // Errors: INVALID_ARGUMENT without servers; UNAVAILABLE or
  // DEADLINE_EXCEEDED naming the server that did not answer within
  // connect_timeout; FAILED_PRECONDITION when a server's index, cluster
  // size, slice size or virtual nodes differ; ALREADY_EXISTS naming the
  // server when another live process holds this worker id.
  static absl::StatusOr<std::unique_ptr<PsClient>> Connect(const PsClientOptions& options);
  // The same over a given transport (options.servers is not used; it may be
  // empty). The first form owns the transport; the second does not (it must
  // outlive the client).
  static absl::StatusOr<std::unique_ptr<PsClient>> Connect(const PsClientOptions& options,
                                                           std::unique_ptr<Transport> transport);
  static absl::StatusOr<std::unique_ptr<PsClient>> Connect(const PsClientOptions& options,
                                                           Transport* transport);
  ~PsClient();

  // Creates the table on every server (a no-op where an identical table
  // exists). Errors from any server, naming it.
  absl::Status CreateTable(const proto::TableDef& def) override;

  // Reads the ranges into their `out` spans. Errors: INVALID_ARGUMENT naming
  // the table for a reversed range or a buffer that is not a whole number of
  // values per key (nothing sent); otherwise the first failed part's error,
  // naming the server. On error the contents of `out` are unspecified.
  absl::Status Pull(absl::Span<const PullRange> ops, uint64_t clock = 0,
                    PullInfo* info = nullptr) override;
  // Pushes gradients; `clock` is the worker's clock. Errors: INVALID_ARGUMENT
  // as for Pull; otherwise the first failed part's error naming the server,
  // and, when the push had several parts, which parts were applied, which
  // were not and which may have been (see PushReport). `report`, if given,
  // gets one entry per part, success or not.
  absl::Status Push(absl::Span<const PushRange> ops, uint64_t clock,
                    Versions* versions = nullptr) override;
  absl::Status Push(absl::Span<const PushRange> ops, uint64_t clock, Versions* versions,
                    PushReport* report);

  // Push without waiting (ps-lite's asynchronous push): returns at once, and
  // `done` runs exactly once with what Push would have returned, on a
  // transport or timer thread, or on this one (a refused op list, or a reply
  // that came at once). One thread can keep many pushes in flight; retries
  // and de-duplication are those of Push. `done` must not block (it may
  // start other pushes). The gradients must stay valid and unchanged until
  // `done` runs. The destructor waits for every pending `done`.
  using PushDone = std::function<void(absl::Status)>;
  void PushAsync(absl::Span<const PushRange> ops, uint64_t clock, PushDone done);

  // Arbitrary keys of a table of the given width (values key-major). Errors
  // as for Pull / Push; INVALID_ARGUMENT naming the table when width is 0
  // or the number of values is not keys.size() * width.
  absl::Status PullKeys(const std::string& table, absl::Span<const uint64_t> keys, uint32_t width,
                        absl::Span<float> out);
  absl::Status PushKeys(const std::string& table, absl::Span<const uint64_t> keys, uint32_t width,
                        absl::Span<const float> grads, uint64_t clock,
                        PushReport* report = nullptr);

  // A push made on behalf of a unit of work rather than of this client
  // (Sandblaster L-BFGS's data portions): its parts carry `worker_id` and
  // request ids first_request_id, + 1, ... in part order, so that the same
  // push made again by any client (a backup of the portion) has the same
  // ids part by part and each server applies only the first copy of its part.
  // The ids of different pushes must not overlap (leave room for the
  // parts: one per server and per max_values_per_request values).
  struct PushIdentity {
    uint32_t worker_id = 0;
    uint64_t first_request_id = 0;
  };
  absl::Status PushKeysAs(const PushIdentity& as, const std::string& table,
                          absl::Span<const uint64_t> keys, uint32_t width,
                          absl::Span<const float> grads, uint64_t clock);

  // Sandblaster L-BFGS: runs the vector ops on every server's part of the
  // table (the VectorOps RPC; retries carry the same request_id, which a
  // server answers without applying again) and returns the partial sums of
  // each DOT op added over the servers, and the values the ops ran over.
  // Errors: the first failed server's, naming it (then some servers may
  // have applied the ops and others not).
  struct VectorOpsTotals {
    std::vector<double> sums;
    uint64_t values = 0;
    uint64_t bytes = 0;  // of the requests and replies (protobuf payload)
  };
  absl::StatusOr<VectorOpsTotals> VectorOps(const std::string& table,
                                            absl::Span<const proto::VectorOp> ops,
                                            uint64_t request_id, uint64_t clock);

  // The Downpour step: pushes push[i]'s gradients and reads the same keys
  // back into pull[i].out, in one round trip per part (the PushPull RPC: the
  // values include the push). With bounded or BSP consistency it pushes,
  // then pulls at clock + 1. Errors as for Push (with the part list) and
  // Pull; INVALID_ARGUMENT when the ops differ or out has the wrong size.
  absl::Status PushPull(absl::Span<const PushRange> push, absl::Span<const PullRange> pull,
                        uint64_t clock, PullInfo* info = nullptr) override;
  // The same for arbitrary keys of a table of the given width.
  absl::Status PushPullKeys(const std::string& table, absl::Span<const uint64_t> keys,
                            uint32_t width, absl::Span<const float> grads, absl::Span<float> out,
                            uint64_t clock);

  int num_servers() const override { return transport_->num_servers(); }

  // Waits until every server counts at least `n` live workers (heartbeats
  // must be on: FAILED_PRECONDITION otherwise). DEADLINE_EXCEEDED naming the
  // count reached, after `timeout` on the clock.
  absl::Status WaitForWorkers(int n, absl::Duration timeout);
  // Stops the heartbeats and tells every server this worker is done, so it
  // no longer holds back the others. Idempotent; the destructor calls it.
  void Leave();
  // The Stats of every server. Errors name the first server that failed.
  absl::StatusOr<std::vector<ServerStats>> Stats();
  // Sends this worker's progress point to every server (their web UI and
  // Stats show it), one attempt each within a second. Errors name the first
  // server that failed; the point may have reached the others.
  absl::Status ReportProgress(const std::string& job, const proto::ProgressPoint& point);
  // Where this worker (options().worker_id) stands on the servers, as server
  // 0 knows it: after a restore, the checkpoint's clocks (rounds completed
  // per table) and which checkpoint it was.
  struct WorkerPosition {
    std::string restored_from;  // empty: the servers restored nothing
    uint64_t restored_cut = 0;
    absl::flat_hash_map<std::string, uint64_t> clocks;  // by table
  };
  absl::StatusOr<WorkerPosition> Position();
  // The definition of `table`: as this client created it, else asked of
  // server 0 once (every server holds the same). Errors: NOT_FOUND naming
  // the table, or the Info call's.
  absl::StatusOr<proto::TableDef> TableDefinition(const std::string& table);
  const Placement& placement() const { return placement_; }
  const PsClientOptions& options() const { return options_; }
  uint64_t incarnation() const { return incarnation_; }

 private:
  PsClient(const PsClientOptions& options, Transport* transport,
           std::unique_ptr<Transport> owned_transport);
  // Connect over `transport` (owned or not): checks the cluster, registers.
  static absl::StatusOr<std::unique_ptr<PsClient>> Start(
      const PsClientOptions& options, Transport* transport,
      std::unique_ptr<Transport> owned_transport);
  // One Info call to server 0, retried as data calls are.
  absl::Status InfoOfServer0(const proto::InfoRequest& request, proto::InfoResponse* reply);
  // The layout (dense or sparse slices) of `table`, from its definition
  // (TableDefinition, with the same errors).
  absl::StatusOr<TableLayout> TableLayoutFor(const std::string& table);
  // PlanKeys with the table's layout.
  absl::StatusOr<std::vector<Part>> PlanKeyOp(absl::string_view what, const std::string& table,
                                              absl::Span<const uint64_t> keys, uint32_t width,
                                              size_t num_values, uint64_t max_values_per_request);

  // For a data call of `values` values (spinning for small ones).
  CallPolicy DataPolicy(uint64_t values = ~uint64_t{0}) const {
    return {options_.timeout, options_.max_attempts, options_.retry_backoff,
            values <= options_.spin_max_values ? options_.spin_wait : absl::ZeroDuration()};
  }
  static uint64_t TotalValues(const std::vector<Part>& parts) {
    uint64_t n = 0;
    for (const Part& part : parts) n += part.num_values();
    return n;
  }
  uint64_t PushPullValuesPerCall() const {
    return std::max<uint64_t>(
        1, std::min(options_.max_values_per_request, options_.pushpull_values_per_call));
  }
  // What this client's requests at `clock` carry besides keys and values.
  RequestStamp Stamp(uint64_t clock) const {
    return {options_.worker_id,      clock,          options_.consistency, options_.staleness,
            options_.value_encoding, options_.reduce};
  }
  std::vector<absl::Status> RunCalls(absl::Span<const int> servers, absl::string_view rpc,
                                     const CallPolicy& policy, const CallRunner::Issue& issue) {
    return runner_.Run(servers, rpc, policy, issue);
  }
  // 0 .. num_servers() - 1.
  std::vector<int> AllServers() const;

  // Pulls the planned parts at `clock`: part p's values go to bases[p.op] +
  // offsets (ForEachRun). Fills info (may be null).
  absl::Status PullParts(const std::vector<Part>& parts, absl::Span<float* const> bases,
                         uint64_t clock, absl::Span<const uint64_t> keys, size_t num_ops,
                         PullInfo* info);

  // PushKeys and PushKeysAs: the requests stamped `stamp`, ids from *ids.
  absl::Status PushKeysStamped(const std::string& table, absl::Span<const uint64_t> keys,
                               uint32_t width, absl::Span<const float> grads,
                               const RequestStamp& stamp, std::atomic<uint64_t>* ids,
                               PushReport* report);
  // A push in flight: its parts, their requests and replies.
  struct PushCall {
    std::vector<Part> parts;
    PushRequests requests;
    std::vector<proto::PushResponse> replies;
  };
  // Calls start(done) and waits for done's status (spinning up to `spin`
  // first, see CallRunner::StartAndWait).
  static absl::Status StartAndWait(absl::Duration spin,
                                   const std::function<void(PushDone done)>& start);
  // Plans and sends a push; done gets its status. versions and report (may
  // be null) are filled before done runs.
  void StartPush(absl::Span<const PushRange> ops, uint64_t clock, Versions* versions,
                 PushReport* report, PushDone done);
  // Sends planned push parts (part i's header and values are
  // call->requests.headers[i] and pieces[i]); done gets FinishPush's status.
  void SendPushParts(std::shared_ptr<PushCall> call, size_t num_ops, Versions* versions,
                     PushReport* report, PushDone done);
  // The outcome of a sent push (PushOutcome); fills versions and report (may
  // be null).
  absl::Status FinishPush(const PushCall& call, const std::vector<absl::Status>& status,
                          size_t num_ops, Versions* versions, PushReport* report) const;
  // A push of one small part, async consistency: sent batched with other
  // pushes to its server.
  void PushBatched(std::shared_ptr<PushCall> call, size_t num_ops, Versions* versions,
                   PushReport* report, PushDone done);
  // Sends planned push-pull parts, grouped into calls (GroupIntoCalls);
  // part p's values read back go to bases[p.op]. The headers of *pushes are
  // moved into the calls.
  absl::Status PushPullParts(const std::vector<Part>& parts, PushRequests* pushes,
                             absl::Span<float* const> bases, size_t num_ops, PullInfo* info);

  // PushAsync dones still to run: the destructor waits until none is left.
  void BeginAsync();
  void EndAsync();

  const PsClientOptions options_;
  Clock* const clock_;
  const std::unique_ptr<Transport> owned_transport_;
  Transport* const transport_;
  const Placement placement_;
  const uint64_t incarnation_;
  const CallRunner runner_;
  LeaseKeeper lease_;
  KeyListMemory key_lists_;
  std::atomic<uint64_t> next_request_id_;

  TableCache tables_;  // created here or asked of server 0

  absl::Mutex async_mu_;
  int async_pending_ ABSL_GUARDED_BY(async_mu_) = 0;

  // Last: destroyed first, it waits for the batches still in flight while
  // everything they use is alive.
  PushBatcher batcher_;
};

}  // namespace ps

#endif  // PS_WORKER_CLIENT_PS_CLIENT_H_
