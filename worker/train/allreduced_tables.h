// AllreducedTables: dense tables that every worker of a job keeps itself and
// that synchronous data parallelism keeps identical (issue 30's
// --dense_sync=allreduce, the HPC way for dense layers while sparse tables
// stay on the parameter servers): each round, the members' gradients are
// summed (one Collective::AllreduceSum of every table's gradient in one
// buffer), divided by the number of members that had a batch, and applied
// by each table's own optimizer (common/optimizer, the servers' rules) in
// every member alike, at the round's number as the clock, so that every
// member holds the same bits.
//
// Members may run out of data at different rounds (their shares of a file
// differ by an example, so their step counts by one): a member whose data
// has ended calls Finish(), which takes part in the others' rounds with no
// gradient until every member has ended. Not thread-safe; the Collective
// is not owned.
#ifndef PS_WORKER_TRAIN_ALLREDUCED_TABLES_H_
#define PS_WORKER_TRAIN_ALLREDUCED_TABLES_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/aligned_vector.h"
#include "common/optimizer/optimizer.h"
#include "proto/ps.pb.h"
#include "worker/collective/collective.h"

namespace ps {

// The optimizer a table kept by allreduce steps with. Errors:
// INVALID_ARGUMENT naming a table that is not dense, MakeOptimizer's.
absl::StatusOr<std::unique_ptr<Optimizer>> AllreducedOptimizer(const proto::TableDef& def);

class AllreducedTables {
 public:
  // The tables, each num_keys * width values, zero until set (values()) or
  // synchronized (SyncFrom), with the optimizer's initial state. Errors:
  // INVALID_ARGUMENT naming a table that is not dense or whose optimizer
  // cannot be made.
  static absl::StatusOr<std::unique_ptr<AllreducedTables>> Create(
      const std::vector<proto::TableDef>& defs, Collective* group);

  size_t num_tables() const { return tables_.size(); }
  const proto::TableDef& def(size_t t) const { return tables_[t].def; }
  absl::Span<float> values(size_t t) { return absl::MakeSpan(tables_[t].values); }
  absl::Span<const float> values(size_t t) const { return tables_[t].values; }
  // The optimizer's state of table t (state_per_value floats per value,
  // interleaved as the optimizer keeps it; empty for plain SGD), and the
  // state Create started it at.
  absl::Span<float> state(size_t t) { return absl::MakeSpan(tables_[t].state); }
  absl::Span<const float> state(size_t t) const { return tables_[t].state; }
  absl::Span<const float> initial_state(size_t t) const { return tables_[t].initial_state; }
  // Rounds taken so far (the clock of the next one).
  uint64_t rounds() const { return rounds_; }
  // The floats each round sends through the allreduce (every gradient and
  // a flag).
  size_t round_floats() const { return buffer_.size(); }
  // > 0: after every `rounds`-th round (and at the end of Finish), every
  // member checks that all hold the same bits (CheckIdentical); a
  // difference is the round's error. Set alike on every member.
  void set_check_every(int rounds) { check_every_ = rounds; }

  // Every member takes member root's values and optimizer state: the
  // start, from what the root read from the servers.
  absl::Status SyncFrom(int root);

  // One round with a batch: grads[t] is this member's gradient of table t
  // (its full size). Errors: INVALID_ARGUMENT naming the table whose
  // gradient has the wrong size (nothing sent); the Collective's.
  absl::Status Step(absl::Span<const absl::Span<const float>> grads);

  // This member's data has ended: joins the others' rounds with no
  // gradient until every member has called Finish. Returns the rounds it
  // joined. Errors: the Collective's; CheckIdentical's with set_check_every.
  absl::StatusOr<int64_t> Finish();

  // Whether every member holds the same bits (values and state), compared
  // through a 64-bit hash of each member's tables. Errors:
  // FAILED_PRECONDITION naming the members whose tables differ from member
  // 0's; the Collective's.
  absl::Status CheckIdentical();

 private:
  struct Table {
    proto::TableDef def;
    std::unique_ptr<Optimizer> optimizer;
    // Aligned: the optimizer's vectorized kernels then take the same path
    // (and give the same bits) on every member.
    AlignedVector<float> values, state, initial_state;
  };
  explicit AllreducedTables(Collective* group) : group_(group) {}
  // One round: buffer_ holds this member's gradients (zeros when idle)
  // and, last, 1 (a batch) or 0 (idle). Returns how many members had a
  // batch; applies their mean gradient when there were any.
  absl::StatusOr<int> Round();

  Collective* const group_;
  std::vector<Table> tables_;
  AlignedVector<float> buffer_;  // every table's gradient, one after another, and the flag
  uint64_t rounds_ = 0;
  int check_every_ = 0;
};

}  // namespace ps

#endif  // PS_WORKER_TRAIN_ALLREDUCED_TABLES_H_
