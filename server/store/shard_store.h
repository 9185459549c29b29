// ShardStore: the parameters one server (or one shard of a replicated
// server) owns: its tables by name, each a DenseTable (server/store/
// dense_table.h) or a SparseTable (server/store/sparse_table.h) holding the
// slices the hash ring assigns here; the memory budget they are charged to;
// and the checkpoint cut across them (server/store/cut_state.h). It
// validates requests, dispatches them to the table and coordinates cuts;
// the tables own their slices, rows, locks and optimizer state.
//
// Thread-safe. The table map has its own mutex (taken briefly to find a
// table); each slice has a reader/writer mutex, so pushes to different slices
// never contend and pulls of one slice share it. Every request is validated
// completely before anything is changed: a rejected push changes nothing.
// Memory: every table is charged, before it is allocated, against a budget
// (its values and optimizer state); a table that does not fit is refused.
// Sparse tables are charged as their rows are created; a push whose new
// rows do not fit is refused.
// Tables are initialized outside every lock, so creating a large one does
// not hold up other calls. Knows nothing of gRPC.
// Checkpoints are full or incremental (WriteCut's `since`): each dense slice
// carries a uint64 change tag (8 bytes a slice), each sparse row a uint32
// one (4 bytes a row) and each sparse slice the keys it evicted lately
// (server/store/sparse_table.h); server/store/cut_state.h says how changes
// are tagged.
#ifndef PS_SERVER_STORE_SHARD_STORE_H_
#define PS_SERVER_STORE_SHARD_STORE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "common/clock.h"
#include "common/key_spec.h"
#include "common/optimizer/optimizer.h"
#include "common/placement.h"
#include "proto/ps.pb.h"
#include "server/checkpoint/checkpoint_records.h"
#include "server/store/cut_state.h"
#include "server/store/memory_budget.h"
#include "server/store/sparse_table.h"

namespace ps {

struct StoreLimits {
  uint64_t memory_budget_bytes = ~uint64_t{0};
  uint32_t max_tables = ~uint32_t{0};
  // The process's budget, shared by the stores of all its shards (not
  // owned; null: this store's budget is the process's).
  MemoryBudget* process_budget = nullptr;
  // Tiered tables (storage STORAGE_TIERED): the directory their rows go
  // under (ps_server --table_dir; "": tiered tables are refused), and the
  // bytes their files may take there together (--disk_budget_mb; 0: none):
  // the process's budget, shared by the stores of all its shards (not
  // owned), or when null this store's own of disk_budget_bytes.
  std::string table_dir;
  uint64_t disk_budget_bytes = 0;
  MemoryBudget* process_disk_budget = nullptr;
  // Not empty on a replicated shard's copy: each tiered table's directory
  // is <table_dir>/<name>.shard<index>.<tier_scratch>, emptied when opened
  // and removed with the table (the chain holds the rows: a copy that
  // comes back is sent a snapshot).
  std::string tier_scratch;
  // The scratch directories hold a copy kept at a clean stop
  // (ShardHost::KeepCopies): served again, not emptied (OpenTierStore).
  bool tier_reuse = false;
};

// What ShardStore::Push needs of a push besides its keys, values and clock.
struct StorePushOptions {
  // A sparse table's admission and eviction, recorded by a primary or
  // replayed by a copy (SparseTable::Decisions; null: decided here).
  SparseTable::Decisions* decisions = nullptr;
  // The push's whole-table norms (PushRequest.layer_norms; null: none).
  const proto::LayerNorms* layer_norms = nullptr;
};

class ShardStore {
 public:
  // `clock` (the time of sparse tables' evict_after_seconds) must outlive
  // the store.
  ShardStore(int server_index, const Placement& placement, StoreLimits limits = {},
             Clock* clock = Clock::Real());
  ~ShardStore();

  // Creates the table's slices owned by this server, initialized from the
  // definition. Returns true if created, false if an identical table exists.
  // Errors: INVALID_ARGUMENT (bad definition), ALREADY_EXISTS (same name,
  // different definition; both are named in the message),
  // RESOURCE_EXHAUSTED (over the table cap, or over the memory budget:
  // names the table, the bytes it needs and the bytes left).
  absl::StatusOr<bool> CreateTable(const proto::TableDef& def);

