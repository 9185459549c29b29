// ClockTracker: worker clocks, leases and the waits of bounded-delay and
// BSP consistency, per table. Knows nothing of gRPC.
//
// A worker's clock is the number of rounds it has pushed. For each table the
// tracker keeps, per worker, `completed` (every push of its rounds below this
// has been applied here) and `pulled` (the latest clock it has read the
// table at). Only live workers count: a worker registers and renews a lease
// with Heartbeat; when the lease runs out (checked by Tick) or it leaves, it
// is dropped from the minimums, and waiters are re-checked.
//
// Waiting never blocks a thread: WhenPullReady/WhenPushReady store a
// callback, which runs (exactly once, never under the tracker's lock) on
// whichever thread makes it ready: the caller itself, a push that completes
// a round, Tick (lease expiry or deadline), Cancel, or Close. At most
// `max_parked` callbacks wait at once; past that a wait fails at once with
// RESOURCE_EXHAUSTED. Parts of a round are counted per (worker, table,
// clock), so overlapping rounds of one worker never reset each other's
// counts. Queries about a table never create state for it. Thread-safe.
#ifndef PS_SERVER_CORE_CLOCK_TRACKER_H_
#define PS_SERVER_CORE_CLOCK_TRACKER_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/store/memory_budget.h"

namespace ps {

class ClockTracker {
 public:
  // status OK with the table's params clock (min completed clock of the live
  // workers), or the error that ended the wait.
  using Callback = std::function<void(absl::Status status, uint64_t params_clock)>;

  // Identifies a parked wait, for Cancel (0: the callback already ran).
  using WaitId = uint64_t;

  // `process_parked` (not owned; may be null) counts the calls parked by
  // every tracker of the process, one unit each: a wait parks only while
  // both this tracker has fewer than max_parked and that count has room.
  explicit ClockTracker(
      std::function<absl::Time()> now = [] { return absl::Now(); }, size_t max_parked = 4096,
      MemoryBudget* process_parked = nullptr);
  ~ClockTracker();

  // Registers the worker (or renews its lease) at `clock`; `incarnation`
  // identifies the registering process (0: unknown, never conflicts).
  // Returns the number of live workers. Errors: ALREADY_EXISTS when another
  // live process (another nonzero incarnation) holds the worker id, naming
  // it; a worker whose lease expired may be taken over.
  absl::StatusOr<int> Register(uint32_t worker, uint64_t incarnation, uint64_t clock,
                               absl::Duration lease);
  // Register with incarnation 0.
  int Heartbeat(uint32_t worker, uint64_t clock, absl::Duration lease);
  // Drops the worker at once (it finished). Ignored when `incarnation` is
  // nonzero and not the registered one.
  void Leave(uint32_t worker, uint64_t incarnation = 0);

  // Runs `ready` once every live worker has completed the rounds below
  // t - staleness on `table` (at once if they have). Fails it with
  // DEADLINE_EXCEEDED naming the slowest worker and its clock at `deadline`.
  WaitId WhenPullReady(const std::string& table, uint32_t worker, uint64_t t, uint64_t staleness,
                       absl::Time deadline, Callback ready);
  // The worker read `table` for clock t.
  void PullServed(const std::string& table, uint32_t worker, uint64_t t);

  // BSP: runs `ready` once every live worker has read `table` for clock t
  // (so the round-t push cannot leak into anyone's round-t parameters).
  WaitId WhenPushReady(const std::string& table, uint32_t worker, uint64_t t, absl::Time deadline,
                       Callback ready);
  // Runs the parked callback now with CANCELLED (the caller went away); a
  // no-op when it already ran.
  void Cancel(WaitId id);
  // One of the `parts` pushes of round `clock` by `worker` was applied.
  void PushApplied(const std::string& table, uint32_t worker, uint64_t clock, uint32_t parts);

  // Checkpoints: runs `ready` once every live worker has completed the
  // rounds below `cut` on every table it has pushed or read here (at once
  // when it has: workers that never used a table do not hold it up). Fails
  // it with DEADLINE_EXCEEDED at `deadline`, naming the slowest worker, its
  // table and clock.
  WaitId WhenCutReached(uint64_t cut, absl::Time deadline, Callback ready);
  // Each worker's completed clock per table it has used here, below `cap`
  // (a checkpoint at cut T records min(clock, T)), sorted by table and
  // worker.
  struct WorkerClock {
    std::string table;
    uint32_t worker;
    uint64_t clock;
  };
  std::vector<WorkerClock> Clocks(uint64_t cap);
  // The live workers' leases (a copy of a shard takes them over so that,
  // promoted, it counts them in its waits before they call it).
  struct WorkerLease {
    uint32_t worker = 0;
    uint64_t incarnation = 0;
    uint64_t clock = 0;        // its last heartbeat's
    absl::Duration remaining;  // until its lease expires
  };
  std::vector<WorkerLease> Leases();
  // The ids of the workers that count in BSP's waits (live until Tick or
  // Leave drops them), sorted.
  std::vector<uint32_t> LiveWorkers();
  // Restore: the worker has completed the rounds below `clock` on `table`.
  void Restore(const std::string& table, uint32_t worker, uint64_t clock);

