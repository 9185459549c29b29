// PsCore: everything one parameter-server shard does, without a transport.
//
// It owns the shard's store, the worker clocks and leases (ClockTracker),
// push de-duplication, pull statistics and the resource limits, and does the
// bounded-delay and BSP orchestration: a pull (or a BSP push) that must wait
// for slower workers is parked with its completion callback and finished
// later on whichever thread makes it ready. One method per RPC, on proto
// messages and the decoded requests of server/request_args.h; the gRPC
// adapter (PsService) only parses, calls and serializes, and in-process
// tests drive a core directly.
//
// Order of checks for every request (admission first): limits (sizes, caps,
// clock values), then the store's validation (table, keys, values), then
// de-duplication, then the change. A refused request changes nothing and
// leaves no state behind (no clock, statistics or dedup entry for an
// unknown table).
//
// Thread-safe. Completion callbacks run exactly once, never under a lock of
// the core, and may run before the method that took them returns.
//
// The methods of replication (ApplyForwarded and what a primary forwards)
// are in ps_core_replicated.cc, the rest in ps_core.cc.
#ifndef PS_SERVER_CORE_PS_CORE_H_
#define PS_SERVER_CORE_PS_CORE_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/metrics.h"
#include "common/placement.h"
#include "proto/ps.pb.h"
#include "server/core/clock_tracker.h"
#include "server/core/key_list_cache.h"
#include "server/core/pull_stats.h"
#include "server/core/request_args.h"
#include "server/core/request_dedup.h"
#include "server/core/round_reducer.h"
#include "server/core/server_limits.h"
#include "server/core/vector_ops_runner.h"
#include "server/replication/replication_log.h"
#include "server/store/shard_store.h"

namespace ps {

struct PsCoreOptions {
  int server_index = 0;
  int num_servers = 1;
  PlacementConfig placement;
  ServerLimits limits;
  // Time of leases, deadlines of parked calls and dedup retention.
  Clock* clock = Clock::Real();
  // host:port, for Info and log lines (may be set later with set_address).
  std::string address;
  // The memory budget shared by every core of the process (not owned; null:
  // the core's store has limits.memory_budget_bytes of its own).
  MemoryBudget* process_budget = nullptr;
  // Shared by every core of the process (not owned; null: per core only):
  // parked calls, one unit each (ClockTracker), and the bytes of kept key
  // lists (KeyListCache).
  MemoryBudget* process_parked = nullptr;
  MemoryBudget* process_key_lists = nullptr;
  // The tiered tables' files of every core of the process (not owned; null:
  // the core's store has limits.disk_budget_bytes of its own).
  MemoryBudget* process_disk = nullptr;
  // A replicated shard's copy: tiered tables in scratch directories named
  // by this (StoreLimits::tier_scratch); "": a static server's.
  std::string tier_scratch;
  bool tier_reuse = false;  // StoreLimits::tier_reuse
};

class PsCore {
 public:
  // Identifies a call that may be parked, for Cancel. 0: none.
  using CallId = uint64_t;
  using PushDone = std::function<void(absl::StatusOr<proto::PushResponse>)>;
  // Called once, after validation, with the number of bytes of values the
  // reply carries; returns where to write them.
  using Allocate = std::function<char*(size_t bytes)>;
  using PullDone = std::function<void(absl::StatusOr<proto::PullResponse>)>;

  explicit PsCore(const PsCoreOptions& options);
  ~PsCore();

  // Creates the table's slices owned by this shard. May take long (it
  // initializes every value): call it off any thread that serves other
  // calls. Errors: INVALID_ARGUMENT (bad definition, name over the limit),
  // ALREADY_EXISTS (same name, other definition), RESOURCE_EXHAUSTED (table
  // cap, or the memory budget: names the table, the bytes it needs and the
  // bytes left).
  absl::StatusOr<proto::CreateTableResponse> CreateTable(const proto::CreateTableRequest& request);

  // Applies a push (after validation and de-duplication) and advances the
  // worker's clock for the table. A BSP push (consistency BOUNDED, staleness
  // 0) is first parked until every live worker has read its round. `args`
  // must stay valid until `done` has run. Errors (through done): those of
  // ShardStore::Push, INVALID_ARGUMENT (clock over the limit, more keys than
  // the per-request cap), RESOURCE_EXHAUSTED (too many parked calls),
  // DEADLINE_EXCEEDED (parked past `deadline`, naming the slowest worker),
  // CANCELLED (Cancel), UNAVAILABLE (Close). Returns the id to cancel it by
  // while parked (0 when it was not parked).
  CallId Push(const PushArgs* args, absl::Time deadline, PushDone done);

