// SparseTable's disk tier (tiered tables, sparse_table.h): rows read from
// the store into the cache, and the least pushed rows moved to the store;
// and the lookup in the cache that reads of every table share
// (SplitByCache).
#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "server/store/sparse_table.h"

namespace ps {

uint64_t SparseTable::CacheBytes(const proto::TableDef& def, const Optimizer& optimizer,
                                 uint64_t rows, uint64_t slices) {
  const size_t floats_per_row = def.width() * (1 + optimizer.state_per_value()) + 2;
  const uint64_t per_slice = (rows + rows / 4 + slices - 1) / slices;
  return slices * SparseRows::BytesToInsert(floats_per_row, SparseRows::Shape{}, per_slice);
}

uint64_t SparseTable::CacheRows(const proto::TableDef& def, const Optimizer& optimizer,
                                uint64_t slices) {
  const uint64_t cache_bytes = def.cache_mb() << 20;
  uint64_t lo = 1, hi = cache_bytes + 1;  // CacheBytes(lo) fits; CacheBytes(hi) does not
  while (lo + 1 < hi) {
    const uint64_t mid = lo + (hi - lo) / 2;
    if (CacheBytes(def, optimizer, mid, slices) <= cache_bytes) {
      lo = mid;
    } else {
      hi = mid;
    }
  }
  return lo;
}

void SparseTable::PrefetchKey(uint64_t hash) const {
  const uint64_t s = Placement::SparseSliceOfHash(hash, num_buckets_);
  __builtin_prefetch(slices_[s].get());
  // Unconditional (common/prefetch.h): a slice without slots has ref 0.
  PrefetchSlot(slot_refs_[s].load(std::memory_order_relaxed), hash);
}

void SparseTable::SplitByCache(absl::Span<const uint64_t> keys, const KeyPlan& plan,
                               std::vector<size_t>* missing, std::vector<RowStore::RowRef>* refs,
                               absl::FunctionRef<void(size_t, const float*)> cached) const {
  // Each key's slice and map slot requested kPrefetchAhead keys ahead,
  // whatever its group: a lookup does little else, and groups are often
  // of one key.
  const uint64_t* const hashes = plan.hashes.get();
  const size_t n = keys.size();
  for (size_t a = 0; a < std::min(n, kPrefetchAhead); ++a) PrefetchKey(hashes[a]);
  for (const Group& g : plan.groups) {
    const Slice& slice = *slices_[g.slice];
    absl::ReaderMutexLock lock(&slice.mu);
    for (size_t i = g.begin; i < g.end; ++i) {
      if (i + kPrefetchAhead < n) PrefetchKey(hashes[i + kPrefetchAhead]);
      const float* row = slice.rows.Find(keys[i], hashes[i]);
      if (row != nullptr) {
        cached(i, row);
        continue;
      }
      missing->push_back(i);
      refs->push_back({static_cast<uint32_t>(g.slice), keys[i]});
    }
  }
  if (tier_ == nullptr) return;
  cache_misses_.fetch_add(missing->size(), std::memory_order_relaxed);
  cache_hits_.fetch_add(keys.size() - missing->size(), std::memory_order_relaxed);
}

void SparseTable::StartDemoter() {
  demoter_ = std::thread([this] { DemoteLoop(); });
}

void SparseTable::StopDemoter() {
  if (!demoter_.joinable()) return;
  {
    absl::MutexLock lock(&demoter_mu_);
    demoter_stop_ = true;
  }
  demoter_.join();
}

void SparseTable::WakeDemoter() {
  if (demote_wanted_.exchange(true, std::memory_order_acq_rel)) return;
  absl::MutexLock lock(&demoter_mu_);
  demoter_wake_ = true;
}

void SparseTable::DemoteLoop() {
  for (;;) {
    {
      absl::MutexLock lock(&demoter_mu_);
      demoter_mu_.Await(absl::Condition(this, &SparseTable::DemoterCalled));
      if (demoter_stop_) return;
      demoter_wake_ = false;
    }
    demote_wanted_.store(false, std::memory_order_release);
    absl::StatusOr<uint64_t> demoted = Demote();
    if (demoted.ok()) continue;
    // A failing disk: kept for the sweep to report, tried again in a second
    // (or by the next push once the cache is 1.25x its rows).
    absl::MutexLock lock(&demoter_mu_);
    demote_error_ = demoted.status();
    demoter_mu_.AwaitWithTimeout(absl::Condition(this, &SparseTable::DemoterStopped),
                                 absl::Seconds(1));
    if (demoter_stop_) return;
    demoter_wake_ = true;
  }
}

absl::Status SparseTable::CloseTier(const std::string& meta) {
  StopDemoter();
  absl::MutexLock demoting(&demote_mu_);
  constexpr size_t kBatchRows = 65536;
  const size_t stride = stride_bytes();
  std::vector<char> rows;
  RowStore::Batch batch;
  auto write = [&]() -> absl::Status {
    // The rows' addresses, now that the buffer stopped growing.
    for (size_t i = 0; i < batch.puts.size(); ++i) batch.puts[i].row = rows.data() + i * stride;
    absl::Status s = tier_->Write(batch);
    batch.puts.clear();
    rows.clear();
    if (s.ok()) return s;
    return absl::Status(s.code(),
                        absl::StrCat("table '", def_.name(),
                                     "': writing the cache to disk at close: ", s.message()));
  };
  for (uint64_t s = 0; s < slices_.size(); ++s) {
    if (slices_[s] == nullptr) continue;
    Slice& slice = *slices_[s];
    absl::ReaderMutexLock lock(&slice.mu);
    std::vector<uint64_t> keys;
    slice.rows.ForEach([&](uint64_t key, const float* row) {
      keys.push_back(key);
      const char* bytes = reinterpret_cast<const char*>(row);
      rows.insert(rows.end(), bytes, bytes + stride);
    });
    for (uint64_t key : keys) batch.puts.push_back({static_cast<uint32_t>(s), key, nullptr});
    if (batch.puts.size() >= kBatchRows) {
      if (absl::Status st = write(); !st.ok()) return st;
    }
  }
  batch.meta = meta;
  return write();
}

absl::Status SparseTable::TakeDemoteError() {
  absl::MutexLock lock(&demoter_mu_);
  return std::exchange(demote_error_, absl::OkStatus());
}

absl::Status SparseTable::ReadTier(absl::Span<const RowStore::RowRef> refs, std::vector<char>* rows,
                                   std::unique_ptr<bool[]>* found) const {
  rows->resize(refs.size() * stride_bytes());
  found->reset(new bool[refs.size()]);
  absl::Status status = tier_->ReadMany(refs, rows->data(), found->get());
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("table '", def_.name(), "': reading ", refs.size(),
                                   " rows from disk: ", status.message()));
}

