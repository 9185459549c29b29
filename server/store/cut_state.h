// CutState: a store's checkpoint cut in progress, shared by its tables.
//
// A checkpoint at cut T holds, for every worker, exactly its pushes with
// clock < T. The store marks T on every slice (under the slice's lock); from
// then until the slice is written out:
//  - a push inside the cut (clock < T, before the cut is complete) is
//    applied to the slice and, when the slice has been copied, to the copy
//    as well;
//  - any other push (clock >= T, or any push once the cut is complete)
//    first copies the slice, if it has no copy yet, and then changes the
//    slice alone.
// So a slice's copy, or the slice itself when it has none, holds exactly the
// pushes of the cut once the cut is complete (every worker that counts has
// completed the rounds below T): writing that out is the checkpoint.
// Training waits for a slice only while it is copied.
//
// Change tags (incremental checkpoints): every change to a dense slice or a
// sparse row records a tag, and a checkpoint on top of the one at cut B
// writes what has a tag > B. A push inside the cut T gets tag T (it is in the
// checkpoint at T); any other change (a push outside the cut, a new row, an
// eviction, a table's initialization) gets last_marked() + 1, where
// last_marked() is the largest cut ever marked here (or restored). It is
// raised before any slice is marked, so every change not in a checkpoint at
// B has a tag > B: a change before B's mark is in it; one after it is
// tagged >= B + 1 unless it is a push inside B's cut (tag B, in it too).
// Tags may overstate (a slice unchanged since B may be written again),
// never understate.
//
// Thread-safe.
#ifndef PS_SERVER_STORE_CUT_STATE_H_
#define PS_SERVER_STORE_CUT_STATE_H_

#include <atomic>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "server/store/memory_budget.h"

namespace ps {

class CutState {
 public:
  // Whether every push of the cut has been applied (later pushes are
  // outside it, whatever their clock).
  bool complete() const { return complete_.load(std::memory_order_acquire); }
  void set_complete(bool complete) { complete_.store(complete, std::memory_order_release); }

  // The largest cut marked (or restored) here, 0 if none. Raised, never
  // lowered, before the cut is marked on any slice.
  uint64_t last_marked() const { return last_marked_.load(std::memory_order_acquire); }
  void RaiseLastMarked(uint64_t cut) {
    uint64_t seen = last_marked_.load(std::memory_order_relaxed);
    while (cut > seen &&
           !last_marked_.compare_exchange_weak(seen, cut, std::memory_order_acq_rel)) {
    }
  }
  // The tag of a change outside every cut.
  uint64_t ChangeTag() const { return last_marked() + 1; }
  // Whether a push at `clock` to a slice in the cut `slice_cut` (0: none) is
  // inside it.
  bool Inside(uint64_t slice_cut, uint64_t clock) const {
    return slice_cut != 0 && clock < slice_cut && !complete();
  }

  // Records the first reason the cut cannot be written (e.g. no memory for
  // a copy); the cut goes on, so that training is not held up, and its write
  // then fails with this.
  void Fail(const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    if (error_.ok()) error_ = status;
  }
  // Fail, for a slice of `table` whose copy (`bytes`) did not fit in
  // `budget` on server `server_index`: the message names them and the flag.
  void FailCopy(absl::string_view table, uint64_t bytes, int server_index,
                const MemoryBudget& budget) {
    Fail(absl::ResourceExhaustedError(absl::StrCat(
        "checkpoint: copying a slice of table '", table, "' (", bytes,
        " bytes) for the cut would exceed the memory budget on server ", server_index, " (",
        budget.left(), " of ", budget.limit(), " bytes left; ps_server --memory_budget_mb)")));
  }
  absl::Status error() const {
    absl::MutexLock lock(&mu_);
    return error_;
  }
  void ClearError() {
    absl::MutexLock lock(&mu_);
    error_ = absl::OkStatus();
  }

 private:
  std::atomic<bool> complete_{false};
  std::atomic<uint64_t> last_marked_{0};
  mutable absl::Mutex mu_;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_SERVER_STORE_CUT_STATE_H_
