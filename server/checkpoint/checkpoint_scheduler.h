// CheckpointScheduler: decides when the cluster's coordinator (server 0)
// takes checkpoints: every `every` of time, every `every_clocks` clocks
// (the largest clock applied on this server passing the last cut by that
// much), on request (COORDINATE, from ps_admin or from another server that
// is stopping), and a last one when the server stops.
//
// Checkpoints are taken one at a time on the scheduler's own thread; a
// request is answered with the first checkpoint started after it arrived.
// Thread-safe.
#ifndef PS_SERVER_CHECKPOINT_CHECKPOINT_SCHEDULER_H_
#define PS_SERVER_CHECKPOINT_CHECKPOINT_SCHEDULER_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "server/checkpoint/checkpoint_coordinator.h"

namespace ps {

struct SchedulerOptions {
  absl::Duration every = absl::ZeroDuration();    // 0: no timer
  uint64_t every_clocks = 0;                      // 0: no clock trigger
  absl::Duration poll = absl::Milliseconds(100);  // how often the clock is looked at
  uint64_t start_cut = 0;                         // the restored checkpoint's cut, for every_clocks
  // Null: this server always coordinates. Else the timer and the clock
  // trigger take checkpoints only while it returns true (in a replicated
  // cluster, every server runs a scheduler and the primary of shard 0
  // coordinates); requests are always taken.
  std::function<bool()> coordinates;
};

class CheckpointScheduler {
 public:
  using Done = std::function<void(absl::StatusOr<CheckpointResult>)>;

  // `max_clock` reads the largest clock applied here; `log` receives one
  // line per checkpoint taken or failed.
  CheckpointScheduler(std::unique_ptr<CheckpointCoordinator> coordinator, SchedulerOptions options,
                      std::function<uint64_t()> max_clock,
                      std::function<void(const std::string&)> log);
  // Stop(false) if not stopped.
  ~CheckpointScheduler();

  // Asks for a checkpoint (full: not incremental); `done` runs, on the
  // scheduler's thread, with the first one started after this call, or
  // with UNAVAILABLE once the scheduler stopped.
  void Request(bool full, Done done);

  // Stops the timers; with `last`, takes one more checkpoint, whose result
  // also answers the requests still waiting. Returns that checkpoint's
  // result (CANCELLED without `last`). Idempotent.
  absl::StatusOr<CheckpointResult> Stop(bool last);

  // What was taken so far, for metrics.
  struct Record {
    uint64_t taken = 0;
    uint64_t failed = 0;
    uint64_t last_cut = 0;     // of the latest one taken (0: none)
    absl::Time last_taken_at;  // InfinitePast: none
  };
  Record record() const;

 private:
  struct Pending {
    bool full;
    Done done;
  };
  void Loop();
  // Takes one checkpoint, logs it and answers `waiting`.
  absl::StatusOr<CheckpointResult> TakeAndAnswer(bool full, std::deque<Pending> waiting,
                                                 const char* why);

  const std::unique_ptr<CheckpointCoordinator> coordinator_;
  const SchedulerOptions options_;
  const std::function<uint64_t()> max_clock_;
  const std::function<void(const std::string&)> log_;

  mutable absl::Mutex mu_;
  std::deque<Pending> pending_ ABSL_GUARDED_BY(mu_);
  Record record_ ABSL_GUARDED_BY(mu_) = {0, 0, 0, absl::InfinitePast()};
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
  bool final_answered_ ABSL_GUARDED_BY(mu_) = false;  // later requests fail at once
  uint64_t last_cut_ ABSL_GUARDED_BY(mu_) = 0;
  std::thread thread_;  // last: starts after the fields it uses
};

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_CHECKPOINT_SCHEDULER_H_