absl::Status SparseTable::LoadFromTier(absl::Span<const uint64_t> keys, const KeyPlan& plan,
                                       uint64_t* grown, uint64_t* promoted) {
  // 1. The keys missing from the cache.
  std::vector<size_t> missing;
  std::vector<RowStore::RowRef> refs;
  SplitByCache(keys, plan, &missing, &refs, [](size_t, const float*) {});
  if (missing.empty()) return absl::OkStatus();
  // 2. One read of them all, no slice locked. The push holds tier_mu_: no
  // row leaves the cache, so a row another push brought in meanwhile is
  // found in step 3 and kept (it is the newer).
  std::vector<char> rows;
  std::unique_ptr<bool[]> found;
  if (absl::Status s = ReadTier(refs, &rows, &found); !s.ok()) return s;
  // 3. Into the cache, a slice at a time.
  for (size_t j = 0, end; j < missing.size(); j = end) {
    const uint64_t s = refs[j].slice;
    for (end = j; end < missing.size() && refs[end].slice == s; ++end) {
    }
    Slice& slice = *slices_[s];
    absl::MutexLock lock(&slice.mu);
    const uint64_t before = slice.rows.bytes();
    for (size_t k = j; k < end; ++k) {
      if (!found[k]) continue;  // a new key: the push creates it (admission)
      const size_t i = missing[k];
      const char* const stored = rows.data() + k * stride_bytes();
      bool created = false;
      float* const row = slice.rows.Insert(keys[i], plan.hashes[i], &created);
      if (!created) continue;  // listed twice, or brought in by another push
      // The row's floats and its change tag, as Demote wrote them.
      std::memcpy(row, stored, stride_bytes());
      ++*promoted;
      if (slice.copy != nullptr) {
        // The cut's copy lacked the row (it was on disk): an in-cut push
        // applies to the copy's row, which must be this one, not a new one.
        const uint64_t copy_before = slice.copy->bytes();
        float* const copied = slice.copy->Insert(keys[i], plan.hashes[i], &created);
        if (created) std::memcpy(copied, stored, stride_bytes());
        budget_->Charge(slice.copy->bytes() - copy_before);
        slice.copy_bytes += slice.copy->bytes() - copy_before;
      }
    }
    *grown += slice.rows.bytes() - before;
    PublishShape(s, slice);
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> SparseTable::Demote() {
  if (tier_ == nullptr) return 0;
  absl::MutexLock demoting(&demote_mu_);
  const uint64_t held = rows_.load(std::memory_order_relaxed);
  if (held <= cache_rows_) return 0;
  const uint64_t need = held - (cache_rows_ - cache_rows_ / 10);
  // 1. How often the cached rows were pushed (aged).
  constexpr uint32_t kBins = 64;
  const uint32_t epoch = TierEpoch();
  // Counted on every eighth slice of a table of 256 or more (from where
  // the last search for victims stopped; keys spread over slices by hash,
  // so an eighth is a fair sample): a scan of every cached row passes the
  // cache's memory through the processor's caches, which the pushes run
  // from.
  const uint64_t sample = slices_.size() >= 256 ? 8 : 1;
  std::vector<uint64_t> counts(kBins, 0);
  for (uint64_t s = demote_cursor_ % sample; s < slices_.size(); s += sample) {
    if (slices_[s] == nullptr) continue;
    const Slice& slice = *slices_[s];
    absl::ReaderMutexLock lock(&slice.mu);
    slice.rows.ForEach([&](uint64_t, const float* row) {
      ++counts[std::min<uint32_t>(AgedCount(row, epoch), kBins - 1)];
    });
  }
  uint32_t threshold = 0;
  for (uint64_t below = 0; threshold < kBins - 1 && (below + counts[threshold]) * sample < need;
       ++threshold) {
    below += counts[threshold];
  }
  // 2. The rows pushed at most `threshold` times are copied (up to `need`).
  struct Victim {
    uint32_t slice;
    uint64_t key;
  };
  std::vector<Victim> victims;
  std::vector<char> copies;
  const size_t stride = stride_bytes();
  // From where the last demotion stopped, so that the rows at the
  // threshold leave every slice in turn.
  for (uint64_t i = 0; i < slices_.size() && victims.size() < need; ++i) {
    const uint64_t s = demote_cursor_;
    demote_cursor_ = (demote_cursor_ + 1) % slices_.size();
    if (slices_[s] == nullptr) continue;
    Slice& slice = *slices_[s];
    absl::ReaderMutexLock lock(&slice.mu);
    // A slice in a cut whose snapshot is being written keeps its rows (as
    // step 4 checks), and a copied slice in a cut the rows its copy lacks:
    // created outside the cut, on disk they would be taken as in it.
    if (slice.cut != 0 && tier_snapshot_.load(std::memory_order_relaxed)) continue;
    const SparseRows* const copy = slice.cut != 0 ? slice.copy.get() : nullptr;
    slice.rows.ForEach([&](uint64_t key, const float* row) {
      if (victims.size() < need && AgedCount(row, epoch) <= threshold &&
          (copy == nullptr || copy->Find(key) != nullptr)) {
        victims.push_back({static_cast<uint32_t>(s), key});
        const char* bytes = reinterpret_cast<const char*>(row);
        copies.insert(copies.end(), bytes, bytes + stride);
      }
    });
  }
  if (victims.empty()) return 0;
  // 3. To disk, in one batch.
  RowStore::Batch batch;
  batch.readers_may_see_parts = true;  // the rows stay cached until it is written
  batch.puts.reserve(victims.size());
  for (size_t v = 0; v < victims.size(); ++v) {
    batch.puts.push_back({victims[v].slice, victims[v].key, copies.data() + v * stride});
  }
  if (absl::Status s = tier_->Write(batch); !s.ok()) {
    return absl::Status(s.code(), absl::StrCat("table '", def_.name(), "': moving ", victims.size(),
                                               " rows to disk: ", s.message()));
  }
  // 4. Out of the cache, each unless a push changed it since it was copied
  // (the cache's row is then the newer: the next demotion writes it).
  absl::MutexLock tier_lock(&tier_mu_);
  uint64_t dropped = 0;
  for (size_t v = 0; v < victims.size();) {
    const uint32_t s = victims[v].slice;
    Slice& slice = *slices_[s];
    absl::MutexLock lock(&slice.mu);
    // Written after a cut's snapshot, a row of a slice still in the cut
    // must stay in the cache for the cut to take it (WriteCut).
    const bool keep = slice.cut != 0 && tier_snapshot_.load(std::memory_order_relaxed);
    for (; v < victims.size() && victims[v].slice == s; ++v) {
      if (keep) continue;
      const float* row = slice.rows.Find(victims[v].key);
      if (row != nullptr && std::memcmp(row, copies.data() + v * stride, stride) == 0) {
        slice.rows.Erase(victims[v].key);
        ++dropped;
      }
    }
    PublishShape(s, slice);
  }
  rows_.fetch_sub(dropped, std::memory_order_relaxed);
  demoted_.fetch_add(dropped, std::memory_order_relaxed);
  return dropped;
}

SparseTable::TierCut SparseTable::CopyCutRows(const SparseRows& rows,
                                              const absl::flat_hash_map<uint64_t, uint64_t>& erased,
                                              uint64_t since, bool cached_keys) const {
  TierCut cut;
  cut.since = since;
  if (since > 0) {
    for (const auto& [key, tag] : erased) {
      if (tag > since) cut.erased.insert(key);
    }
  }
  if (cached_keys) cut.cached.reserve(rows.size());
  rows.ForEach([&](uint64_t key, const float* row) {
    // Every cached key, written or not: the disk's older copy of a row the
    // cache holds unchanged must not stand in for it.
    if (cached_keys) cut.cached.insert(key);
    if (since > 0 && rows.tag(row) <= since) return;
    cut.keys.push_back(key);
    cut.rows.insert(cut.rows.end(), row, row + floats_per_row_);
  });
  return cut;
}

absl::StatusOr<std::vector<std::string>> SparseTable::TierCutRecords(uint64_t s, TierCut* cut,
                                                                     size_t max_record_bytes,
                                                                     bool on_snapshot) const {
  std::vector<KeyedRow> rows;
  rows.reserve(cut->keys.size());
  for (size_t i = 0; i < cut->keys.size(); ++i) {
    rows.emplace_back(cut->keys[i], &cut->rows[i * floats_per_row_]);
  }
  if (on_snapshot) {
    if (rows.empty()) return std::vector<std::string>();
    return RecordsOfRows(s, rows, max_record_bytes, /*delta=*/true, {});
  }
  const absl::flat_hash_set<uint64_t>& cached = cut->cached;
  std::vector<char> disk;
  std::vector<uint64_t> disk_keys;
  const size_t stride = stride_bytes();
  // An incremental cut reads the rows written since its base's mark (rows
  // tagged after the base were in the cache then, and reach the disk
  // after); without that position, every row.
  uint64_t position = 0;
  if (cut->since > 0) {
    absl::MutexLock lock(&tier_marks_mu_);
    for (const auto& [marked, at] : tier_marks_) {
      if (marked == cut->since) position = at;
    }
  }
  absl::Status status =
      tier_->ForEachSince(static_cast<uint32_t>(s), position, [&](uint64_t key, const char* row) {
        cut->erased.erase(key);  // on disk: not gone
        if (cached.contains(key)) return absl::OkStatus();
        uint32_t tag;
        std::memcpy(&tag, row + floats_per_row_ * sizeof(float), sizeof tag);
        if (cut->since > 0 && tag <= cut->since) return absl::OkStatus();
        disk_keys.push_back(key);
        disk.insert(disk.end(), row, row + stride);
        return absl::OkStatus();
      });
  if (!status.ok()) {
    return absl::Status(status.code(),
                        absl::StrCat("table '", def_.name(), "': reading bucket ", s,
                                     " from disk for a checkpoint: ", status.message()));
  }
  for (size_t i = 0; i < disk_keys.size(); ++i) {
    rows.emplace_back(disk_keys[i], reinterpret_cast<const float*>(disk.data() + i * stride));
  }
  if (cut->since > 0) {
    // Keys erased since, that neither the cache nor the disk holds now.
    std::vector<uint64_t> gone;
    for (uint64_t key : cut->erased) {
      if (!cached.contains(key)) gone.push_back(key);
    }
    if (rows.empty() && gone.empty()) return std::vector<std::string>();
    return RecordsOfRows(s, rows, max_record_bytes, /*delta=*/true, gone);
  }
  return RecordsOfRows(s, rows, max_record_bytes, /*delta=*/false, {});
}

absl::StatusOr<uint64_t> SparseTable::LoadTierRecord(const SliceRecord& record, Slice& slice) {
  const proto::SliceHeader& h = record.header;
  const uint32_t s = static_cast<uint32_t>(h.slice());
  const size_t stride = stride_bytes();
  std::vector<char> rows(h.num_rows() * stride);
  RowStore::Batch batch;
  batch.sync = false;  // a restore or a replication snapshot: a crash repeats it
  if (!h.delta()) batch.dropped_slices.push_back(s);
  batch.puts.reserve(h.num_rows());
  for (uint64_t i = 0; i < h.num_rows(); ++i) {
    char* row = rows.data() + i * stride;
    record.CopyRow(i, reinterpret_cast<float*>(row));
    std::memset(row + floats_per_row_ * sizeof(float), 0, sizeof(uint32_t));  // tag 0: restored
    batch.puts.push_back({s, record.Key(i), row});
  }
  for (uint64_t i = 0; i < h.num_erased(); ++i) batch.erases.push_back({s, record.ErasedKey(i)});
  // No push may promote a row of the bucket while it is replaced.
  absl::MutexLock tier_lock(&tier_mu_);
  absl::MutexLock lock(&slice.mu);
  if (absl::Status st = tier_->Write(batch); !st.ok()) {
    return absl::Status(st.code(), absl::StrCat("table '", def_.name(), "': restoring bucket ",
                                                h.slice(), " to disk: ", st.message()));
  }
  // The cache's rows the record replaced or erased go: the disk has them.
  std::vector<uint64_t> gone;
  if (!h.delta()) {
    slice.rows.ForEach([&](uint64_t key, const float*) { gone.push_back(key); });
  } else {
    for (const RowStore::Batch::Put& put : batch.puts) gone.push_back(put.key);
    for (const RowStore::Batch::Erase& erase : batch.erases) gone.push_back(erase.key);
  }
  uint64_t dropped = 0;
  for (uint64_t key : gone) dropped += slice.rows.Erase(key) ? 1 : 0;
  rows_.fetch_sub(dropped, std::memory_order_relaxed);
  PublishShape(h.slice(), slice);
  return h.num_rows();
}

}  // namespace ps
