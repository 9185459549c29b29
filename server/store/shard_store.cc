#include "server/store/shard_store.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <system_error>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/optimizer/lars.h"
#include "common/optimizer/lbfgs_vectors.h"
#include "common/table_def.h"
#include "server/store/dense_table.h"
#include "server/store/finite_check.h"
#include "server/store/tier_directory.h"

namespace ps {

// Exactly one of the two is set, at creation, and never changes.
struct ShardStore::Table {
  std::unique_ptr<DenseTable> dense;
  std::unique_ptr<SparseTable> sparse;
  std::string scratch_dir;  // a tiered table's scratch directory, removed with it
  bool closed = false;      // KeepTieredTables closed it

  ~Table() {
    if (sparse != nullptr && sparse->tiered() && scratch_dir.empty() && !closed) {
      // The cache to disk, then the mark that the directory may be served
      // again (OpenTierStore): a crash leaves it marked open.
      if (absl::Status s = sparse->CloseTier(ClosedTierMeta(sparse->def())); !s.ok()) {
        LogEvent("shard store", absl::StrCat(s.message(), "; the directory is left marked open"));
      }
    }
    sparse.reset();  // closes the store first
    std::error_code ec;
    if (!scratch_dir.empty()) std::filesystem::remove_all(scratch_dir, ec);
  }

