// ShardStore's tables (internal to the store's files: shard_store.cc and
// shard_store_checkpoint.cc).
#ifndef PS_SERVER_STORE_SHARD_STORE_TABLE_H_
#define PS_SERVER_STORE_SHARD_STORE_TABLE_H_

#include <atomic>
#include <memory>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "server/store/cut_state.h"
#include "server/store/initializer.h"
#include "server/store/memory_budget.h"
#include "server/store/shard_store.h"

namespace ps {

// One contiguous run of keys of a table, placed on one server.
struct Slice {
  absl::Mutex mu;
  std::vector<float> values ABSL_GUARDED_BY(mu);  // keys x width
  std::vector<float> state ABSL_GUARDED_BY(mu);   // values x state_per_value
  // The largest change tag of the slice (server/cut_state.h): 0 when
  // loaded from a checkpoint and unchanged since.
  uint64_t tag ABSL_GUARDED_BY(mu) = 0;
  // The checkpoint cut this slice is in (0: none), and its copy as of the
  // cut once a push outside the cut changed it (server/cut_state.h); the
  // copy's tag is the slice's at the copy, raised by pushes inside the cut.
  uint64_t cut ABSL_GUARDED_BY(mu) = 0;
  struct Copy {
    std::vector<float> values, state;
    uint64_t tag = 0;
  };
  std::unique_ptr<Copy> copy ABSL_GUARDED_BY(mu);
};

// Before a push at `clock` changes `slice` (of table `def`): the copy the
// push must also be applied to (an in-cut push on a copied slice), or null;
// copies the slice first when the push is outside the cut, charging `budget`
// (when it is short, the cut fails through cut_state and the slice leaves
// it). Sets *tag to the push's change tag (the cut when inside it).
Slice::Copy* PrepareCut(Slice& slice, uint64_t clock, const proto::TableDef& def,
                        CutState& cut_state, MemoryBudget& budget, uint64_t* tag)
    ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu);
// Drops the slice's copy, if any, giving its bytes back to `budget`.
void DropCopy(Slice& slice, MemoryBudget& budget) ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu);

// A table's definition, optimizer and owned slices. The slice vector is built
// in the constructor and never resized, so it is read without a lock; each
// slice guards its own memory. A sparse table keeps its rows in a
// SparseTable instead (and no dense slices).
class ShardStore::Table {
 public:
  Table(const proto::TableDef& def, std::unique_ptr<Optimizer> optimizer, int server_index,
        const Placement& placement, MemoryBudget* budget, Clock* clock, CutState* cut_state)
      : def_(def), optimizer_(std::move(optimizer)) {
    if (def.kind() == proto::TABLE_SPARSE) {
      absl::StatusOr<std::unique_ptr<Optimizer>> own = MakeOptimizer(def);
      sparse_ = std::make_unique<SparseTable>(def, *std::move(own), server_index, placement, budget,
                                              clock);
      sparse_->set_cut_state(cut_state);
      return;
    }
    const uint64_t slice_size = placement.config().slice_size;
    const uint64_t num_slices = (def.num_keys() + slice_size - 1) / slice_size;
    slices_.resize(num_slices);
    for (uint64_t s = 0; s < num_slices; ++s) {
      if (placement.OwnerOfSlice(def.name(), s) != server_index) continue;
      const uint64_t first = s * slice_size;
      const uint64_t keys = std::min(def.num_keys(), first + slice_size) - first;
      auto slice = std::make_unique<Slice>();
      absl::MutexLock lock(&slice->mu);
      slice->tag = cut_state->ChangeTag();
      slice->values.resize(keys * def.width());
      InitializeValues(def, first, keys, slice->values.data());
      slice->state.resize(slice->values.size() * optimizer_->state_per_value());
      optimizer_->InitState(slice->state.data(), slice->state.size());
      slices_[s] = std::move(slice);
    }
  }

  const proto::TableDef& def() const { return def_; }
  const Optimizer& optimizer() const { return *optimizer_; }
  Slice* slice(uint64_t s) const { return slices_[s].get(); }
  uint64_t num_slices() const { return slices_.size(); }
  // Puts every slice here in the cut at `cut` (0: out of any cut), dropping
  // the copies of the previous one (shard_store_checkpoint.cc).
  void SetCut(uint64_t cut, MemoryBudget& budget);
  // Null for a dense table.
  SparseTable* sparse() const { return sparse_.get(); }
  std::atomic<uint64_t>& version() { return sparse_ ? sparse_->version() : version_; }

 private:
  const proto::TableDef def_;
  const std::unique_ptr<Optimizer> optimizer_;
  std::vector<std::unique_ptr<Slice>> slices_;  // null: owned by another server
  std::unique_ptr<SparseTable> sparse_;
  std::atomic<uint64_t> version_{0};
};

}  // namespace ps

#endif  // PS_SERVER_STORE_SHARD_STORE_TABLE_H_
