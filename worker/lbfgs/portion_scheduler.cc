#include "worker/lbfgs/portion_scheduler.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ps {
namespace lbfgs {

PortionScheduler::PortionScheduler(const SchedulerOptions& options, Clock* clock)
    : options_(options), clock_(clock) {}

absl::Status PortionScheduler::Begin(uint64_t evaluation, int num_portions) {
  absl::MutexLock lock(&mu_);
  if (num_portions < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("Begin(", evaluation, ", ", num_portions, "): negative portion count"));
  }
  if (begun_ && evaluation <= evaluation_) {
    return absl::InvalidArgumentError(absl::StrCat("Begin(", evaluation, ") after evaluation ",
                                                   evaluation_,
                                                   " began; evaluation numbers must increase"));
  }
  begun_ = true;
  evaluation_ = evaluation;
  portions_.assign(num_portions, Portion{});
  unassigned_.clear();
  for (int p = 0; p < num_portions; ++p) unassigned_.insert(unassigned_.end(), p);
  left_ = num_portions;
  totals_ = Totals{0, 0, 0, 0};
  ++generation_;
  return absl::OkStatus();
}

std::optional<PortionScheduler::Task> PortionScheduler::PickLocked(uint32_t worker, absl::Time now,
                                                                   absl::Time* wake_at) {
  *wake_at = absl::InfiniteFuture();
  if (!begun_) return std::nullopt;
  if (!unassigned_.empty()) {
    const int p = *unassigned_.begin();
    unassigned_.erase(unassigned_.begin());
    portions_[p].copies.emplace_back(worker, now);
    return Task{evaluation_, p, false};
  }
  int best = -1;
  absl::Time best_started = absl::InfiniteFuture();
  for (int p = 0; p < static_cast<int>(portions_.size()); ++p) {
    const Portion& portion = portions_[p];
    if (portion.done || portion.copies.empty()) continue;
    if (static_cast<int>(portion.copies.size()) >= options_.max_copies) continue;
    absl::Time started = absl::InfiniteFuture();
    bool runs_here = false;
    for (const auto& [w, at] : portion.copies) {
      runs_here = runs_here || w == worker;
      started = std::min(started, at);
    }
    if (runs_here) continue;
    const absl::Time due = started + options_.backup_after;
    if (due > now) {
      *wake_at = std::min(*wake_at, due);
    } else if (started < best_started) {
      best = p;
      best_started = started;
    }
  }
  if (best < 0) return std::nullopt;
  portions_[best].copies.emplace_back(worker, now);
  ++totals_.backups_started;
  return Task{evaluation_, best, true};
}

std::optional<PortionScheduler::Task> PortionScheduler::Next(uint32_t worker, absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = clock_->Now() + wait;
  while (!stopped_) {
    const absl::Time now = clock_->Now();
    absl::Time wake_at;
    if (std::optional<Task> task = PickLocked(worker, now, &wake_at)) return task;
    if (now >= deadline) break;
    // Until something changes, or the earliest backup falls due, or the wait is over.
    const uint64_t seen = generation_;
    auto changed = [this, seen]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return generation_ != seen; };
    clock_->AwaitWithTimeout(&mu_, absl::Condition(&changed), std::min(deadline, wake_at) - now);
  }
  return std::nullopt;
}

bool PortionScheduler::Finish(uint32_t worker, uint64_t evaluation, int portion, double loss,
                              uint64_t examples) {
  absl::MutexLock lock(&mu_);
  if (!begun_ || evaluation != evaluation_ || portion < 0 ||
      portion >= static_cast<int>(portions_.size())) {
    return false;
  }
  Portion& p = portions_[portion];
  if (p.done) {
    ++totals_.duplicates_dropped;
    return false;
  }
  p.done = true;
  p.copies.clear();  // any other copy's result will be a duplicate
  unassigned_.erase(portion);
  --left_;
  totals_.loss += loss;
  totals_.examples += examples;
  ++kept_by_worker_[worker];
  ++generation_;
  return true;
}

void PortionScheduler::Fail(uint32_t worker, uint64_t evaluation, int portion) {
  absl::MutexLock lock(&mu_);
  if (!begun_ || evaluation != evaluation_ || portion < 0 ||
      portion >= static_cast<int>(portions_.size())) {
    return;
  }
  Portion& p = portions_[portion];
  if (p.done) return;
  auto copy = std::find_if(p.copies.begin(), p.copies.end(),
                           [worker](const auto& c) { return c.first == worker; });
  if (copy == p.copies.end()) return;
  p.copies.erase(copy);
  if (p.copies.empty()) unassigned_.insert(portion);
  ++generation_;
}

bool PortionScheduler::AllDoneLocked() const { return begun_ && left_ == 0; }

std::string PortionScheduler::DescribeLeftLocked() const {
  constexpr int kMaxListed = 10;
  std::vector<std::string> parts;
  int listed = 0;
  for (int p = 0; p < static_cast<int>(portions_.size()); ++p) {
    if (portions_[p].done) continue;
    if (listed++ == kMaxListed) {
      parts.push_back(absl::StrCat("and ", left_ - kMaxListed, " more"));
      break;
    }
    if (portions_[p].copies.empty()) {
      parts.push_back(absl::StrCat("portion ", p, " (unassigned)"));
      continue;
    }
    std::vector<uint32_t> workers;
    for (const auto& c : portions_[p].copies) workers.push_back(c.first);
    parts.push_back(absl::StrCat("portion ", p, " (running on worker",
                                 workers.size() > 1 ? "s " : " ", absl::StrJoin(workers, ", "),
                                 ")"));
  }
  return absl::StrJoin(parts, ", ");
}

absl::Status PortionScheduler::AwaitDone(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  if (!begun_) return absl::FailedPreconditionError("AwaitDone before any evaluation began");
  const uint64_t awaited = evaluation_;
  auto settled = [this, awaited]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopped_ || evaluation_ != awaited || left_ == 0;
  };
  clock_->AwaitWithTimeout(&mu_, absl::Condition(&settled), timeout);
  if (evaluation_ != awaited) {
    return absl::AbortedError(absl::StrCat("evaluation ", awaited,
                                           " was abandoned while awaited: evaluation ", evaluation_,
                                           " began"));
  }
  if (AllDoneLocked()) return absl::OkStatus();
  const std::string left = absl::StrCat(left_, " of ", portions_.size(),
                                        " portions not finished: ", DescribeLeftLocked());
  if (stopped_) {
    return absl::CancelledError(
        absl::StrCat("scheduler stopped during evaluation ", awaited, "; ", left));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "evaluation ", awaited, ": after ", absl::FormatDuration(timeout), ", ", left,
      "; are those workers alive? Fail() a dead worker's tasks so they are handed out again, "
      "or raise the timeout"));
}

PortionScheduler::Totals PortionScheduler::totals() const {
  absl::ReaderMutexLock lock(&mu_);
  return totals_;
}

std::map<uint32_t, int> PortionScheduler::PortionsByWorker() const {
  absl::ReaderMutexLock lock(&mu_);
  return kept_by_worker_;
}

void PortionScheduler::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
  ++generation_;
}

}  // namespace lbfgs
}  // namespace ps
