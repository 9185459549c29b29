// SparseTable's checkpoint cut and restore (server/cut_state.h).
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/store/sparse_table.h"

namespace ps {

void SparseTable::CopyForCut(Slice& slice) {
  if (slice.cut == 0 || slice.copy != nullptr) return;
  const uint64_t bytes = slice.rows.bytes();
  if (!budget_->TryCharge(bytes)) {
    // The cut cannot hold this slice as it was: it fails, training goes on.
    if (cut_state_ != nullptr) {
      cut_state_->FailCopy(def_.name(), bytes, server_index_, *budget_);
    }
    slice.cut = 0;
    return;
  }
  slice.copy = slice.rows.Clone();
  slice.copy_bytes = bytes;
}

void SparseTable::ApplyToCopy(SparseRows& copy, uint64_t key, uint64_t hash, const float* grad,
                              uint64_t clock, uint32_t tag) {
  bool created = false;
  float* row = copy.Insert(key, hash, &created);
  if (created) InitRow(key, row);
  float* state = row + width_;
  optimizer_->ApplyRows(&row, state_floats_ > 0 ? &state : nullptr, grad, 1, width_, clock,
                        nullptr);
  if (meta_) Touch(row, clock);
  copy.RaiseTag(row, tag);
}

void SparseTable::NoteErased(Slice& slice, uint64_t key) {
  const uint64_t tag = ChangeTag();
  auto it = slice.erased.find(key);
  if (it != slice.erased.end()) {
    it->second = std::max(it->second, tag);
    return;
  }
  if (slice.erased.size() >= std::max<size_t>(kMinErasedCap, slice.rows.size() + slice.disk_rows)) {
    // Over the cap: forget them all; a write on top of a cut before now
    // writes this slice whole.
    uint64_t lost = tag;
    for (const auto& [k, t] : slice.erased) lost = std::max(lost, t);
    slice.erased_lost = std::max(slice.erased_lost, lost);
    absl::flat_hash_map<uint64_t, uint64_t>().swap(slice.erased);
    return;
  }
  slice.erased.emplace(key, tag);
}

uint64_t SparseTable::erased_keys() const {
  uint64_t n = 0;
  for (const auto& slice : slices_) {
    if (slice == nullptr) continue;
    absl::MutexLock lock(&slice->mu);
    n += slice->erased.size();
  }
  return n;
}

void SparseTable::DropCopy(Slice& slice) {
  if (slice.copy == nullptr) return;
  // The copy may have grown past what was charged for it: give back what
  // was charged (growth was charged as it happened).
  budget_->Release(slice.copy_bytes);
  slice.copy.reset();
  slice.copy_bytes = 0;
}

void SparseTable::SetCut(uint64_t cut) {
  for (const auto& slice : slices_) {
    if (slice == nullptr) continue;
    absl::MutexLock lock(&slice->mu);
    DropCopy(*slice);
    slice->cut = cut;
  }
}

void SparseTable::NoteTierPosition(uint64_t cut) {
  if (tier_ == nullptr) return;
  const uint64_t position = tier_->Position();
  if (position == 0) return;  // the store cannot tell: cuts read every row
  absl::MutexLock lock(&tier_marks_mu_);
  constexpr size_t kKept = 8;  // incremental chains build on recent cuts
  if (tier_marks_.size() == kKept) tier_marks_.erase(tier_marks_.begin());
  tier_marks_.emplace_back(cut, position);
}

std::vector<std::string> SparseTable::RecordsOfRows(uint64_t s, const std::vector<KeyedRow>& rows,
                                                    size_t max_record_bytes, bool delta,
                                                    const std::vector<uint64_t>& gone) const {
  const size_t row_bytes = floats_per_row_ * sizeof(float);
  const size_t per_record =
      max_record_bytes == 0 ? rows.size() : std::max<size_t>(1, max_record_bytes / (8 + row_bytes));
  std::vector<std::string> records;
  size_t first = 0;
  do {
    const size_t n = std::min(per_record, rows.size() - first);
    proto::SliceHeader header;
    header.set_table(def_.name());
    header.set_slice(s);
    header.set_sparse(true);
    header.set_num_rows(n);
    header.set_floats_per_row(static_cast<uint32_t>(floats_per_row_));
    header.set_width(static_cast<uint32_t>(width_));
    // The first replaces the bucket (unless `delta`); the rest add to it.
    header.set_delta(delta || first > 0);
    const bool with_gone = first == 0 && !gone.empty();
    if (with_gone) header.set_num_erased(gone.size());
    std::string out;
    AppendSliceHeader(header, &out);
    const size_t start = out.size();
    out.resize(start + n * (8 + row_bytes) + (with_gone ? gone.size() * 8 : 0));
    char* keys = &out[start];
    char* values = keys + n * 8;
    for (size_t i = first; i < first + n; ++i) {
      std::memcpy(keys, &rows[i].first, 8);
      keys += 8;
      std::memcpy(values, rows[i].second, row_bytes);
      values += row_bytes;
    }
    if (with_gone) std::memcpy(values, gone.data(), gone.size() * 8);
    records.push_back(std::move(out));
    first += n;
  } while (first < rows.size());
  return records;
}

std::vector<std::string> SparseTable::RecordsOf(uint64_t s, const SparseRows& rows,
                                                size_t max_record_bytes) const {
  std::vector<KeyedRow> all;
  all.reserve(rows.size());
  rows.ForEach([&](uint64_t key, const float* row) { all.emplace_back(key, row); });
  return RecordsOfRows(s, all, max_record_bytes, /*delta=*/false, {});
}

std::string SparseTable::DeltaRecordOf(uint64_t s, const SparseRows& rows,
                                       const absl::flat_hash_map<uint64_t, uint64_t>& erased,
                                       uint64_t since) const {
  std::vector<KeyedRow> changed;
  rows.ForEach([&](uint64_t key, const float* row) {
    if (rows.tag(row) > since) changed.emplace_back(key, row);
  });
  std::vector<uint64_t> gone;
  for (const auto& [key, tag] : erased) {
    if (tag > since && rows.Find(key) == nullptr) gone.push_back(key);
  }
  if (changed.empty() && gone.empty()) return std::string();
  return RecordsOfRows(s, changed, 0, /*delta=*/true, gone).front();
}

absl::Status SparseTable::WriteCut(absl::FunctionRef<absl::Status(std::string record)> sink,
                                   uint64_t since, uint64_t prune_upto, size_t max_record_bytes,
                                   proto::RowStoreSnapshot* snapshot) {
  if (tier_ == nullptr || since != 0) snapshot = nullptr;
  absl::Status status;
  if (snapshot != nullptr) {
    // Every slice is still in the cut: a row of one that the cache lacks is
    // on disk with the cut's value (cut_state.h). From now until a slice's
    // cache rows are copied below, Demote leaves them in the cache: a row
    // written to disk after the snapshot would be in neither.
    {
      absl::MutexLock lock(&tier_mu_);
      tier_snapshot_.store(true, std::memory_order_relaxed);
    }
    status = tier_->Snapshot(snapshot->dir());
    if (status.ok()) {
      snapshot->set_table(def_.name());
      snapshot->set_floats_per_row(static_cast<uint32_t>(floats_per_row_));
      snapshot->set_width(static_cast<uint32_t>(width_));
      snapshot->set_row_bytes(stride_bytes());
    } else {
      status = absl::Status(status.code(),
                            absl::StrCat("table '", def_.name(),
                                         "': a snapshot of its rows on disk: ", status.message()));
    }
  }
  for (uint64_t s = 0; status.ok() && s < slices_.size(); ++s) {
    Slice* slice = slices_[s].get();
    if (slice == nullptr) continue;
    std::vector<std::string> records;
    TierCut tier_cut;
    {
      absl::MutexLock lock(&slice->mu);
      if (slice->cut == 0) continue;  // failed (cut_state_ says why)
      const SparseRows& rows = slice->copy != nullptr ? *slice->copy : slice->rows;
      const bool whole = since == 0 || since >= kMaxRowTag || since < slice->erased_lost;
      if (tier_ != nullptr) {
        // A snapshot holds the disk's rows: the cached keys are not needed
        // to pick them out.
        tier_cut = CopyCutRows(rows, slice->erased, whole ? 0 : since, snapshot == nullptr);
      } else if (whole) {
        records = RecordsOf(s, rows, max_record_bytes);
      } else {
        records.push_back(DeltaRecordOf(s, rows, slice->erased, since));
      }
      if (prune_upto > 0) {
        absl::erase_if(slice->erased, [&](const auto& e) { return e.second <= prune_upto; });
        if (slice->erased_lost <= prune_upto) slice->erased_lost = 0;
      }
      DropCopy(*slice);
      slice->cut = 0;
      if (snapshot != nullptr) snapshot->add_buckets(s);
    }
    if (tier_ != nullptr) {
      // The rows on disk that the cut's rows lack (none with a snapshot).
      // Demotion runs meanwhile, writing rows' current values: a row of a
      // slice not copied has had only in-cut pushes since the mark (an
      // outside push copies first), so its value is the cut's; a copied
      // slice's rows the cut takes from the copy (rows read from disk go
      // into it too), and its rows the copy lacks stay in the cache.
      absl::StatusOr<std::vector<std::string>> tiered =
          TierCutRecords(s, &tier_cut, max_record_bytes, snapshot != nullptr);
      if (!tiered.ok()) {
        status = tiered.status();
        break;
      }
      records = *std::move(tiered);
    }
    for (std::string& record : records) {
      if (record.empty()) continue;  // nothing changed since `since`
      if (status = sink(std::move(record)); !status.ok()) break;
    }
  }
  if (snapshot != nullptr) {
    absl::MutexLock lock(&tier_mu_);
    tier_snapshot_.store(false, std::memory_order_relaxed);
  }
  return status;
}

absl::StatusOr<uint64_t> SparseTable::LoadRecord(const SliceRecord& record) {
  const proto::SliceHeader& h = record.header;
  if (!h.sparse() || h.floats_per_row() != floats_per_row_ || h.width() != width_) {
    return absl::FailedPreconditionError(absl::StrCat(
        "table '", def_.name(), "' bucket ", h.slice(), ": the checkpoint's rows are ",
        h.sparse() ? "sparse" : "dense", " with width ", h.width(), " and ", h.floats_per_row(),
        " floats per row; this table's are sparse with width ", width_, " and ", floats_per_row_,
        " (same definition and optimizer expected)"));
  }
  if (h.slice() >= num_buckets_) {
    return absl::DataLossError(absl::StrCat("table '", def_.name(), "': bucket ", h.slice(),
                                            " of a checkpoint record is not below the table's ",
                                            num_buckets_, " buckets"));
  }
  Slice* slice = slices_[h.slice()].get();
  if (slice == nullptr) return 0;  // another server's
  for (uint64_t i = 0; i < h.num_rows(); ++i) {
    const uint64_t key = record.Key(i);
    if (SliceOf(key) != h.slice()) {
      return absl::DataLossError(absl::StrCat("table '", def_.name(), "': key ", key,
                                              " in the checkpoint record of bucket ", h.slice(),
                                              " belongs to bucket ", SliceOf(key)));
    }
  }
  if (tier_ != nullptr) return LoadTierRecord(record, *slice);
  absl::MutexLock lock(&slice->mu);
  const uint64_t before = slice->rows.bytes();
  const uint64_t rows_before = slice->rows.size();
  if (!h.delta()) {
    std::vector<uint64_t> all;
    slice->rows.ForEach([&](uint64_t key, const float*) { all.push_back(key); });
    for (uint64_t key : all) slice->rows.Erase(key);
  }
  for (uint64_t i = 0; i < h.num_rows(); ++i) {
    const uint64_t key = record.Key(i);
    bool created = false;
    float* row = slice->rows.Insert(key, &created);
    record.CopyRow(i, row);
    slice->rows.set_tag(row, 0);  // the restored checkpoint's, unchanged
  }
  for (uint64_t i = 0; i < h.num_erased(); ++i) slice->rows.Erase(record.ErasedKey(i));
  const uint64_t after = slice->rows.bytes();
  if (after > before) {
    if (!budget_->TryCharge(after - before)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "table '", def_.name(), "': restoring bucket ", h.slice(), " needs ", after - before,
          " more bytes on server ", server_index_, ", over the memory budget (", budget_->left(),
          " of ", budget_->limit(), " bytes left; ps_server --memory_budget_mb)"));
    }
    bytes_.fetch_add(after - before, std::memory_order_relaxed);
  }
  const uint64_t rows_after = slice->rows.size();
  if (rows_after >= rows_before) {
    rows_.fetch_add(rows_after - rows_before, std::memory_order_relaxed);
  } else {
    rows_.fetch_sub(rows_before - rows_after, std::memory_order_relaxed);
  }
  PublishShape(h.slice(), *slice);
  return h.num_rows();
}

}  // namespace ps
