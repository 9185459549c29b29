// Remembers which (worker, request id) pushes were applied, so that a push a
// worker retries (same id) is applied once.
//
// Ids are remembered for a time (the retention), not up to a count: every
// retry that can legitimately arrive, i.e. within the client's deadline
// times its attempts, is recognized however many pushes came in between. An
// id that is not remembered but is no newer than one already forgotten
// cannot be told apart from a lost one and is refused. Memory is the number
// of pushes in one retention period. Time comes from the injected Clock.
// Thread-safe.
#ifndef PS_SERVER_CORE_REQUEST_DEDUP_H_
#define PS_SERVER_CORE_REQUEST_DEDUP_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"

namespace ps {

class RequestDedup {
 public:
  RequestDedup(Clock* clock, absl::Duration retention) : clock_(clock), retention_(retention) {}

  // Records the id. Returns true if it is new (the caller must apply the
  // push), false if it was recorded before (a retry: do not apply). Id 0
  // means "no id" and is always new. Errors: ABORTED when the id is older
  // than what is remembered for the worker, naming worker, id and retention.
  // `clock` is the push's clock, for Export.
  absl::StatusOr<bool> Admit(uint32_t worker_id, uint64_t request_id, uint64_t clock = 0);

  // What Admit would say, without recording the id: true for a new id,
  // false for one applied before, the same errors.
  absl::StatusOr<bool> IsNew(uint32_t worker_id, uint64_t request_id) const;

  // Checkpoints: per worker, the remembered ids of pushes with a clock below
  // `cut` (those in a checkpoint at that cut) and the newest id forgotten.
  struct Window {
    uint32_t worker_id;
    std::vector<uint64_t> request_ids;  // sorted
    uint64_t forgotten_max;
  };
  std::vector<Window> Export(uint64_t cut) const;
  // Restore: remembers the ids (as applied now) and the newest forgotten id.
  void Import(const Window& window);
  // Forgets every id older than the retention (also done for a worker on
  // each of its Admits).
  void Expire();
  // Ids remembered, over all workers.
  size_t size() const;

 private:
  struct Remembered {
    absl::Time at;  // when it was admitted
    uint64_t id;
    uint64_t clock;  // of its push
  };
  struct Ids {
    // By arrival: order[head..] (one vector, grown by doubling and
    // compacted as the head passes its middle, not a deque: a deque's
    // blocks, allocated one per 21 pushes among each call's temporaries and
    // kept for the retention, scattered the heap that sparse tables grow in
    // afterwards; their pushes then cost 1.5x the server CPU).
    std::vector<Remembered> order;
    size_t head = 0;
    // Which ids are remembered: a bit each, 64 consecutive ids to a word
    // (id / 64 -> bits). A client numbers its requests consecutively, so a
    // word holds many and the map stays small enough for the cache: a map
    // entry per id cost 4% of the server's CPU on small pushes.
    absl::flat_hash_map<uint64_t, uint64_t> bits;
    uint64_t forgotten_max = 0;  // largest id forgotten

    bool Holds(uint64_t id) const;
    void Remember(uint64_t id);
    void Forget(uint64_t id);
    // The arrival order.
    size_t Count() const { return order.size() - head; }
    const Remembered& Oldest() const { return order[head]; }
    void DropOldest();
  };
  void ExpireLocked(Ids& w, absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Clock* const clock_;
  const absl::Duration retention_;

  // Whether the id is new to what `w` remembers of the worker: false when
  // held, ABORTED when older than what is remembered (Admit's answers).
  absl::StatusOr<bool> NewIn(const Ids& w, uint32_t worker_id, uint64_t request_id) const;

  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint32_t, Ids> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_SERVER_CORE_REQUEST_DEDUP_H_
