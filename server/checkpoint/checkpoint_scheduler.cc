#include "server/checkpoint/checkpoint_scheduler.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"

namespace ps {

CheckpointScheduler::CheckpointScheduler(std::unique_ptr<CheckpointCoordinator> coordinator,
                                         SchedulerOptions options,
                                         std::function<uint64_t()> max_clock,
                                         std::function<void(const std::string&)> log)
    : coordinator_(std::move(coordinator)),
      options_(options),
      max_clock_(std::move(max_clock)),
      log_(std::move(log)),
      last_cut_(options.start_cut),
      thread_([this] { Loop(); }) {}

CheckpointScheduler::~CheckpointScheduler() { (void)Stop(false); }

void CheckpointScheduler::Request(bool full, Done done) {
  {
    absl::MutexLock lock(&mu_);
    if (!stopped_ || !final_answered_) {
      pending_.push_back({full, std::move(done)});
      return;
    }
  }
  done(absl::UnavailableError("checkpoints: the coordinator (server 0) has stopped"));
}

void CheckpointScheduler::Loop() {
  const bool timer = options_.every > absl::ZeroDuration();
  absl::Time next = timer ? absl::Now() + options_.every : absl::InfiniteFuture();
  while (true) {
    const uint64_t max_clock = options_.every_clocks > 0 ? max_clock_() : 0;
    std::deque<Pending> waiting;
    bool full = false;
    const char* why = nullptr;
    {
      absl::MutexLock lock(&mu_);
      auto wake = [this]()
                      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_ || !pending_.empty(); };
      mu_.AwaitWithDeadline(absl::Condition(&wake), std::min(next, absl::Now() + options_.poll));
      if (stopping_) return;
      if (!pending_.empty()) {
        waiting.swap(pending_);
        for (const Pending& p : waiting) full = full || p.full;
        why = "on request";
      } else if (absl::Now() >= next) {
        why = "on the timer";
      } else if (options_.every_clocks > 0 && max_clock >= last_cut_ + options_.every_clocks) {
        why = "on the clock";
      } else {
        continue;
      }
    }
    if (waiting.empty() && options_.coordinates && !options_.coordinates()) {
      // Another server coordinates now; this one's timer starts again.
      if (timer) next = absl::Now() + options_.every;
      continue;
    }
    (void)TakeAndAnswer(full, std::move(waiting), why);
    if (timer) next = absl::Now() + options_.every;
  }
}

absl::StatusOr<CheckpointResult> CheckpointScheduler::TakeAndAnswer(bool full,
                                                                    std::deque<Pending> waiting,
                                                                    const char* why) {
  absl::StatusOr<CheckpointResult> result = coordinator_->Take(full);
  if (result.ok()) {
    {
      absl::MutexLock lock(&mu_);
      last_cut_ = std::max(last_cut_, result->cut);
      ++record_.taken;
      record_.last_cut = result->cut;
      record_.last_taken_at = absl::Now();
    }
    log_(absl::StrFormat(
        "checkpoint %s (%s): cut %d, %s, %d files, %.1f MiB in %.3f s%s", result->path, why,
        result->cut,
        result->base_sequence == 0 ? std::string("full")
                                   : absl::StrCat("incremental on ", result->base_sequence),
        result->files, result->bytes / 1048576.0, absl::ToDoubleSeconds(result->took),
        result->pruned.empty() ? "" : absl::StrCat(", pruned ", result->pruned.size())));
  } else {
    {
      absl::MutexLock lock(&mu_);
      ++record_.failed;
    }
    log_(absl::StrCat("checkpoint (", why, ") failed: ", result.status().message()));
  }
  for (Pending& p : waiting) p.done(result);
  return result;
}

CheckpointScheduler::Record CheckpointScheduler::record() const {
  absl::MutexLock lock(&mu_);
  return record_;
}

absl::StatusOr<CheckpointResult> CheckpointScheduler::Stop(bool last) {
  {
    absl::MutexLock lock(&mu_);
    if (stopped_) return absl::CancelledError("checkpoints: already stopped");
    stopping_ = stopped_ = true;
  }
  thread_.join();
  std::deque<Pending> waiting;
  {
    absl::MutexLock lock(&mu_);
    waiting.swap(pending_);
    if (!last) final_answered_ = true;
  }
  absl::StatusOr<CheckpointResult> result =
      absl::CancelledError("checkpoints: stopped without a last checkpoint");
  if (last) {
    result = TakeAndAnswer(false, std::move(waiting), "at shutdown");
  } else {
    for (Pending& p : waiting) p.done(absl::UnavailableError("checkpoints: stopped"));
  }
  // Requests that came during the last checkpoint get its result.
  {
    absl::MutexLock lock(&mu_);
    final_answered_ = true;
    waiting.clear();
    waiting.swap(pending_);
  }
  for (Pending& p : waiting) p.done(result);
  return result;
}

}  // namespace ps
