#include "server/core/clock_tracker.h"

#include <algorithm>
#include <limits>
#include <tuple>
#include <utility>

#include "absl/strings/str_cat.h"

namespace ps {

constexpr uint64_t kNoWorkers = std::numeric_limits<uint64_t>::max();

ClockTracker::ClockTracker(std::function<absl::Time()> now, size_t max_parked,
                           MemoryBudget* process_parked)
    : now_(std::move(now)), max_parked_(max_parked), process_parked_(process_parked) {}

ClockTracker::~ClockTracker() {
  absl::MutexLock lock(&mu_);
  if (process_parked_ != nullptr) process_parked_->Release(waiters_.size());
}

void ClockTracker::Unparked(size_t before) {
  if (process_parked_ != nullptr) process_parked_->Release(before - waiters_.size());
}

int ClockTracker::Heartbeat(uint32_t worker, uint64_t clock, absl::Duration lease) {
  return *Register(worker, /*incarnation=*/0, clock, lease);
}

absl::StatusOr<int> ClockTracker::Register(uint32_t worker, uint64_t incarnation, uint64_t clock,
                                           absl::Duration lease) {
  Fired fired;
  int live = 0;
  {
    absl::MutexLock lock(&mu_);
    Worker& w = workers_[worker];
    const absl::Time now = now_();
    if (w.live && incarnation != 0 && w.incarnation != 0 && incarnation != w.incarnation) {
      return absl::AlreadyExistsError(absl::StrCat(
          "worker id ", worker, " is already held by another live process (incarnation ",
          w.incarnation, ", at clock ", w.last_clock, ", last heartbeat ",
          absl::FormatDuration(now - (w.expires - w.lease)), " ago, lease ",
          absl::FormatDuration(w.lease), "); give each worker its own --worker_index, or wait ",
          absl::FormatDuration(w.expires - now), " for its lease to expire"));
    }
    if (!w.live) {
      w.base_clock = clock;
      events_.push_back(absl::StrCat("worker ", worker, " registered at clock ", clock, ", lease ",
                                     absl::FormatDuration(lease)));
    }
    if (incarnation != 0) w.incarnation = incarnation;
    w.live = true;
    w.last_clock = std::max(w.last_clock, clock);
    w.lease = lease;
    w.expires = now + lease;
    for (const auto& [id, other] : workers_) live += other.live;
    CollectLocked(&fired, nullptr);  // a new worker can only lower minimums
  }
  Run(fired);
  return live;
}

void ClockTracker::Leave(uint32_t worker, uint64_t incarnation) {
  Fired fired;
  {
    absl::MutexLock lock(&mu_);
    auto it = workers_.find(worker);
    if (it == workers_.end() || !it->second.live) return;
    if (incarnation != 0 && it->second.incarnation != 0 && incarnation != it->second.incarnation) {
      return;  // another process's leave must not drop the live one
    }
    it->second.live = false;
    events_.push_back(absl::StrCat("worker ", worker, " left at clock ", it->second.last_clock));
    CollectLocked(&fired, nullptr);
  }
  Run(fired);
}

uint64_t ClockTracker::CompletedLocked(const Table& t, uint32_t w) const {
  auto wit = workers_.find(w);
  const uint64_t base = wit == workers_.end() ? 0 : wit->second.base_clock;
  auto it = t.workers.find(w);
  return std::max(base, it == t.workers.end() ? 0 : it->second.completed);
}

uint64_t ClockTracker::PulledPlus1Locked(const Table& t, uint32_t w) const {
  auto wit = workers_.find(w);
  const uint64_t base = wit == workers_.end() ? 0 : wit->second.base_clock;
  auto it = t.workers.find(w);
  return std::max(base, it == t.workers.end() ? 0 : it->second.pulled_plus1);
}

uint64_t ClockTracker::MinLiveLocked(const std::string& table, bool pulled, uint32_t* slowest) {
  auto found = tables_.find(table);
  static const Table* const kNoTable = new Table();
  const Table& t = found == tables_.end() ? *kNoTable : found->second;
  uint64_t min = kNoWorkers;
  for (const auto& [id, w] : workers_) {
    if (!w.live) continue;
    const uint64_t c = pulled ? PulledPlus1Locked(t, id) : CompletedLocked(t, id);
    if (c < min) {
      min = c;
      if (slowest != nullptr) *slowest = id;
    }
  }
  return min;
}

bool ClockTracker::CutReachedLocked(uint64_t cut, std::string* slowest) {
  for (const auto& [name, table] : tables_) {
    for (const auto& [id, per] : table.workers) {
      auto wit = workers_.find(id);
      if (wit == workers_.end() || !wit->second.live) continue;
      const uint64_t completed = CompletedLocked(table, id);
      if (completed < cut) {
        if (slowest != nullptr) {
          *slowest = absl::StrCat(
              "worker ", id, " has completed clock ", completed, " of table '", name, "' (needs ",
              cut, "), last heartbeat ",
              absl::FormatDuration(now_() - (wit->second.expires - wit->second.lease)), " ago");
        }
        return false;
      }
    }
  }
  return true;
}

bool ClockTracker::ReadyLocked(const Waiter& w) {
  if (w.is_cut) return CutReachedLocked(w.target, nullptr);
  const uint64_t min = MinLiveLocked(w.table, /*pulled=*/!w.is_pull, nullptr);
  return min == kNoWorkers || min >= w.target;
}

std::string ClockTracker::DeadlineMessageLocked(const Waiter& w) {
  if (w.is_cut) {
    std::string slowest;
    CutReachedLocked(w.target, &slowest);
    return absl::StrCat("checkpoint at cut ", w.target,
                        " waited until its deadline for the pushes below the cut: ", slowest);
  }
  uint32_t slowest = 0;
  const uint64_t min = MinLiveLocked(w.table, !w.is_pull, &slowest);
  const Worker& s = workers_[slowest];
  return absl::StrCat(w.is_pull ? "pull" : "push", " of table '", w.table, "' by worker ", w.worker,
                      " at clock ", w.t, " waited until its deadline: slowest live worker is ",
                      slowest, " at ", w.is_pull ? "clock " : "read clock ",
                      w.is_pull ? min : (min > 0 ? min - 1 : 0), " (needs ",
                      w.is_pull ? w.target : w.target - 1, "), last heartbeat ",
                      absl::FormatDuration(now_() - (s.expires - s.lease)), " ago");
}

void ClockTracker::CollectLocked(Fired* fired, const absl::Time* now) {
  const size_t before = waiters_.size();
  std::vector<Waiter> keep;
  for (Waiter& w : waiters_) {
    if (ReadyLocked(w)) {
      fired->emplace_back(std::move(w.ready),
                          std::make_pair(absl::OkStatus(), MinLiveLocked(w.table, false, nullptr)));
    } else if (now != nullptr && *now >= w.deadline) {
      fired->emplace_back(
          std::move(w.ready),
          std::make_pair(absl::DeadlineExceededError(DeadlineMessageLocked(w)), uint64_t{0}));
    } else {
      keep.push_back(std::move(w));
    }
  }
  waiters_ = std::move(keep);
  Unparked(before);
}

void ClockTracker::Run(Fired& fired) {
  for (auto& [callback, result] : fired) callback(result.first, result.second);
}

ClockTracker::WaitId ClockTracker::WhenPullReady(const std::string& table, uint32_t worker,
                                                 uint64_t t, uint64_t staleness,
                                                 absl::Time deadline, Callback ready) {
  return Wait(
      {0, true, table, worker, t, t > staleness ? t - staleness : 0, deadline, std::move(ready)});
}

ClockTracker::WaitId ClockTracker::WhenPushReady(const std::string& table, uint32_t worker,
                                                 uint64_t t, absl::Time deadline, Callback ready) {
  // The pusher has read round t: it computed this push from it. A new
  // primary after a failover may not have seen that read.
  PullServed(table, worker, t);
  return Wait({0, false, table, worker, t, t + 1, deadline, std::move(ready)});
}

ClockTracker::WaitId ClockTracker::WhenCutReached(uint64_t cut, absl::Time deadline,
                                                  Callback ready) {
  Waiter w{0, false, "", 0, cut, cut, deadline, std::move(ready)};
  w.is_cut = true;
  return Wait(std::move(w));
}

std::vector<ClockTracker::WorkerClock> ClockTracker::Clocks(uint64_t cap) {
  std::vector<WorkerClock> clocks;
  absl::MutexLock lock(&mu_);
  for (const auto& [name, table] : tables_) {
    for (const auto& [id, per] : table.workers) {
      clocks.push_back({name, id, std::min(cap, CompletedLocked(table, id))});
    }
  }
  std::sort(clocks.begin(), clocks.end(), [](const WorkerClock& a, const WorkerClock& b) {
    return std::tie(a.table, a.worker) < std::tie(b.table, b.worker);
  });
  return clocks;
}

std::vector<ClockTracker::WorkerLease> ClockTracker::Leases() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = now_();
  std::vector<WorkerLease> leases;
  for (const auto& [id, w] : workers_) {
    if (w.live && w.expires > now)
      leases.push_back({id, w.incarnation, w.last_clock, w.expires - now});
  }
  std::sort(leases.begin(), leases.end(),
            [](const WorkerLease& a, const WorkerLease& b) { return a.worker < b.worker; });
  return leases;
}