  // Bytes the table's owned slices and their optimizer state take here.
  absl::StatusOr<uint64_t> TableBytes(const proto::TableDef& def) const;
  // Bytes charged to the budget so far (tables created or being created).
  uint64_t bytes_used() const;
  // A replicated copy kept at a clean stop: every table must be a tiered
  // sparse table (FAILED_PRECONDITION naming one that is not, nothing
  // changed); each writes its cache to disk and marks its directory closed,
  // and the directories stay when the tables go (the store takes no call
  // after this). Errors: the first table whose close failed (its directory
  // then stays marked open, and is refused when reused).
  absl::Status KeepTieredTables();
  // Whether there are tables and every one is a tiered sparse table (what
  // KeepTieredTables needs).
  bool AllTablesTiered() const;

  struct PushResult {
    bool duplicate = false;  // the request id had been applied before
    uint64_t version = 0;    // pushes applied to this table here, after this one
  };
  // Applies `grads` (keys.size() * width floats, key-major) with the table's
  // optimizer, for a push stamped with the worker's `clock` (it drives the
  // learning-rate schedule). Once the request is valid, `admit` decides: true
  // applies it,
  // false skips it (a retry already applied: the result says duplicate), an
  // error is returned as is. Errors, with nothing applied: NOT_FOUND
  // (unknown table), INVALID_ARGUMENT (empty or reversed range, key >=
  // num_keys, wrong number of values, NaN/Inf value: the message names the
  // key; ranges on a sparse table), FAILED_PRECONDITION (a key owned by
  // another server: names key, slice and owner), RESOURCE_EXHAUSTED (new
  // rows of a sparse table over the memory budget), and admit's errors.
  // A LARS table (TableDef lars_eta) scales the gradient by the trust ratio
  // of options.layer_norms (common/optimizer/lars.h), and refuses a push
  // without them, or with a negative or non-finite norm, with
  // INVALID_ARGUMENT naming the table.
  using Admit = absl::FunctionRef<absl::StatusOr<bool>()>;
  using PushOptions = StorePushOptions;
  absl::StatusOr<PushResult> Push(absl::string_view table, const KeySpec& keys,
                                  absl::Span<const float> grads, uint64_t clock, Admit admit,
                                  const PushOptions& options = {});
  // Push, then copies the values of the same keys after it into the buffer
  // that allocate(bytes) returns (as Pull does), each run read while its
  // slice is still locked for the push. A push that admit() says is a retry
  // is not applied; its keys are read all the same. Errors as for Push.
  absl::StatusOr<PushResult> PushAndRead(absl::string_view table, const KeySpec& keys,
                                         absl::Span<const float> grads, uint64_t clock, Admit admit,
                                         absl::FunctionRef<char*(size_t bytes)> allocate,
                                         const PushOptions& options = {});
  // Push with every request admitted, at clock 0.
  absl::StatusOr<PushResult> Push(absl::string_view table, const KeySpec& keys,
                                  absl::Span<const float> grads);

  // Copies the current values (keys.size() * width floats, key-major) into
  // the buffer that allocate(bytes) returns (called once, after validation)
  // and returns the table's version: every push applied before the copy
  // started. A key of a sparse table without a row reads as its initial
  // values (no row is created). Errors as for Push (minus the value checks).
  absl::StatusOr<uint64_t> Pull(absl::string_view table, const KeySpec& keys,
                                absl::FunctionRef<char*(size_t bytes)> allocate);
  // The same, into a string.
  absl::StatusOr<uint64_t> Pull(absl::string_view table, const KeySpec& keys, std::string* out);

  // Sandblaster L-BFGS: applies the vector ops (proto::VectorOp,
  // common/optimizer/lbfgs_vectors.h) in order to every value of the table
  // held here, as a change at `clock` when one of them writes. Returns one
  // partial sum per DOT op and the number of values they ran over. Errors,
  // with nothing changed: NOT_FOUND (unknown table), FAILED_PRECONDITION
  // (not an OPT_LBFGS table), INVALID_ARGUMENT (an op's vector past the
  // table's, naming the op).
  struct VectorOpsResult {
    std::vector<double> partials;
    uint64_t values = 0;
  };
  absl::StatusOr<VectorOpsResult> RunVectorOps(absl::string_view table,
                                               absl::Span<const proto::VectorOp> ops,
                                               uint64_t clock);

