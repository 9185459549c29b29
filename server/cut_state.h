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
// Thread-safe.
#ifndef PS_SERVER_CUT_STATE_H_
#define PS_SERVER_CUT_STATE_H_

#include <atomic>

#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace ps {

class CutState {
 public:
  // Whether every push of the cut has been applied (later pushes are
  // outside it, whatever their clock).
  bool complete() const { return complete_.load(std::memory_order_acquire); }
  void set_complete(bool complete) { complete_.store(complete, std::memory_order_release); }

  // Records the first reason the cut cannot be written (e.g. no memory for
  // a copy); the cut goes on, so that training is not held up, and its write
  // then fails with this.
  void Fail(const absl::Status& status) {
    absl::MutexLock lock(&mu_);
    if (error_.ok()) error_ = status;
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
  mutable absl::Mutex mu_;
  absl::Status error_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_SERVER_CUT_STATE_H_