std::vector<uint32_t> ClockTracker::LiveWorkers() {
  absl::MutexLock lock(&mu_);
  std::vector<uint32_t> ids;
  for (const auto& [id, w] : workers_) {
    if (w.live) ids.push_back(id);
  }
  std::sort(ids.begin(), ids.end());
  return ids;
}

void ClockTracker::Restore(const std::string& table, uint32_t worker, uint64_t clock) {
  absl::MutexLock lock(&mu_);
  PerWorker& per = tables_[table].workers[worker];
  per.completed = std::max(per.completed, clock);
  tables_[table].server_clock = std::max(tables_[table].server_clock, clock);
}

ClockTracker::WaitId ClockTracker::Wait(Waiter w) {
  uint64_t params_clock = 0;
  absl::Status status;
  {
    absl::MutexLock lock(&mu_);
    status = closed_;
    if (status.ok() && !ReadyLocked(w)) {
      const bool here = waiters_.size() < max_parked_;
      if (here && (process_parked_ == nullptr || process_parked_->TryCharge(1))) {
        w.id = next_wait_id_++;
        waiters_.push_back(std::move(w));
        return waiters_.back().id;
      }
      status = absl::ResourceExhaustedError(
          absl::StrCat(w.is_cut    ? "checkpoint"
                       : w.is_pull ? "pull"
                                   : "BSP push",
                       " of table '", w.table, "' by worker ", w.worker, " at clock ", w.t,
                       " would wait, but ", here ? process_parked_->limit() : max_parked_,
                       here ? " calls already wait in this server process, over all its shards"
                            : " calls already wait on this shard",
                       " (limit --max_parked_calls)"));
    }
    if (status.ok() && w.is_pull) params_clock = MinLiveLocked(w.table, false, nullptr);
  }
  w.ready(status, params_clock);
  return 0;
}

