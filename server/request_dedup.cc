#include "server/request_dedup.h"

#include <algorithm>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ps {

void RequestDedup::ExpireLocked(Window& w, absl::Time now) {
  while (!w.order.empty() && now - w.order.front().first > retention_) {
    const uint64_t id = w.order.front().second;
    w.forgotten_max = std::max(w.forgotten_max, id);
    w.ids.erase(id);
    w.order.pop_front();
  }
}

absl::StatusOr<bool> RequestDedup::Admit(uint32_t worker_id, uint64_t request_id) {
  if (request_id == 0) return true;
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  Window& w = workers_[worker_id];
  ExpireLocked(w, now);
  if (w.ids.contains(request_id)) return false;
  if (request_id <= w.forgotten_max) {
    return absl::AbortedError(absl::StrCat(
        "push request ", request_id, " of worker ", worker_id,
        " is older than the ids this server remembers (retention ",
        absl::FormatDuration(retention_), ", see --dedup_retention_seconds; newest forgotten id ",
        w.forgotten_max, "); cannot tell whether it was applied"));
  }
  w.ids.insert(request_id);
  w.order.emplace_back(now, request_id);
  return true;
}

void RequestDedup::Expire() {
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  for (auto& [id, w] : workers_) ExpireLocked(w, now);
}

size_t RequestDedup::size() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [id, w] : workers_) n += w.ids.size();
  return n;
}

}  // namespace ps