  const proto::TableDef& def() const { return dense != nullptr ? dense->def() : sparse->def(); }
  std::atomic<uint64_t>& version() {
    return dense != nullptr ? dense->version() : sparse->version();
  }
  // Puts the table in the cut at `cut` (0: out of any cut).
  void SetCut(uint64_t cut) {
    if (dense != nullptr) return dense->SetCut(cut);
    sparse->SetCut(cut);
  }
};

namespace {

absl::Status Conflict(const proto::TableDef& existing, const proto::TableDef& requested) {
  return absl::AlreadyExistsError(absl::StrCat(
      "table '", requested.name(), "' already exists with a different definition: existing ",
      TableDefSummary(existing), ", requested ", TableDefSummary(requested)));
}

// The key whose values start at value index `i` / width.
uint64_t KeyAtValue(const KeySpec& keys, uint64_t value_index, uint64_t width) {
  uint64_t index = value_index / width;
  if (keys.is_list) return keys.keys[index];
  for (const KeySpec::Range& r : keys.ranges) {
    if (index < r.end - r.begin) return r.begin + index;
    index -= r.end - r.begin;
  }
  return 0;
}

}  // namespace

ShardStore::ShardStore(int server_index, const Placement& placement, StoreLimits limits,
                       Clock* clock)
    : server_index_(server_index),
      placement_(placement),
      limits_(limits),
      clock_(clock),
      budget_(limits.memory_budget_bytes, limits.process_budget),
      own_disk_budget_(limits.disk_budget_bytes == 0 ? ~uint64_t{0} : limits.disk_budget_bytes) {}

ShardStore::~ShardStore() = default;

absl::StatusOr<uint64_t> ShardStore::TableBytes(const proto::TableDef& def) const {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(def);
  if (!optimizer.ok()) return optimizer.status();
  if (def.kind() == proto::TABLE_SPARSE) return SparseTable::BytesToCreate(def);
  return DenseTable::BytesToCreate(def, (*optimizer)->state_per_value(), placement_, server_index_);
}

uint64_t ShardStore::bytes_used() const { return budget_.used(); }

bool ShardStore::AllTablesTiered() const {
  absl::MutexLock lock(&tables_mu_);
  for (const auto& [name, table] : tables_) {
    if (table->sparse == nullptr || !table->sparse->tiered()) return false;
  }
  return !tables_.empty();
}

absl::Status ShardStore::KeepTieredTables() {
  absl::MutexLock lock(&tables_mu_);
  for (const auto& [name, table] : tables_) {
    if (table->sparse == nullptr || !table->sparse->tiered()) {
      return absl::FailedPreconditionError(
          absl::StrCat("table '", name, "' of shard ", server_index_,
                       " is held in memory only: the copy cannot be kept on disk"));
    }
  }
  absl::Status first;
  for (const auto& [name, table] : tables_) {
    table->closed = true;
    table->scratch_dir.clear();  // kept
    absl::Status s = table->sparse->CloseTier(ClosedTierMeta(table->def()));
    if (!s.ok() && first.ok()) first = s;
  }
  return first;
}

absl::StatusOr<bool> ShardStore::CreateTable(const proto::TableDef& def) {
  if (absl::Status s = ValidateTableDef(def); !s.ok()) return s;
  absl::StatusOr<uint64_t> bytes = TableBytes(def);
  if (!bytes.ok()) return bytes.status();
  // Tiered tables one at a time: every worker creates the job's tables, and
  // a second creator must find the first's table, not open its directory
  // again (the store locks it; reopening one of an earlier run takes a
  // while).
  absl::MutexLockMaybe tiered(def.storage() == proto::STORAGE_TIERED ? &tier_create_mu_ : nullptr);
  {
    // Charge the budget before allocating anything.
    absl::MutexLock lock(&tables_mu_);
    auto it = tables_.find(def.name());
    if (it != tables_.end()) {
      if (SameTableDef(it->second->def(), def)) return false;
      return Conflict(it->second->def(), def);
    }
    if (tables_.size() + tables_pending_ >= limits_.max_tables) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "table '", def.name(), "' would be table ", tables_.size() + tables_pending_ + 1,
          " on server ", server_index_, ", over the limit of ", limits_.max_tables,
          " tables (ps_server --max_tables)"));
    }
    if (!budget_.TryCharge(*bytes)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "table '", def.name(), "' needs ", *bytes, " bytes on server ", server_index_,
          " (its slices here with optimizer state), but only ", budget_.left(),
          " of the memory budget of ", budget_.limit(),
          " bytes are left (ps_server --memory_budget_mb); use fewer keys or more servers"));
    }
    ++tables_pending_;
  }
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(def);
  // Build outside the lock (initialization touches every value), then insert;
  // a concurrent creator of the same table may win the race.
  auto table = std::make_shared<Table>();
  std::unique_ptr<RowStore> tier;
  if (def.storage() == proto::STORAGE_TIERED) {
    const TierPlace place{
        limits_.table_dir, limits_.tier_scratch, limits_.tier_reuse, server_index_,
        limits_.process_disk_budget != nullptr ? limits_.process_disk_budget : &own_disk_budget_};
    absl::StatusOr<OpenedTier> opened =
        OpenTierStore(place, def, SparseTable::StoreRowBytes(def, **optimizer));
    if (!opened.ok()) {
      absl::MutexLock lock(&tables_mu_);
      --tables_pending_;
      budget_.Release(*bytes);
      return opened.status();
    }
    tier = std::move(opened->store);
    table->scratch_dir = opened->scratch_dir;
  }
  if (def.kind() == proto::TABLE_SPARSE) {
    table->sparse = std::make_unique<SparseTable>(def, *std::move(optimizer), server_index_,
                                                  placement_, &budget_, clock_, std::move(tier));
    table->sparse->set_cut_state(&cut_state_);
  } else {
    table->dense = std::make_unique<DenseTable>(def, *std::move(optimizer), server_index_,
                                                placement_, &budget_, &cut_state_);
  }
  std::shared_ptr<Table> created = table;
  {
    absl::MutexLock lock(&tables_mu_);
    --tables_pending_;
    auto [it, inserted] = tables_.try_emplace(def.name(), std::move(table));
    if (!inserted) {
      budget_.Release(*bytes);
      if (SameTableDef(it->second->def(), def)) return false;
      return Conflict(it->second->def(), def);
    }
  }
  // A table created while a cut is marked joins it, so that its pushes
  // below the cut are in that checkpoint (cut_mu_ is taken before
  // tables_mu_, as in MarkCut).
  absl::MutexLock cut_lock(&cut_mu_);
  if (cut_ != 0 &&
      std::find(cut_tables_.begin(), cut_tables_.end(), created) == cut_tables_.end()) {
    created->SetCut(cut_);
    cut_tables_.push_back(created);
  }
  return true;
}

absl::StatusOr<std::shared_ptr<ShardStore::Table>> ShardStore::FindTable(
    absl::string_view name) const {
  absl::ReaderMutexLock lock(&tables_mu_);
  auto it = tables_.find(name);
  if (it == tables_.end()) {
    return absl::NotFoundError(absl::StrCat("table '", name, "' not found on server ",
                                            server_index_, "; create it first"));
  }
  return it->second;
}