void ClockTracker::Cancel(WaitId id) {
  Callback ready;
  std::string what;
  {
    absl::MutexLock lock(&mu_);
    auto it = std::find_if(waiters_.begin(), waiters_.end(),
                           [id](const Waiter& w) { return w.id == id; });
    if (id == 0 || it == waiters_.end()) return;
    ready = std::move(it->ready);
    what = absl::StrCat(it->is_pull ? "pull" : "push", " of table '", it->table, "' by worker ",
                        it->worker, " at clock ", it->t);
    waiters_.erase(it);
    if (process_parked_ != nullptr) process_parked_->Release(1);
  }
  ready(absl::CancelledError(absl::StrCat(what, " was cancelled by the client while waiting")), 0);
}

size_t ClockTracker::parked() {
  absl::MutexLock lock(&mu_);
  return waiters_.size();
}

size_t ClockTracker::num_tables() {
  absl::MutexLock lock(&mu_);
  return tables_.size();
}

void ClockTracker::PullServed(const std::string& table, uint32_t worker, uint64_t t) {
  Fired fired;
  {
    absl::MutexLock lock(&mu_);
    PerWorker& p = tables_[table].workers[worker];
    if (t + 1 <= p.pulled_plus1) return;
    p.pulled_plus1 = t + 1;
    CollectLocked(&fired, nullptr);
  }
  Run(fired);
}

