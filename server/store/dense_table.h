// DenseTable: one server's slices of a dense table (keys [0, num_keys) in
// runs of slice_size), each owning its values and optimizer state under its
// own reader/writer lock. Thread-safe; knows nothing of gRPC or workers.
#ifndef PS_SERVER_STORE_DENSE_TABLE_H_
#define PS_SERVER_STORE_DENSE_TABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/aligned_vector.h"
#include "common/key_spec.h"
#include "common/optimizer/optimizer.h"
#include "common/placement.h"
#include "proto/ps.pb.h"
#include "server/checkpoint/checkpoint_records.h"
#include "server/store/cut_state.h"
#include "server/store/memory_budget.h"

namespace ps {

// Pushes to different slices never contend; reads of one slice share its
// lock. Memory: the creator charges BytesToCreate to the budget before
// constructing the table (ShardStore::CreateTable); the table charges the
// copies it makes of slices for a checkpoint cut (server/store/cut_state.h).
// The caller decides whether a push is applied (Admit): de-duplication and
// workers' clocks are not the table's business.
class DenseTable {
 public:
  // The slices `placement` gives server `server_index`, initialized from
  // the definition (every value: call it outside other locks). `budget`
  // and `cut_state` (the store's, shared by all its tables: required, so
  // that every table sees the same cut) must outlive the table.
  DenseTable(const proto::TableDef& def, std::unique_ptr<Optimizer> optimizer, int server_index,
             const Placement& placement, MemoryBudget* budget, CutState* cut_state);

  // Bytes the slices `placement` gives `server_index` take, with
  // `state_per_value` floats of optimizer state per value: what the creator
  // charges before construction. Exact for up to 2^22 slices, estimated
  // from the first 2^22 past that.
  static uint64_t BytesToCreate(const proto::TableDef& def, int state_per_value,
                                const Placement& placement, int server_index);

  const proto::TableDef& def() const { return def_; }
  // Pushes applied here (the store's PushResult::version).
  std::atomic<uint64_t>& version() { return version_; }

  // Checks that every range is ordered, every key below num_keys and in a
  // slice owned here. Errors: INVALID_ARGUMENT (reversed range, key or
  // range past num_keys: names the table and the key or range),
  // FAILED_PRECONDITION (a key of another server's slice: names the key,
  // the slice and its owner).
  absl::Status CheckKeys(const KeySpec& keys) const;

  // A push of `grads` (keys.size() * width floats, key-major) stamped with
  // the worker's `clock`, keys checked (CheckKeys) and values checked
  // finite. Asks admit() first: false skips the update (a retry that was
  // applied), an error is returned as is. Then, under each slice's lock
  // once, applies the table's optimizer to its keys in request order (a key
  // listed twice is updated twice), with LARS' trust ratio `trust` (1: none;
  // Optimizer::ApplyTrusted), and raises the slice's change tag.
  // With `dst`, the keys' values after the push (or now, when skipped) are
  // copied there (keys.size() * width floats, any alignment), each run read
  // under the lock that applied it. Returns whether the update was applied;
  // *version gets the table's version after it (this push counted), or the
  // current one when skipped.
  using Admit = absl::FunctionRef<absl::StatusOr<bool>()>;
  absl::StatusOr<bool> Push(const KeySpec& keys, absl::Span<const float> grads, uint64_t clock,
                            float trust, Admit admit, char* dst, uint64_t* version);
  // Copies the keys' values to dst (keys.size() * width floats, any
  // alignment), keys checked (CheckKeys), under each slice's reader lock.
  void Read(const KeySpec& keys, char* dst) const;
  // Every value held here, for whole-table vector work (Sandblaster
  // L-BFGS's VectorOps): fn(values, state, n, copy) for each owned slice in
  // slice order, under its lock, with its n values and their optimizer state.
  // With `write`, a change at `clock` (the slice's tag raised; a slice in a
  // cut copied first when the change is outside it) that fn makes, and
  // again on the slice's copy (copy true) when the change is inside a cut
  // that copied it. Without it, under the reader lock: fn must not write.
  using RunFn = absl::FunctionRef<void(float* values, float* state, size_t n, bool copy)>;
  void ForEachRun(bool write, uint64_t clock, RunFn fn);

