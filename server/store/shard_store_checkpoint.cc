// ShardStore's checkpoint cut and restore (server/cut_state.h).
#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/store/shard_store.h"
#include "server/store/shard_store_table.h"

namespace ps {

Slice::Copy* PrepareCut(Slice& slice, uint64_t clock, const proto::TableDef& def,
                        CutState& cut_state, MemoryBudget& budget, uint64_t* tag) {
  if (cut_state.Inside(slice.cut, clock)) {
    *tag = slice.cut;
    return slice.copy.get();
  }
  *tag = cut_state.ChangeTag();
  if (slice.cut == 0 || slice.copy != nullptr) return nullptr;
  const uint64_t bytes = (slice.values.size() + slice.state.size()) * sizeof(float);
  if (!budget.TryCharge(bytes)) {
    cut_state.Fail(absl::ResourceExhaustedError(
        absl::StrCat("checkpoint: copying a slice of table '", def.name(), "' (", bytes,
                     " bytes) for the cut would exceed the memory budget (", budget.left(), " of ",
                     budget.limit(), " bytes left; ps_server --memory_budget_mb)")));
    slice.cut = 0;
    return nullptr;
  }
  slice.copy = std::make_unique<Slice::Copy>();
  slice.copy->values = slice.values;
  slice.copy->state = slice.state;
  slice.copy->tag = slice.tag;
  return nullptr;
}

void DropCopy(Slice& slice, MemoryBudget& budget) {
  if (slice.copy == nullptr) return;
  budget.Release((slice.copy->values.size() + slice.copy->state.size()) * sizeof(float));
  slice.copy.reset();
}

void ShardStore::Table::SetCut(uint64_t cut, MemoryBudget& budget) {
  if (sparse_ != nullptr) return sparse_->SetCut(cut);
  for (const auto& slice : slices_) {
    if (slice == nullptr) continue;
    absl::MutexLock lock(&slice->mu);
    DropCopy(*slice, budget);
    slice->cut = cut;
  }
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
    // the cut is tagged after the cut.
    cut_state_.RaiseLastMarked(cut);
    for (const auto& table : tables) table->SetCut(cut, budget_);
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
  for (const auto& table : tables) table->SetCut(0, budget_);
}

namespace {

// The records of a dense slice whose first key is first_key: each of keys
// [first_key + r, first_key + r + n) holds their values, then their state;
// at most max_record_bytes of rows each (0: one record).
std::vector<std::string> DenseRecords(const proto::TableDef& def, uint64_t s, uint64_t first_key,
                                      uint32_t floats_per_row, const std::vector<float>& values,
                                      const std::vector<float>& state, size_t max_record_bytes) {
  const uint64_t width = def.width();
  const uint64_t rows = values.size() / width;
  const uint64_t state_per_row = rows == 0 ? 0 : state.size() / rows;
  const uint64_t per_record =
      max_record_bytes == 0
          ? rows
          : std::max<uint64_t>(1, max_record_bytes / (uint64_t{floats_per_row} * sizeof(float)));
  std::vector<std::string> records;
  for (uint64_t r = 0; r < rows; r += per_record) {
    const uint64_t n = std::min(per_record, rows - r);
    proto::SliceHeader header;
    header.set_table(def.name());
    header.set_slice(s);
    header.set_first_key(first_key + r);
    header.set_num_rows(n);
    header.set_width(def.width());
    header.set_floats_per_row(floats_per_row);
    std::string out;
    AppendSliceHeader(header, &out);
    const size_t start = out.size();
    out.resize(start + n * (width + state_per_row) * sizeof(float));
    std::memcpy(&out[start], values.data() + r * width, n * width * sizeof(float));
    std::memcpy(&out[start + n * width * sizeof(float)], state.data() + r * state_per_row,
                n * state_per_row * sizeof(float));
    records.push_back(std::move(out));
  }
  return records;
}

}  // namespace

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
    uint64_t since, size_t max_record_bytes) {
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
  const uint64_t slice_size = placement_.config().slice_size;
  for (const auto& table : tables) {
    if (!status.ok()) break;
    const proto::TableDef& def = table->def();
    const uint32_t floats_per_row = def.width() * (1 + table->optimizer().state_per_value());
    if (SparseTable* sparse = table->sparse()) {
      status = sparse->WriteCut([&](std::string record) { return sink(def, std::move(record)); },
                                since, prune_upto, max_record_bytes);
      continue;
    }
    for (uint64_t s = 0; s < table->num_slices() && status.ok(); ++s) {
      Slice* slice = table->slice(s);
      if (slice == nullptr) continue;
      std::vector<std::string> records;
      {
        absl::MutexLock lock(&slice->mu);
        if (slice->cut == 0) continue;  // failed: cut_state_ says why
        const bool copied = slice->copy != nullptr;
        // Unchanged since the base: nothing to write.
        if (since == 0 || (copied ? slice->copy->tag : slice->tag) > since) {
          records = DenseRecords(def, s, s * slice_size, floats_per_row,
                                 copied ? slice->copy->values : slice->values,
                                 copied ? slice->copy->state : slice->state, max_record_bytes);
        }
        DropCopy(*slice, budget_);
        slice->cut = 0;
      }
      for (std::string& record : records) {
        if (status.ok()) status = sink(def, std::move(record));
      }
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
  if (SparseTable* sparse = table.sparse()) return sparse->LoadRecord(record);
  const proto::TableDef& def = table.def();
  const uint64_t width = def.width();
  const uint64_t state_per_key = width * table.optimizer().state_per_value();
  if (h.sparse() || h.width() != width || h.floats_per_row() != width + state_per_key) {
    return absl::FailedPreconditionError(absl::StrCat(
        "table '", def.name(), "' slice ", h.slice(), ": the checkpoint's rows are ",
        h.sparse() ? "sparse" : "dense", " with width ", h.width(), " and ", h.floats_per_row(),
        " floats per key; this table's are dense with width ", width, " and ",
        width + state_per_key, " (same definition and optimizer expected)"));
  }
  if (h.first_key() > def.num_keys() || h.num_rows() > def.num_keys() - h.first_key()) {
    return absl::DataLossError(absl::StrCat("table '", def.name(), "': checkpoint record of keys [",
                                            h.first_key(), ", ", h.first_key() + h.num_rows(),
                                            ") exceeds num_keys ", def.num_keys()));
  }
  // The record's keys, by this store's slices (the checkpoint may have been
  // taken with another slice size).
  const uint64_t slice_size = placement_.config().slice_size;
  const uint64_t end = h.first_key() + h.num_rows();
  uint64_t loaded = 0;
  for (uint64_t k = h.first_key(); k < end;) {
    const uint64_t s = k / slice_size;
    const uint64_t run_end = std::min(end, (s + 1) * slice_size);
    Slice* slice = table.slice(s);
    if (slice != nullptr) {
      absl::MutexLock lock(&slice->mu);
      const uint64_t at = k - s * slice_size;   // in the slice
      const uint64_t from = k - h.first_key();  // in the record
      const uint64_t n = run_end - k;
      slice->tag = 0;  // the restored checkpoint's, unchanged
      record.CopyFloats(from * width, n * width, slice->values.data() + at * width);
      if (state_per_key > 0) {
        record.CopyFloats(h.num_rows() * width + from * state_per_key, n * state_per_key,
                          slice->state.data() + at * state_per_key);
      }
      loaded += n;
    }
    k = run_end;
  }
  return loaded;
}

}  // namespace ps