void ClockTracker::PushApplied(const std::string& table, uint32_t worker, uint64_t clock,
                               uint32_t parts) {
  Fired fired;
  {
    absl::MutexLock lock(&mu_);
    Table& t = tables_[table];
    PerWorker& p = t.workers[worker];
    // Round `clock` was read before it was pushed (so a copy that applies
    // the chain's pushes knows the reads of BSP rounds too).
    bool changed = clock + 1 > p.pulled_plus1;
    if (changed) p.pulled_plus1 = clock + 1;
    // A late part of a finished round counts for nothing more.
    if (clock >= p.completed && ++p.partial[clock] >= std::max<uint32_t>(parts, 1)) {
      p.completed = clock + 1;
      // Rounds below the completed clock need no more counting.
      absl::erase_if(p.partial, [&p](const auto& entry) { return entry.first < p.completed; });
      t.server_clock = std::max(t.server_clock, p.completed);
      auto wit = workers_.find(worker);
      if (wit != workers_.end()) {
        wit->second.last_clock = std::max(wit->second.last_clock, clock + 1);
      }
      changed = true;
    } else if (p.partial.size() > kMaxPartialRounds) {
      p.partial.erase(std::min_element(p.partial.begin(), p.partial.end()));
    }
    if (changed) CollectLocked(&fired, nullptr);
  }
  Run(fired);
}

uint64_t ClockTracker::ParamsClock(const std::string& table) {
  absl::MutexLock lock(&mu_);
  return MinLiveLocked(table, false, nullptr);
}

uint64_t ClockTracker::ServerClock(const std::string& table) {
  absl::MutexLock lock(&mu_);
  auto it = tables_.find(table);
  return it == tables_.end() ? 0 : it->second.server_clock;
}

void ClockTracker::Tick() {
  Fired fired;
  {
    absl::MutexLock lock(&mu_);
    const absl::Time now = now_();
    for (auto& [id, w] : workers_) {
      if (w.live && now >= w.expires) {
        w.live = false;
        events_.push_back(absl::StrCat("worker ", id, " lease expired (last clock ", w.last_clock,
                                       "); dropped from the clock minimum"));
      }
    }
    CollectLocked(&fired, &now);
  }
  Run(fired);
}

void ClockTracker::Close(const absl::Status& status) {
  Fired fired;
  {
    absl::MutexLock lock(&mu_);
    closed_ = status.ok() ? absl::UnavailableError("closed") : status;
    for (Waiter& w : waiters_) {
      fired.emplace_back(std::move(w.ready), std::make_pair(status, uint64_t{0}));
    }
    const size_t before = waiters_.size();
    waiters_.clear();
    Unparked(before);
  }
  Run(fired);
}

void ClockTracker::FailWaiting(const absl::Status& status) {
  Fired fired;
  {
    absl::MutexLock lock(&mu_);
    for (Waiter& w : waiters_) {
      fired.emplace_back(std::move(w.ready), std::make_pair(status, uint64_t{0}));
    }
    const size_t before = waiters_.size();
    waiters_.clear();
    Unparked(before);
  }
  Run(fired);
}

std::vector<std::string> ClockTracker::TakeEvents() {
  absl::MutexLock lock(&mu_);
  std::vector<std::string> out;
  out.swap(events_);
  return out;
}

}  // namespace ps