uint64_t ShardStore::EvictRows(absl::string_view table, absl::Span<const uint64_t> keys) {
  absl::StatusOr<std::shared_ptr<Table>> found = FindTable(table);
  if (!found.ok() || (*found)->sparse == nullptr) return 0;
  return (*found)->sparse->EvictKeys(keys);
}

uint64_t ShardStore::Sweep(
    std::vector<std::pair<std::string, std::vector<uint64_t>>>* evicted_keys) {
  const absl::Time now = clock_->Now();
  std::vector<std::shared_ptr<Table>> sparse;
  {
    absl::MutexLock lock(&tables_mu_);
    if (now - last_sweep_ < absl::Seconds(1)) return 0;
    last_sweep_ = now;
    for (const auto& [name, table] : tables_) {
      if (table->sparse != nullptr) sparse.push_back(table);
    }
  }
  uint64_t evicted = 0;
  for (const auto& table : sparse) {
    // A tiered table's demoter's failures (it keeps the cache under its
    // size on its own thread).
    if (absl::Status failed = table->sparse->TakeDemoteError(); !failed.ok()) {
      LogEvent(absl::StrCat("server ", server_index_), std::string(failed.message()));
    }
    if (evicted_keys == nullptr) {
      evicted += table->sparse->Sweep();
      continue;
    }
    std::vector<uint64_t> keys;
    evicted += table->sparse->Sweep(&keys);
    if (!keys.empty()) evicted_keys->emplace_back(table->def().name(), std::move(keys));
  }
  return evicted;
}

bool ShardStore::FillSparseStats(proto::TableStats* stats) const {
  absl::StatusOr<std::shared_ptr<Table>> table = FindTable(stats->table());
  if (!table.ok() || (*table)->sparse == nullptr) return false;
  const SparseTable& sparse = *(*table)->sparse;
  stats->set_rows(sparse.rows());
  stats->set_admitted(sparse.admitted());
  stats->set_refused(sparse.refused());
  stats->set_evicted(sparse.evicted());
  if (sparse.tiered()) {
    const RowStoreStats tier = sparse.tier_stats();
    stats->set_disk_rows(tier.rows);
    stats->set_disk_bytes(tier.disk_bytes);
    stats->set_cache_hits(sparse.cache_hits());
    stats->set_cache_misses(sparse.cache_misses());
    stats->set_demoted(sparse.demoted());
  }
  return true;
}

std::vector<std::string> ShardStore::SparseTableNames() const {
  std::vector<std::string> names;
  absl::ReaderMutexLock lock(&tables_mu_);
  for (const auto& [name, table] : tables_) {
    if (table->sparse != nullptr) names.push_back(name);
  }
  return names;
}

absl::StatusOr<ShardStore::VectorOpsResult> ShardStore::RunVectorOps(
    absl::string_view table_name, absl::Span<const proto::VectorOp> ops, uint64_t clock) {
  absl::StatusOr<std::shared_ptr<Table>> found = FindTable(table_name);
  if (!found.ok()) return found.status();
  Table& table = **found;
  const proto::TableDef& def = table.def();
  if (def.optimizer() != proto::OPT_LBFGS) {
    return absl::FailedPreconditionError(absl::StrCat(
        "table '", def.name(), "' has optimizer ", proto::OptimizerKind_Name(def.optimizer()),
        ": vector ops are for OPT_LBFGS tables (Sandblaster L-BFGS)"));
  }
  const int spv = LbfgsStatePerValue(static_cast<int>(def.lbfgs_memory()));
  if (absl::Status s = CheckVectorOps(ops, spv, def.name()); !s.ok()) return s;
  VectorOpsResult result;
  size_t dots = 0;
  bool write = false;
  for (const proto::VectorOp& op : ops) {
    if (op.kind() == proto::VectorOp::DOT) {
      ++dots;
    } else {
      write = true;
    }
  }
  result.partials.assign(dots, 0.0);
  std::vector<double> unused(dots);
  if (write) {  // a cut marked from now on sees this clock (as for a push)
    uint64_t max_clock = max_clock_.load();
    while (clock > max_clock && !max_clock_.compare_exchange_weak(max_clock, clock)) {
    }
  }
  const auto run = [&](float* values, float* state, size_t n, bool copy) {
    ps::RunVectorOps(ops, values, state, n, spv,
                     copy ? absl::MakeSpan(unused) : absl::MakeSpan(result.partials));
    if (!copy) result.values += n;
  };
  if (table.dense != nullptr) {
    table.dense->ForEachRun(write, clock, run);
  } else {
    table.sparse->ForEachRun(write, clock, run);
  }
  return result;
}