  // Applies each push of the batch as if alone; BSP pushes are refused.
  proto::PushBatchResponse PushBatch(const proto::PushBatchRequest& request);

  // Reads the values of the pull's keys into allocate()'s buffer, once the
  // consistency model allows (bounded delay may park it). `args` must stay
  // valid until `done` has run. Errors as for Push (minus value checks), and
  // RESOURCE_EXHAUSTED for a reply over the message limit.
  CallId Pull(const PullArgs* args, absl::Time deadline, Allocate allocate, PullDone done);

  // The Downpour step in one call: applies the push as Push does, then
  // writes the values of the same keys after it into allocate()'s buffer, as
  // an async pull by the worker at clock + 1 would. Never parks. Errors (through
  // done): those of Push, INVALID_ARGUMENT for a consistency other than
  // async or a push without keys. A retry of an applied push is not applied
  // again (reply.duplicate()) and still gets the current values. `args` must
  // stay valid until `done` has run.
  void PushPull(const PushArgs* args, Allocate allocate, PullDone done);

  // The PushPull RPC: PushPull for each push of `request` (which carries no
  // values), its values the next values_bytes of `values` (the request's
  // values field). Writes every push's values after it, concatenated, into
  // allocate(values.size()) (zeros for a failed push) and returns the
  // per-push results (a failed push has its code and message). Completes
  // before returning. Errors: INVALID_ARGUMENT when the pushes' values_bytes
  // do not add up to values.size().
  absl::StatusOr<proto::PushPullResponse> PushPullMany(const proto::PushPullRequest& request,
                                                       const SegmentedBytes& values,
                                                       const Allocate& allocate);

  // Releases a parked call at once: its callback runs with CANCELLED. A no-op
  // for an id that is not parked (done already ran).
  void Cancel(CallId id);

  // Sandblaster L-BFGS's vector ops on this shard's part of a table
  // (VectorOpsRunner::Run; refused on a replicated shard).
  absl::StatusOr<proto::VectorOpsResponse> VectorOps(const proto::VectorOpsRequest& request) {
    return vector_ops_.Run(request, log_ != nullptr);
  }

  // Registers the worker, renews its lease or (leaving) drops it. Errors:
  // INVALID_ARGUMENT (lease over the limit, clock over the limit),
  // ALREADY_EXISTS (another live process holds this worker id: names it).
  // With replication, a heartbeat taken is also appended to the log.
  absl::StatusOr<proto::HeartbeatResponse> Heartbeat(const proto::HeartbeatRequest& request);

  // This server's place in the cluster; with request.table, also that
  // table's definition (NOT_FOUND naming it when absent); with
  // request.worker_clocks, the worker's clock on every table known here.
  absl::StatusOr<proto::InfoResponse> Info(const proto::InfoRequest& request);
  proto::StatsResponse Stats();

  // Expires leases and fails parked calls past their deadline, as of the
  // clock's now. Returns the log lines of what happened since the last call.
  std::vector<std::string> Tick();
  // Fails every parked call with `status`, and every later one at once.
  void Close(const absl::Status& status);

  // Replication (server/replica_link.h): from now on every applied update
  // (push, table creation) is appended to `log`, in the order applied, under
  // the core's order lock. Set once, before serving; must outlive the core.
  void set_replication(ReplicationLog* log) { log_ = log; }
  // Runs `done` once every update applied so far has reached the chain's
  // tail (at once without replication). Writers call it before answering.
  void AfterReplicated(ReplicationLog::Done done);
  // A replica applies an update its predecessor forwarded: a push as Apply
  // does (de-duplicated by request id, never parked), a table creation as
  // CreateTable does, a heartbeat as taken, an eviction, an epoch start as
  // nothing; and appends the entry, as received, to its own log (whether or
  // not a push was new here), so that every copy's history is the
  // primary's. The log first places the entry (ReplicationLog::Place),
  // under the same hold of the order lock: one this copy holds already is
  // skipped (OK); one with no place here is refused (its error, with
  // *refused set: nothing applied, the copy unchanged). Snapshot parts are
  // not for the core (ShardHost). Other errors: those of Apply and
  // CreateTable (the entry is then not appended), INVALID_ARGUMENT for an
  // entry of no known kind, FAILED_PRECONDITION without replication.
  absl::Status ApplyForwarded(const proto::ForwardEntry& entry, bool* refused);
  // Runs fn under the order lock: no update is applied meanwhile.
  void RunOrdered(const std::function<void()>& fn);