  // Min completed clock of the live workers (UINT64_MAX with none live), and
  // the largest completed clock of any worker.
  uint64_t ParamsClock(const std::string& table);
  uint64_t ServerClock(const std::string& table);

  // Expires leases and fails waits past their deadline, as of now().
  void Tick();
  // Fails every waiting callback with `status`, and every later wait at
  // once (server shutdown).
  void Close(const absl::Status& status);
  // Fails every waiting callback with `status` now; later waits park as
  // usual (a fenced server: what waited must not be answered after another
  // server may have been promoted).
  void FailWaiting(const absl::Status& status);
  // Log lines about workers (expired, left, re-registered) since the last call.
  std::vector<std::string> TakeEvents();
  // Callbacks waiting, and tables with state (for tests and statistics).
  size_t parked();
  size_t num_tables();

 private:
  struct Worker {
    uint64_t base_clock = 0;  // clock at (re-)registration
    uint64_t last_clock = 0;
    absl::Time expires;
    absl::Duration lease;
    uint64_t incarnation = 0;
    bool live = false;
  };
  // Rounds with some but not all parts applied, kept per worker and table;
  // past this many, the oldest is forgotten (a worker never has that many
  // rounds in flight).
  static constexpr size_t kMaxPartialRounds = 64;
  struct PerWorker {
    uint64_t completed = 0;
    uint64_t pulled_plus1 = 0;                        // 0: never read
    absl::flat_hash_map<uint64_t, uint32_t> partial;  // clock -> parts applied
  };
  struct Table {
    absl::flat_hash_map<uint32_t, PerWorker> workers;
    uint64_t server_clock = 0;
  };
  struct Waiter {
    WaitId id;
    bool is_pull;  // with is_cut false: a push
    std::string table;
    uint32_t worker;
    uint64_t t;       // the caller's clock
    uint64_t target;  // pull: min completed needed; push: min pulled_plus1 needed
    absl::Time deadline;
    Callback ready;
    bool is_cut = false;  // WhenCutReached: target is the cut
  };
  using Fired = std::vector<std::pair<Callback, std::pair<absl::Status, uint64_t>>>;

  // Runs w.ready now if it is ready (or the tracker is closed, or full), else
  // parks it and returns its id.
  WaitId Wait(Waiter w);

  uint64_t CompletedLocked(const Table& t, uint32_t w) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t PulledPlus1Locked(const Table& t, uint32_t w) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Min over live workers of completed (or pulled_plus1); the worker that
  // holds the minimum goes to *slowest.
  uint64_t MinLiveLocked(const std::string& table, bool pulled, uint32_t* slowest)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ReadyLocked(const Waiter& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether every live worker completed the rounds below `cut` on every
  // table it used; if not, *slowest describes one that did not.
  bool CutReachedLocked(uint64_t cut, std::string* slowest) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string DeadlineMessageLocked(const Waiter& w) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Moves every ready (or, when `now` is set, overdue) waiter to *fired.
  void CollectLocked(Fired* fired, const absl::Time* now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void Run(Fired& fired);
  // Releases, from the process's count, the waiters removed since waiters_
  // had `before` of them.
  void Unparked(size_t before) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const std::function<absl::Time()> now_;
  const size_t max_parked_;
  MemoryBudget* const process_parked_;
  absl::Mutex mu_;
  WaitId next_wait_id_ ABSL_GUARDED_BY(mu_) = 1;
  absl::flat_hash_map<uint32_t, Worker> workers_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<std::string, Table> tables_ ABSL_GUARDED_BY(mu_);
  std::vector<Waiter> waiters_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> events_ ABSL_GUARDED_BY(mu_);
  absl::Status closed_ ABSL_GUARDED_BY(mu_);  // not OK once closed
};

}  // namespace ps

#endif  // PS_SERVER_CORE_CLOCK_TRACKER_H_
