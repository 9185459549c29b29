// The servers' side of --dense_sync=allreduce (issue 30): dense tables that
// the workers keep themselves (AllreducedTables) still have a copy on the
// parameter servers, so that checkpoints, evaluation (--eval_only) and a
// resumed job see them. Rank 0 reads the copy to start everyone from, and
// writes its tables back every few steps and at the end (Publish).
//
// The copy of a table "T" is a dense table of the same name, shape and
// initializer whose optimizer adds what is pushed (AveragingTableOptimizer:
// SGD at rate 1), so a push of (copy - mine) sets it to mine. Its optimizer
// state, when the workers' optimizer keeps one, goes to "T/optimizer_state"
// (width 1, state_per_value floats per value, zeros at the start) as its
// difference from the state the optimizer starts with: a fresh table then
// reads as a fresh optimizer.
#ifndef PS_WORKER_TRAIN_DENSE_ALLREDUCE_H_
#define PS_WORKER_TRAIN_DENSE_ALLREDUCE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "proto/ps.pb.h"
#include "worker/client/ps_client.h"
#include "worker/collective/collective.h"
#include "worker/train/allreduced_tables.h"

namespace ps {

// What a trainer needs for --dense_sync=allreduce.
struct DenseAllreduceConfig {
  // The workers of the job (null: the dense tables live on the servers, the
  // default). Not owned.
  Collective* group = nullptr;
  // The optimizer fields of the tables the workers keep (the optimizer
  // flags'); the servers' copies get AveragingTableOptimizer().
  proto::TableDef optimizer;
  // Rank 0 writes its tables to the servers every this many steps (and at
  // the end); 0: only at the end.
  int publish_every = 100;
  // > 0: every this many steps, every rank checks that all ranks hold the
  // same bits (AllreducedTables::CheckIdentical); a difference fails the job.
  int check_every = 0;
};

// "T/optimizer_state".
std::string OptimizerStateTable(const std::string& table);

// The servers' tables for `local` (the workers' definitions, with their
// optimizer): each with AveragingTableOptimizer(), and a state table after
// each whose optimizer keeps state. Errors: INVALID_ARGUMENT naming a table
// that is not dense or whose optimizer cannot be made.
absl::StatusOr<std::vector<proto::TableDef>> ServerCopyTables(
    const std::vector<proto::TableDef>& local);

// Reads the servers' copies into `tables` (values, and state from the state
// tables: initial state + what they hold). Errors: the client's.
absl::Status ReadServerCopies(PsClient& client, AllreducedTables* tables);

// Sets the servers' copies to `tables` (reads them, pushes the difference
// at `clock`). Returns the bytes moved. Errors: the client's.
absl::StatusOr<int64_t> WriteServerCopies(PsClient& client, const AllreducedTables& tables,
                                          uint64_t clock);

}  // namespace ps

#endif  // PS_WORKER_TRAIN_DENSE_ALLREDUCE_H_
