// Remembers which (worker, request id) pushes were applied, so a push that a
// worker retries (same id) is applied once.
//
// Per worker it keeps the ids within `window` of the largest id seen. An id
// below that window cannot be told apart from a lost one and is refused.
// Thread-safe.
#ifndef PS_SERVER_REQUEST_DEDUP_H_
#define PS_SERVER_REQUEST_DEDUP_H_

#include <cstdint>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace ps {

class RequestDedup {
 public:
  explicit RequestDedup(uint64_t window = 1 << 16) : window_(window) {}

  // Records the id. Returns true if it is new (the caller must apply the
  // push), false if it was recorded before (a retry: do not apply). Id 0
  // means "no id" and is always new. Errors: ABORTED when the id is older
  // than the window, naming worker and id.
  absl::StatusOr<bool> Admit(uint32_t worker_id, uint64_t request_id);

 private:
  struct Window {
    uint64_t max_id = 0;
    absl::flat_hash_set<uint64_t> ids;
  };
  const uint64_t window_;
  absl::Mutex mu_;
  absl::flat_hash_map<uint32_t, Window> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_SERVER_REQUEST_DEDUP_H_
