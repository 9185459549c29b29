#include "server/core/request_dedup.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ps {

void RequestDedup::ExpireLocked(Ids& w, absl::Time now) {
  while (!w.order.empty() && now - w.order.front().first > retention_) {
    const uint64_t id = w.order.front().second;
    w.forgotten_max = std::max(w.forgotten_max, id);
    w.ids.erase(id);
    w.order.pop_front();
  }
}

absl::StatusOr<bool> RequestDedup::Admit(uint32_t worker_id, uint64_t request_id, uint64_t clock) {
  if (request_id == 0) return true;
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  Ids& w = workers_[worker_id];
  ExpireLocked(w, now);
  if (w.ids.contains(request_id)) return false;
  if (request_id <= w.forgotten_max) {
    return absl::AbortedError(absl::StrCat(
        "push request ", request_id, " of worker ", worker_id,
        " is older than the ids this server remembers (retention ",
        absl::FormatDuration(retention_), ", see --dedup_retention_seconds; newest forgotten id ",
        w.forgotten_max, "); cannot tell whether it was applied"));
  }
  w.ids.emplace(request_id, clock);
  w.order.emplace_back(now, request_id);
  return true;
}

void RequestDedup::Expire() {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  for (auto& [id, w] : workers_) ExpireLocked(w, now);
}

std::vector<RequestDedup::Window> RequestDedup::Export(uint64_t cut) const {
  std::vector<Window> windows;
  absl::MutexLock lock(&mu_);
  for (const auto& [worker, w] : workers_) {
    Window out{worker, {}, w.forgotten_max};
    for (const auto& [id, clock] : w.ids) {
      if (clock < cut) out.request_ids.push_back(id);
    }
    std::sort(out.request_ids.begin(), out.request_ids.end());
    windows.push_back(std::move(out));
  }
  std::sort(windows.begin(), windows.end(),
            [](const Window& a, const Window& b) { return a.worker_id < b.worker_id; });
  return windows;
}

void RequestDedup::Import(const Window& window) {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  Ids& w = workers_[window.worker_id];
  w.forgotten_max = std::max(w.forgotten_max, window.forgotten_max);
  for (uint64_t id : window.request_ids) {
    if (w.ids.emplace(id, 0).second) w.order.emplace_back(now, id);
  }
}

size_t RequestDedup::size() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [id, w] : workers_) n += w.ids.size();
  return n;
}

}  // namespace ps