  // Checkpoints (server/store/cut_state.h).
  // Puts every owned slice in the cut at clock `cut` (0: out of any cut,
  // an abandoned or finished one), dropping the previous cut's copies.
  void SetCut(uint64_t cut);
  // For each owned slice in the cut: the records (checkpoint_records.h) of
  // its copy, or of the slice when it has none, taken under its lock, then
  // passed to sink after the lock is released; the slice leaves the cut.
  // since = 0: every slice; since = B > 0: only the slices changed since
  // the checkpoint at cut B (tag > B; the caller vouches that B was written
  // or restored here). max_record_bytes > 0: a slice whose rows take more is
  // written as records of consecutive key ranges of at most that many bytes
  // of rows (at least one row). Stops at sink's first error and returns it.
  absl::Status WriteCut(absl::FunctionRef<absl::Status(std::string record)> sink,
                        uint64_t since = 0, size_t max_record_bytes = 0);
  // Restore: copies the record's keys that lie in slices owned here (the
  // record may come from another slice size) and tags them unchanged (0).
  // Returns the keys loaded. Errors: FAILED_PRECONDITION (the record's row
  // layout is not this table's), DATA_LOSS (keys past num_keys).
  absl::StatusOr<uint64_t> LoadRecord(const SliceRecord& record);

 private:
  // One contiguous run of slice_size keys (fewer for the last).
  // Values and state start on a 64-byte boundary, so the optimizer's
  // vector kernel splits a run the same way in every process: a step's bits
  // do not depend on where the slice was allocated (--bsp_reduce's
  // bit-identical runs).
  struct Slice {
    absl::Mutex mu;
    AlignedVector<float> values ABSL_GUARDED_BY(mu);  // keys x width
    AlignedVector<float> state ABSL_GUARDED_BY(mu);   // values x state_per_value
    // The largest change tag of the slice (cut_state.h): 0 when loaded from
    // a checkpoint and unchanged since.
    uint64_t tag ABSL_GUARDED_BY(mu) = 0;
    // The checkpoint cut this slice is in (0: none), and its copy as of the
    // cut once a push outside the cut changed it (cut_state.h); the copy's
    // tag is the slice's at the copy, raised by pushes inside the cut.
    uint64_t cut ABSL_GUARDED_BY(mu) = 0;
    struct Copy {
      AlignedVector<float> values, state;
      uint64_t tag = 0;
    };
    std::unique_ptr<Copy> copy ABSL_GUARDED_BY(mu);
  };

  // Before a push at `clock` changes `slice`: raises the slice's tag (and
  // its copy's) to the push's and returns the copy the push must also be
  // applied to (an in-cut push on a copied slice), or null. A push outside
  // the cut copies the slice first, charging the budget (when it is short,
  // the cut fails through cut_state_ and the slice leaves it).
  Slice::Copy* PrepareChange(Slice& slice, uint64_t clock) ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu);
  // Drops the slice's copy, if any, giving its bytes back.
  void DropCopy(Slice& slice) ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu);
  // Push's update of an admitted push, by key list or by ranges.
  void ApplyList(absl::Span<const uint64_t> keys, absl::Span<const float> grads, uint64_t clock,
                 float trust, char* dst);
  void ApplyRanges(const KeySpec& keys, absl::Span<const float> grads, uint64_t clock, float trust,
                   char* dst);
  // The records of slice `s` holding `values` and `state` (WriteCut).
  std::vector<std::string> RecordsOf(uint64_t s, const AlignedVector<float>& values,
                                     const AlignedVector<float>& state,
                                     size_t max_record_bytes) const;

  const proto::TableDef def_;
  const std::unique_ptr<Optimizer> optimizer_;
  const uint64_t width_;
  const int state_per_value_;
  const uint64_t slice_size_;
  const int server_index_;
  const Placement placement_;
  MemoryBudget* const budget_;
  CutState* const cut_state_;
  // Built in the constructor and never resized, so read without a lock;
  // each slice guards its own memory. Null: owned by another server.
  std::vector<std::unique_ptr<Slice>> slices_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace ps

#endif  // PS_SERVER_STORE_DENSE_TABLE_H_
