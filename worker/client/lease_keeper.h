// LeaseKeeper: this worker's lease on every server. Start registers with
// every server; a thread of the keeper's own then renews the lease with a
// round of heartbeats every lease / 4, each carrying the rounds pushed so
// far (NotePushed); Leave stops it and tells every server this worker is
// done, so that it no longer holds the others back.
//
// Owned by PsClient; the Transport, CallRunner and Clock must outlive it.
// Thread-safe. With a zero lease it sends nothing (WaitForWorkers fails).
#ifndef PS_WORKER_CLIENT_LEASE_KEEPER_H_
#define PS_WORKER_CLIENT_LEASE_KEEPER_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <thread>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "worker/client/call_runner.h"
#include "worker/client/transport.h"

namespace ps {

class LeaseKeeper {
 public:
  struct Options {
    uint32_t worker_id = 0;
    absl::Duration lease = absl::ZeroDuration();  // zero: no lease
    uint64_t incarnation = 0;                     // lets servers refuse a second live process
    absl::Duration timeout = absl::Seconds(10);   // of a heartbeat, at most lease / 2
    absl::Duration retry_backoff = absl::Milliseconds(50);
  };

  LeaseKeeper(const Options& options, Transport* transport, const CallRunner* runner, Clock* clock);
  // Leave().
  ~LeaseKeeper();
  LeaseKeeper(const LeaseKeeper&) = delete;
  LeaseKeeper& operator=(const LeaseKeeper&) = delete;

  // With a lease: registers with every server, then starts the renewals.
  // Call once. Errors: the first failed server's, naming it;
  // ALREADY_EXISTS when another live process holds this worker id (this
  // worker then never sends a leaving heartbeat: the id is the other's).
  absl::Status Start();
  // Round `clock` was pushed: heartbeats carry at least clock + 1.
  void NotePushed(uint64_t clock) {
    uint64_t seen = rounds_pushed_.load();
    while (seen < clock + 1 && !rounds_pushed_.compare_exchange_weak(seen, clock + 1)) {
    }
  }
  // Heartbeats every 50 ms (on the clock) until every server counts at least
  // `n` live workers. FAILED_PRECONDITION without a lease; DEADLINE_EXCEEDED
  // with the count reached, after `timeout`.
  absl::Status WaitForWorkers(int n, absl::Duration timeout);
  // Stops the renewals and sends a leaving heartbeat (once; nothing without
  // a lease). Idempotent.
  void Leave();

 private:
  // One round of heartbeats, one short attempt each (a slow server must not
  // hold up the others' renewals): the smallest live-worker count, or the
  // first error naming the server.
  absl::StatusOr<int> HeartbeatAll(bool leaving);
  void RenewLoop();

  const Options options_;
  Transport* const transport_;
  const CallRunner* const runner_;
  Clock* const clock_;
  const std::string log_source_;
  std::atomic<uint64_t> rounds_pushed_{0};

  absl::Mutex mu_;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  bool left_ ABSL_GUARDED_BY(mu_) = false;
  // Started by Start, joined by the Leave that sets left_.
  std::thread renewals_;
};

}  // namespace ps

#endif  // PS_WORKER_CLIENT_LEASE_KEEPER_H_