  void set_address(const std::string& address);
  // The checkpoint restored at start, for Info.
  void set_restored(const std::string& path, uint64_t cut);
  int server_index() const { return options_.server_index; }
  const ServerLimits& limits() const { return options_.limits; }
  // Key lists kept for key-list caching; decoders take it (request_args.h).
  KeyListCache& key_lists() { return key_lists_; }
  // Seconds each applied push took in the store (validation, optimizer,
  // de-duplication; not the wait for the chain): 1 us to 2 s buckets.
  const Histogram& apply_seconds() const { return apply_seconds_; }
  // Bytes of parameters and optimizer state held here.
  uint64_t bytes_used() const;
  // Each table's bytes here (slices and optimizer state), by table name.
  std::vector<std::pair<std::string, uint64_t>> TableBytes() const;
  // Fails every parked call and pending cut wait with `why` (this copy
  // stops serving its shard).
  void FailWaiting(const absl::Status& why);

 private:
  // Applies a decoded push of this server's own (a worker's) under the
  // order lock, once the log says this copy may write
  // (ReplicationLog::CheckWritable: UNAVAILABLE otherwise). Errors as for
  // ShardStore::Push.
  absl::StatusOr<proto::PushResponse> Apply(const PushArgs& args);
  // Apply's work, with the order lock held (when replicated). `forwarded`:
  // the entry a replica applies, appended to its log as it is (null on the
  // primary: the entry is built, and appended only when the push was new).
  absl::StatusOr<proto::PushResponse> ApplyLocked(const PushArgs& args,
                                                  const proto::ForwardEntry* forwarded);
  // Whether this copy may apply an update of its own, with the order lock
  // held: OK without replication, else the log's answer
  // (ReplicationLog::CheckWritable).
  absl::Status CheckWritable() const;
  // BSP with a deterministic reduction (PushRequest.reduce, RoundReducer):
  // the push's checks; holding a push whose round every live worker has
  // read (a retry of an applied one is answered duplicate); applying a
  // complete round, one store push per group of keys, each push summed
  // recorded as applied (dedup, clocks) and answered.
  absl::Status CheckReduce(const PushArgs& args) const;
  void HoldForRound(const PushArgs* args, absl::Time deadline, PushDone done);
  void ApplyRound(RoundReducer::Round round);
  absl::Status CheckPush(const PushArgs& args) const;
  absl::Status CheckPull(const PullArgs& args) const;
  absl::Status CheckClock(const std::string& what, uint64_t clock) const;
  // Heartbeat without the log.
  absl::StatusOr<proto::HeartbeatResponse> TakeHeartbeat(const proto::HeartbeatRequest& request);
  // Reads the pull's keys (none for a clock-only pull) and records the read.
  absl::Status Serve(const PullArgs& args, uint64_t params_clock, absl::Time arrived,
                     const Allocate& allocate, proto::PullResponse* reply);
  // Accounts for a read of the table (clocks, staleness statistics) and
  // fills the reply's version, params clock and wait.
  void RecordRead(const proto::PullRequest& header, uint64_t params_clock, absl::Time arrived,
                  uint64_t version, proto::PullResponse* reply);
  std::string LogPrefix() const;

  // What the store needs of a push besides keys and values: `decisions`
  // (the sparse decisions to record or replay; null: none), the push's
  // layer norms (LARS).
  static ShardStore::PushOptions StoreOptions(const proto::PushRequest& header,
                                              SparseTable::Decisions* decisions) {
    return {decisions, header.has_layer_norms() ? &header.layer_norms() : nullptr};
  }
  // The entry a replica applies for this push, with the primary's sparse
  // decisions.
  static proto::ForwardEntry ForwardEntryOf(const PushArgs& args,
                                            const SparseTable::Decisions& decisions);

  const PsCoreOptions options_;
  Clock* const clock_;
  ReplicationLog* log_ = nullptr;
  // With replication: held while an update is applied and appended to log_.
  absl::Mutex order_mu_;
  // The state leaves and enters only through CoreStateIo (core_state.h);
  // tests read it through PsCoreTestPeer (ps_core_test_peer.h).
  friend class CoreStateIo;
  friend class PsCoreTestPeer;
  ShardStore store_;
  ClockTracker clocks_;
  RequestDedup dedup_;
  RoundReducer reducer_;
  VectorOpsRunner vector_ops_{&store_};
  KeyListCache key_lists_;
  PullStats stats_;
  Histogram apply_seconds_{ExponentialBuckets(1e-6, 2, 22)};
  mutable absl::Mutex address_mu_;
  std::string address_ ABSL_GUARDED_BY(address_mu_);
  std::string restored_from_ ABSL_GUARDED_BY(address_mu_);
  uint64_t restored_cut_ ABSL_GUARDED_BY(address_mu_) = 0;
};

}  // namespace ps

#endif  // PS_SERVER_CORE_PS_CORE_H_