absl::StatusOr<proto::TableDef> ShardStore::GetTableDef(absl::string_view table) const {
  absl::StatusOr<std::shared_ptr<Table>> t = FindTable(table);
  if (!t.ok()) return t.status();
  return (*t)->def();
}

absl::StatusOr<std::shared_ptr<ShardStore::Table>> ShardStore::FindTableForKeys(
    absl::string_view table_name, const KeySpec& keys, SparseTable::KeyPlan* plan) const {
  absl::StatusOr<std::shared_ptr<Table>> table = FindTable(table_name);
  if (!table.ok()) return table.status();
  const Table* t = table->get();
  if (t->sparse != nullptr) {
    if (!keys.is_list) {
      return absl::InvalidArgumentError(
          absl::StrCat("table '", table_name, "' is sparse: it takes key lists, not ranges"));
    }
    absl::StatusOr<SparseTable::KeyPlan> planned = t->sparse->Plan(keys.keys);
    if (!planned.ok()) return planned.status();
    *plan = *std::move(planned);
    return table;
  }
  if (absl::Status s = t->dense->CheckKeys(keys); !s.ok()) return s;
  return table;
}

absl::StatusOr<ShardStore::PushResult> ShardStore::Push(absl::string_view table,
                                                        const KeySpec& keys,
                                                        absl::Span<const float> grads) {
  return Push(table, keys, grads, 0, [] { return absl::StatusOr<bool>(true); });
}

absl::StatusOr<ShardStore::PushResult> ShardStore::Push(absl::string_view table_name,
                                                        const KeySpec& keys,
                                                        absl::Span<const float> grads,
                                                        uint64_t clock, Admit admit,
                                                        const PushOptions& options) {
  return PushImpl(table_name, keys, grads, clock, admit, nullptr, options);
}

absl::StatusOr<ShardStore::PushResult> ShardStore::PushAndRead(
    absl::string_view table, const KeySpec& keys, absl::Span<const float> grads, uint64_t clock,
    Admit admit, absl::FunctionRef<char*(size_t bytes)> allocate, const PushOptions& options) {
  return PushImpl(table, keys, grads, clock, admit, &allocate, options);
}

absl::StatusOr<ShardStore::PushResult> ShardStore::PushImpl(
    absl::string_view table_name, const KeySpec& keys, absl::Span<const float> grads,
    uint64_t clock, Admit admit, const absl::FunctionRef<char*(size_t bytes)>* allocate,
    const PushOptions& options) {
  SparseTable::KeyPlan plan;
  absl::StatusOr<std::shared_ptr<Table>> found = FindTableForKeys(table_name, keys, &plan);
  if (!found.ok()) return found.status();
  Table& table = **found;
  const proto::TableDef& def = table.def();
  const uint64_t width = def.width();
  if (grads.size() != keys.size() * width) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table '", def.name(), "': push has ", grads.size(), " values for ", keys.size(),
        " keys of width ", width, " (expected ", keys.size() * width, ")"));
  }
  if (const size_t i = FirstNonFinite(grads); i < grads.size()) {
    const uint64_t key = KeyAtValue(keys, i, width);
    return absl::InvalidArgumentError(absl::StrCat("table '", def.name(), "': gradient for key ",
                                                   key, " column ", i % width, " is not finite (",
                                                   grads[i], "); nothing was applied"));
  }
  absl::StatusOr<float> trust = LarsTrust(def, options.layer_norms);
  if (!trust.ok()) return trust.status();
  // Before any slice is locked: a cut marked from now on sees this clock
  // (MarkCut).
  uint64_t max_clock = max_clock_.load();
  while (clock > max_clock && !max_clock_.compare_exchange_weak(max_clock, clock)) {
  }
  char* dst = nullptr;
  if (allocate != nullptr) {
    dst = (*allocate)(grads.size() * sizeof(float));
    if (dst == nullptr && !grads.empty()) {
      return absl::InternalError(absl::StrCat("table '", def.name(), "': no buffer for the ",
                                              grads.size(), " values read back"));
    }
  }
  if (SparseTable* sparse = table.sparse.get()) {
    // Creates missing rows (charging the budget), then admits and applies.
    absl::StatusOr<bool> applied =
        sparse->Push(keys.keys, plan, grads, clock, admit, dst, options.decisions);
    if (!applied.ok()) return applied.status();
    return PushResult{!*applied, table.version().load()};
  }
  uint64_t version = 0;
  absl::StatusOr<bool> applied =
      table.dense->Push(keys, grads, clock, *trust, admit, dst, &version);
  if (!applied.ok()) return applied.status();
  return PushResult{!*applied, version};
}

