#include "server/core/request_dedup.h"

#include <algorithm>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ps {

bool RequestDedup::Ids::Holds(uint64_t id) const {
  auto it = bits.find(id / 64);
  return it != bits.end() && (it->second >> (id % 64) & 1) != 0;
}

void RequestDedup::Ids::Remember(uint64_t id) { bits[id / 64] |= uint64_t{1} << (id % 64); }

void RequestDedup::Ids::Forget(uint64_t id) {
  auto it = bits.find(id / 64);
  if (it == bits.end()) return;
  it->second &= ~(uint64_t{1} << (id % 64));
  if (it->second == 0) bits.erase(it);
}

void RequestDedup::Ids::DropOldest() {
  ++head;
  if (head == order.size()) {
    order.clear();
    head = 0;
  } else if (head >= 64 && head * 2 >= order.size()) {
    // Moves at most as many entries as were dropped since the last move.
    order.erase(order.begin(), order.begin() + static_cast<std::ptrdiff_t>(head));
    head = 0;
  }
}

void RequestDedup::ExpireLocked(Ids& w, absl::Time now) {
  while (w.Count() > 0 && now - w.Oldest().at > retention_) {
    const uint64_t id = w.Oldest().id;
    w.forgotten_max = std::max(w.forgotten_max, id);
    w.Forget(id);
    w.DropOldest();
  }
}

absl::StatusOr<bool> RequestDedup::NewIn(const Ids& w, uint32_t worker_id,
                                         uint64_t request_id) const {
  if (w.Holds(request_id)) return false;
  if (request_id <= w.forgotten_max) {
    return absl::AbortedError(absl::StrCat(
        "push request ", request_id, " of worker ", worker_id,
        " is older than the ids this server remembers (retention ",
        absl::FormatDuration(retention_), ", see --dedup_retention_seconds; newest forgotten id ",
        w.forgotten_max, "); cannot tell whether it was applied"));
  }
  return true;
}

absl::StatusOr<bool> RequestDedup::Admit(uint32_t worker_id, uint64_t request_id, uint64_t clock) {
  if (request_id == 0) return true;
  const absl::Time now = clock_->Now();
  absl::MutexLock lock(&mu_);
  Ids& w = workers_[worker_id];
  ExpireLocked(w, now);
  absl::StatusOr<bool> fresh = NewIn(w, worker_id, request_id);
  if (!fresh.ok() || !*fresh) return fresh;
  w.Remember(request_id);
  w.order.push_back({now, request_id, clock});
  return true;
}

absl::StatusOr<bool> RequestDedup::IsNew(uint32_t worker_id, uint64_t request_id) const {
  if (request_id == 0) return true;
  absl::MutexLock lock(&mu_);
  auto it = workers_.find(worker_id);
  return it == workers_.end() ? true : NewIn(it->second, worker_id, request_id);
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
    for (size_t i = w.head; i < w.order.size(); ++i) {
      if (w.order[i].clock < cut) out.request_ids.push_back(w.order[i].id);
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
    if (w.Holds(id)) continue;
    w.Remember(id);
    w.order.push_back({now, id, 0});
  }
}

size_t RequestDedup::size() const {
  absl::MutexLock lock(&mu_);
  size_t n = 0;
  for (const auto& [id, w] : workers_) n += w.Count();
  return n;
}

}  // namespace ps