  // Definition of a table, or NOT_FOUND.
  absl::StatusOr<proto::TableDef> GetTableDef(absl::string_view table) const;

  // Evicts aged rows of sparse tables (SparseTable::Sweep), at most once a
  // second of the store's clock. Returns the rows evicted; with
  // `evicted_keys`, appends (table, keys) for each table that evicted rows.
  uint64_t Sweep(
      std::vector<std::pair<std::string, std::vector<uint64_t>>>* evicted_keys = nullptr);
  // Evicts the rows of `keys` of a sparse table (a primary's Sweep replayed
  // on a copy); 0 for a table that is not sparse or not here.
  uint64_t EvictRows(absl::string_view table, absl::Span<const uint64_t> keys);
  // Sets the sparse-table fields (rows, admitted, refused, evicted) of
  // stats->table()'s statistics; false when that is not a sparse table here.
  bool FillSparseStats(proto::TableStats* stats) const;
  // Names of the sparse tables.
  std::vector<std::string> SparseTableNames() const;

  // Checkpoints: a consistent cut at a clock (server/cut_state.h).
  // Marks the cut at `cut` (>= 1) on every table here. FAILED_PRECONDITION,
  // with nothing marked, when a cut is already marked, or when a push at a
  // clock >= cut has already been applied here (names that clock: a later
  // cut is needed). Even when refused for that clock, later changes are
  // tagged after `cut` (an overstatement, never a loss).
  absl::Status MarkCut(uint64_t cut);
  // Every push of the cut has been applied here: from now on every push is
  // outside it, whatever its clock.
  void CompleteCut();
  // Writes out the cut of the tables that existed at MarkCut, table by
  // table: sink(def, record) for each owned slice (a record of
  // checkpoint_records.h), taken under the slice's lock; the slice then
  // leaves the cut. The cut ends, whatever the result. Errors: why the cut
  // failed (e.g. no memory for a copy), then sink's.
  //
  // since = 0: a full checkpoint, every slice whole. since = B > 0: an
  // incremental checkpoint to be chained to the committed checkpoint at cut
  // B (the caller's contract: B is the cut of the last checkpoint committed,
  // so no later call passes a smaller one). Only what changed since B is
  // written: a dense slice whole when changed, a sparse slice as a `delta`
  // record of its changed rows and erased keys (or whole, see
  // SparseTable::WriteCut), nothing for an unchanged slice. It is honoured
  // when B < cut and B is the cut of one of the last kKeptBases successful
  // WriteCuts here or the one passed to SetRestoredCut since; otherwise
  // every slice is written whole, without `delta` (records that replace
  // their slices, so the result is right chained to any base).
  static constexpr size_t kKeptBases = 4;
  // Whether WriteCut(sink, since) of the cut now marked would honour
  // `since` (> 0) as above, rather than write every slice whole.
  bool CanWriteSince(uint64_t since);
  // max_record_bytes > 0: no record holds more than that many bytes of
  // rows (at least one row); a larger dense slice is written as records of
  // consecutive key ranges, a sparse bucket as SparseTable::WriteCut says.
  // With `snapshots` (a full cut): a tiered table's rows on disk go into a
  // snapshot of its store in snapshot_prefix<n> (n: 0, 1, ... per
  // snapshot, a new directory) instead of records, and the snapshot is
  // appended to *snapshots (SparseTable::WriteCut).
  absl::Status WriteCut(
      absl::FunctionRef<absl::Status(const proto::TableDef& def, std::string record)> sink,
      uint64_t since = 0, size_t max_record_bytes = 0,
      std::vector<proto::RowStoreSnapshot>* snapshots = nullptr,
      const std::string& snapshot_prefix = "");
  // Abandons the cut, dropping its copies.
  void EndCut();
  // The largest clock of a push applied (or being applied) here.
  uint64_t max_clock() const { return max_clock_.load(); }
  // Restore: the restored checkpoint's pushes count as applied up to
  // `clock`, so that a later cut is above the restored workers' clocks.
  void RaiseMaxClock(uint64_t clock) {
    uint64_t seen = max_clock_.load();
    while (clock > seen && !max_clock_.compare_exchange_weak(seen, clock)) {
    }
  }
  // The definitions of every table here, by name.
  std::vector<proto::TableDef> TableDefs() const;
  // Restore: loads a checkpoint record into the table it names (created
  // beforehand from the manifest): the part of its keys owned here, by this
  // store's placement. Returns the keys loaded. Errors: NOT_FOUND (no such
  // table), FAILED_PRECONDITION (the record's layout is not the table's),
  // DATA_LOSS (keys outside the table), RESOURCE_EXHAUSTED (memory budget).
  // What it loads counts as unchanged (tag 0) for incremental checkpoints.
  absl::StatusOr<uint64_t> LoadRecord(const SliceRecord& record);
  // After every record of a checkpoint's chain was loaded, before any push:
  // the store now holds the checkpoint at cut `cut` (> 0), so later changes
  // are tagged after it and WriteCut(sink, cut) writes only what changed
  // since the restore. Without this call an incremental WriteCut on top of
  // the restored checkpoint writes every slice whole.
  void SetRestoredCut(uint64_t cut);