absl::StatusOr<uint64_t> ShardStore::Pull(absl::string_view table, const KeySpec& keys,
                                          std::string* out) {
  return Pull(table, keys, [out](size_t bytes) {
    out->resize(bytes);
    return bytes ? &(*out)[0] : nullptr;
  });
}

absl::StatusOr<uint64_t> ShardStore::Pull(absl::string_view table_name, const KeySpec& keys,
                                          absl::FunctionRef<char*(size_t bytes)> allocate) {
  SparseTable::KeyPlan plan;
  absl::StatusOr<std::shared_ptr<Table>> found = FindTableForKeys(table_name, keys, &plan);
  if (!found.ok()) return found.status();
  Table& table = **found;
  const proto::TableDef& def = table.def();
  const uint64_t width = def.width();
  const uint64_t version = table.version().load();
  char* dst = allocate(keys.size() * width * sizeof(float));
  if (dst == nullptr && keys.size() > 0) {
    return absl::InternalError(absl::StrCat("table '", def.name(), "': no buffer for the ",
                                            keys.size() * width, " values pulled"));
  }
  if (table.sparse != nullptr) {
    if (absl::Status s = table.sparse->Read(keys.keys, plan, dst); !s.ok()) return s;
  } else {
    table.dense->Read(keys, dst);
  }
  return version;
}

absl::Status ShardStore::MarkCut(uint64_t cut) {
  if (cut == 0) return absl::InvalidArgumentError("checkpoint: the cut clock must be >= 1");
  uint64_t seen = 0;
  {
    absl::MutexLock cut_lock(&cut_mu_);
    if (cut_ != 0) {
      return absl::FailedPreconditionError(absl::StrCat(
          "checkpoint: server ", server_index_, " is already taking a checkpoint at cut ", cut_));
    }
    std::vector<std::shared_ptr<Table>> tables;
    {
      absl::ReaderMutexLock lock(&tables_mu_);
      for (const auto& [name, table] : tables_) tables.push_back(table);
    }
    cut_state_.set_complete(false);
    cut_state_.ClearError();
    // Before any slice is marked: from its mark on, a change to it outside
    // the cut is tagged after the cut (and reaches a tiered table's disk
    // after the position noted here).
    for (const auto& table : tables) {
      if (table->sparse != nullptr) table->sparse->NoteTierPosition(cut);
    }
    cut_state_.RaiseLastMarked(cut);
    for (const auto& table : tables) table->SetCut(cut);
    cut_ = cut;
    cut_tables_ = std::move(tables);
    // A push updates max_clock_ before it locks a slice, and this reads it
    // after every slice was locked to be marked: a push at clock >= cut that
    // changed a slice before its mark is seen here.
    seen = max_clock_.load();
  }
  if (seen < cut) return absl::OkStatus();
  EndCut();
  return absl::FailedPreconditionError(absl::StrCat(
      "checkpoint: server ", server_index_, " has already applied a push at clock ", seen,
      ", so it cannot take a cut at ", cut, "; a cut after ", seen, " is needed"));
}

void ShardStore::CompleteCut() { cut_state_.set_complete(true); }

void ShardStore::EndCut() {
  std::vector<std::shared_ptr<Table>> tables;
  {
    absl::MutexLock lock(&cut_mu_);
    tables = std::move(cut_tables_);
    cut_tables_.clear();
    cut_ = 0;
  }
  for (const auto& table : tables) table->SetCut(0);
}

