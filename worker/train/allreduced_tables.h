// AllreducedTables: dense tables that every worker of a job keeps itself and
// that synchronous data parallelism keeps identical (issue 30's
// --dense_sync=allreduce, the HPC way for dense layers while sparse tables
// stay on the parameter servers): each step's gradients are summed over the
// members (one Collective::AllreduceSum of every table's gradient in one
// buffer), divided by their number, and applied by each table's own
// optimizer (common/optimizer, the servers' rules) in every member alike, so
// that every member holds the same bits. Not thread-safe; the Collective is
// not owned.
#ifndef PS_WORKER_TRAIN_ALLREDUCED_TABLES_H_
#define PS_WORKER_TRAIN_ALLREDUCED_TABLES_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "common/optimizer/optimizer.h"
#include "proto/ps.pb.h"
#include "worker/collective/collective.h"

namespace ps {

class AllreducedTables {
 public:
  // The tables, each num_keys * width values, zero until set (values()) or
  // synchronized (SyncFrom). Errors: INVALID_ARGUMENT naming a table that
  // is not dense or whose optimizer cannot be made.
  static absl::StatusOr<std::unique_ptr<AllreducedTables>> Create(
      const std::vector<proto::TableDef>& defs, Collective* group);

  size_t num_tables() const { return tables_.size(); }
  const proto::TableDef& def(size_t t) const { return tables_[t].def; }
  absl::Span<float> values(size_t t) { return absl::MakeSpan(tables_[t].values); }

  // Every member takes member root's values (and optimizer state): the
  // start, from the values the root pulled from the servers.
  absl::Status SyncFrom(int root);

  // One step: grads[t] is this member's gradient of table t (its full
  // size), stamped with `clock` for the optimizer's schedule. Errors:
  // INVALID_ARGUMENT naming the table whose gradient has the wrong size
  // (nothing sent); the Collective's.
  absl::Status Step(absl::Span<const absl::Span<const float>> grads, uint64_t clock);

 private:
  struct Table {
    proto::TableDef def;
    std::unique_ptr<Optimizer> optimizer;
    std::vector<float> values, state;
  };
  explicit AllreducedTables(Collective* group) : group_(group) {}

  Collective* const group_;
  std::vector<Table> tables_;
  std::vector<float> buffer_;  // every table's gradient, one after another
};

}  // namespace ps

#endif  // PS_WORKER_TRAIN_ALLREDUCED_TABLES_H_