  int server_index() const { return server_index_; }
  const Placement& placement() const { return placement_; }

 private:
  // A table here: a DenseTable or a SparseTable (shard_store.cc).
  struct Table;

  // Push and PushAndRead (allocate null: no read back).
  absl::StatusOr<PushResult> PushImpl(absl::string_view table, const KeySpec& keys,
                                      absl::Span<const float> grads, uint64_t clock, Admit admit,
                                      const absl::FunctionRef<char*(size_t bytes)>* allocate,
                                      const PushOptions& options);
  bool CanWriteSinceLocked(uint64_t since) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(cut_mu_);
  // NOT_FOUND for an unknown table.
  absl::StatusOr<std::shared_ptr<Table>> FindTable(absl::string_view name) const;
  // FindTable, then checks that every key exists and is owned here. For a
  // sparse table, *plan gets the keys' plan (its slice groups), which
  // the check computes and the push or read then uses.
  absl::StatusOr<std::shared_ptr<Table>> FindTableForKeys(absl::string_view name,
                                                          const KeySpec& keys,
                                                          SparseTable::KeyPlan* plan) const;

  const int server_index_;
  const Placement placement_;
  const StoreLimits limits_;
  Clock* const clock_;

  // Charged: created tables, those being initialized, sparse tables' rows.
  // Declared before the tables, which give their bytes back when destroyed.
  MemoryBudget budget_;
  // The tiered tables' files, when the process shares none
  // (limits_.process_disk_budget); before the tables, likewise.
  MemoryBudget own_disk_budget_;
  mutable absl::Mutex tables_mu_;
  absl::flat_hash_map<std::string, std::shared_ptr<Table>> tables_ ABSL_GUARDED_BY(tables_mu_);
  uint32_t tables_pending_ ABSL_GUARDED_BY(tables_mu_) = 0;
  absl::Mutex tier_create_mu_ ABSL_ACQUIRED_BEFORE(tables_mu_);  // CreateTable of tiered tables
  absl::Time last_sweep_ ABSL_GUARDED_BY(tables_mu_) = absl::InfinitePast();

  // Checkpoint cut. cut_state_ is shared with the tables.
  CutState cut_state_;
  std::atomic<uint64_t> max_clock_{0};
  absl::Mutex cut_mu_;
  uint64_t cut_ ABSL_GUARDED_BY(cut_mu_) = 0;  // 0: none marked
  std::vector<std::shared_ptr<Table>> cut_tables_ ABSL_GUARDED_BY(cut_mu_);
  // Cuts an incremental write may be on top of (WriteCut), oldest first, at
  // most kKeptBases.
  std::vector<uint64_t> bases_ ABSL_GUARDED_BY(cut_mu_);
};

}  // namespace ps

#endif  // PS_SERVER_STORE_SHARD_STORE_H_