bool ShardStore::CanWriteSinceLocked(uint64_t since) const {
  return since != 0 && since < cut_ &&
         std::find(bases_.begin(), bases_.end(), since) != bases_.end();
}

bool ShardStore::CanWriteSince(uint64_t since) {
  absl::MutexLock lock(&cut_mu_);
  return CanWriteSinceLocked(since);
}

absl::Status ShardStore::WriteCut(
    absl::FunctionRef<absl::Status(const proto::TableDef& def, std::string record)> sink,
    uint64_t since, size_t max_record_bytes, std::vector<proto::RowStoreSnapshot>* snapshots,
    const std::string& snapshot_prefix) {
  std::vector<std::shared_ptr<Table>> tables;
  uint64_t cut = 0;
  // Erased keys tagged <= prune_upto are needed by no write on top of a
  // base still kept, nor on top of this cut (erasures after its mark are
  // tagged > cut).
  uint64_t prune_upto = 0;
  {
    absl::MutexLock lock(&cut_mu_);
    if (cut_ == 0) {
      return absl::FailedPreconditionError(
          absl::StrCat("checkpoint: no cut is marked on server ", server_index_));
    }
    tables = cut_tables_;
    cut = cut_;
    if (!CanWriteSinceLocked(since)) {
      since = 0;  // not a base here: whole slices
    } else {
      // The caller never goes back below a committed base.
      bases_.erase(
          std::remove_if(bases_.begin(), bases_.end(), [since](uint64_t b) { return b < since; }),
          bases_.end());
    }
    prune_upto = cut;
    for (uint64_t b : bases_) prune_upto = std::min(prune_upto, b);
  }
  absl::Status status = cut_state_.error();
  std::sort(tables.begin(), tables.end(),
            [](const auto& a, const auto& b) { return a->def().name() < b->def().name(); });
  for (const auto& table : tables) {
    if (!status.ok()) break;
    const proto::TableDef& def = table->def();
    const auto to_sink = [&](std::string record) { return sink(def, std::move(record)); };
    if (table->sparse != nullptr) {
      proto::RowStoreSnapshot snapshot;
      snapshot.set_dir(absl::StrCat(snapshot_prefix, snapshots ? snapshots->size() : 0));
      status = table->sparse->WriteCut(to_sink, since, prune_upto, max_record_bytes,
                                       snapshots != nullptr ? &snapshot : nullptr);
      if (!snapshot.table().empty()) snapshots->push_back(std::move(snapshot));
    } else {
      status = table->dense->WriteCut(to_sink, since, max_record_bytes);
    }
  }
  // A copy that failed while the cut was written fails it too.
  if (status.ok()) status = cut_state_.error();
  if (status.ok()) {
    // Written: a later incremental write may be on top of this cut.
    absl::MutexLock lock(&cut_mu_);
    bases_.erase(std::remove(bases_.begin(), bases_.end(), cut), bases_.end());
    bases_.push_back(cut);
    if (bases_.size() > kKeptBases) bases_.erase(bases_.begin());
  }
  EndCut();
  return status;
}

void ShardStore::SetRestoredCut(uint64_t cut) {
  if (cut == 0) return;
  cut_state_.RaiseLastMarked(cut);
  absl::MutexLock lock(&cut_mu_);
  bases_.assign(1, cut);
}

std::vector<proto::TableDef> ShardStore::TableDefs() const {
  std::vector<proto::TableDef> defs;
  {
    absl::ReaderMutexLock lock(&tables_mu_);
    for (const auto& [name, table] : tables_) defs.push_back(table->def());
  }
  std::sort(defs.begin(), defs.end(),
            [](const proto::TableDef& a, const proto::TableDef& b) { return a.name() < b.name(); });
  return defs;
}

absl::StatusOr<uint64_t> ShardStore::LoadRecord(const SliceRecord& record) {
  const proto::SliceHeader& h = record.header;
  absl::StatusOr<std::shared_ptr<Table>> found = FindTable(h.table());
  if (!found.ok()) return found.status();
  Table& table = **found;
  if (table.sparse != nullptr) return table.sparse->LoadRecord(record);
  return table.dense->LoadRecord(record);
}

}  // namespace ps
