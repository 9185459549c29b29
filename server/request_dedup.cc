#include "server/request_dedup.h"

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace ps {

absl::StatusOr<bool> RequestDedup::Admit(uint32_t worker_id, uint64_t request_id) {
  if (request_id == 0) return true;
  absl::MutexLock lock(&mu_);
  Window& w = workers_[worker_id];
  const uint64_t floor = w.max_id > window_ ? w.max_id - window_ : 0;
  if (request_id <= floor) {
    return absl::AbortedError(absl::StrCat("push request ", request_id, " of worker ", worker_id,
                                           " is older than the dedup window (newest id ", w.max_id,
                                           "); cannot tell whether it was applied"));
  }
  if (!w.ids.insert(request_id).second) return false;
  if (request_id > w.max_id) w.max_id = request_id;
  if (w.ids.size() > 2 * window_) {
    const uint64_t new_floor = w.max_id - window_;
    absl::erase_if(w.ids, [new_floor](uint64_t id) { return id <= new_floor; });
  }
  return true;
}

}  // namespace ps
