// A tiered table's eviction (sparse_table.h): the rules of the table over
// its rows in memory and on disk alike.
#include <algorithm>
#include <cstring>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/log.h"
#include "server/store/sparse_table.h"

namespace ps {

uint64_t SparseTable::EvictTierSlice(uint64_t s, const std::vector<uint64_t>& keys) {
  if (keys.empty()) return 0;
  Slice& slice = *slices_[s];
  const size_t stride = stride_bytes();
  std::vector<char> rows(keys.size() * stride);
  std::unique_ptr<bool[]> on_disk(new bool[keys.size()]);
  if (absl::Status st = tier_->Read(static_cast<uint32_t>(s), keys, rows.data(), on_disk.get());
      !st.ok()) {
    LogEvent(def_.name(), absl::StrCat("evicting ", keys.size(), " rows of bucket ", s,
                                       ": reading them from disk: ", st.message(),
                                       "; they stay, the next sweep tries again"));
    return 0;
  }
  RowStore::Batch batch;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (on_disk[i]) batch.erases.push_back({static_cast<uint32_t>(s), keys[i]});
  }
  const uint64_t disk_rows = tier_->SliceRows(static_cast<uint32_t>(s));
  absl::MutexLock lock(&slice.mu);
  slice.disk_rows = disk_rows;
  if (slice.cut != 0) {
    // Outside any cut: the cut's copy keeps what goes, the disk's rows too.
    CopyForCut(slice);
    if (slice.copy != nullptr) {
      const uint64_t before = slice.copy->bytes();
      for (size_t i = 0; i < keys.size(); ++i) {
        bool created = false;
        float* row = on_disk[i] ? slice.copy->Insert(keys[i], &created) : nullptr;
        if (created) std::memcpy(row, rows.data() + i * stride, stride);
      }
      budget_->Charge(slice.copy->bytes() - before);
      slice.copy_bytes += slice.copy->bytes() - before;
    }
  }
  // The disk first: a row left there would come back into the cache.
  if (absl::Status st = tier_->Write(batch); !st.ok()) {
    LogEvent(def_.name(), absl::StrCat("evicting ", keys.size(), " rows of bucket ", s, ": ",
                                       st.message(), "; they stay, the next sweep tries again"));
    return 0;
  }
  const uint64_t before = evicted();
  std::vector<uint64_t> cached;
  for (size_t i = 0; i < keys.size(); ++i) {
    if (slice.rows.Find(keys[i]) != nullptr) {
      cached.push_back(keys[i]);
    } else if (on_disk[i]) {
      evicted_.fetch_add(1, std::memory_order_relaxed);
      NoteErased(slice, keys[i]);
    }
  }
  EvictLocked(slice, cached);
  PublishShape(s, slice);
  return evicted() - before;
}

uint64_t SparseTable::EvictTierKeys(absl::Span<const uint64_t> keys) {
  absl::flat_hash_map<uint64_t, std::vector<uint64_t>> by_slice;
  for (uint64_t key : keys) {
    const uint64_t s = SliceOf(key);
    if (s < slices_.size() && slices_[s] != nullptr) by_slice[s].push_back(key);
  }
  // No demotion writes the disk meanwhile, and no push reads it into the
  // cache.
  absl::MutexLock demoting(&demote_mu_);
  absl::MutexLock tier_lock(&tier_mu_);
  uint64_t evicted = 0;
  for (const auto& [s, slice_keys] : by_slice) evicted += EvictTierSlice(s, slice_keys);
  return evicted;
}

uint64_t SparseTable::SweepTier(std::vector<uint64_t>* keys) {
  const absl::Time now = clock_->Now();
  const uint64_t oldest = OldestKept(now);
  if (oldest == 0 && slice_cap_ == 0) return 0;
  absl::MutexLock demoting(&demote_mu_);
  uint64_t evicted = 0;
  auto evict = [&](uint64_t s, const std::vector<uint64_t>& victims)
                   ABSL_EXCLUSIVE_LOCKS_REQUIRED(demote_mu_, tier_mu_) {
                     const uint64_t n = EvictTierSlice(s, victims);
                     evicted += n;
                     if (keys != nullptr && n > 0)
                       keys->insert(keys->end(), victims.begin(), victims.end());
                   };
  // 1. Every sweep: the cache's expired rows, from the cache and the disk.
  if (oldest > 0) {
    absl::MutexLock tier_lock(&tier_mu_);
    std::vector<uint64_t> expired;
    for (uint64_t s = 0; s < slices_.size(); ++s) {
      if (slices_[s] == nullptr) continue;
      expired.clear();
      {
        const Slice& slice = *slices_[s];
        absl::ReaderMutexLock lock(&slice.mu);
        slice.rows.ForEach([&](uint64_t key, const float* row) {
          if (LastTouch(row) < oldest) expired.push_back(key);
        });
      }
      evict(s, expired);
    }
  }
  // 2. Every kDiskSweep: the rows only on disk, expired, and past the cap
  // (max_rows) the least recently (LRU) or least often (LFU) updated.
  if (now - last_disk_sweep_ < kDiskSweep) return evicted;
  last_disk_sweep_ = now;
  const bool lfu = def_.eviction() == proto::EVICT_LFU;
  const uint32_t epoch = TierEpoch();
  struct DiskRow {
    uint64_t score;
    uint64_t key;
    bool expired;
  };
  std::vector<DiskRow> disk;
  for (uint64_t s = 0; s < slices_.size(); ++s) {
    if (slices_[s] == nullptr) continue;
    disk.clear();
    absl::Status read = tier_->ForEach(static_cast<uint32_t>(s), [&](uint64_t key, const char* r) {
      const float* row = reinterpret_cast<const float*>(r);
      const uint32_t last = LastTouch(row);
      disk.push_back({lfu ? AgedCount(row, epoch) : last, key, oldest > 0 && last < oldest});
      return absl::OkStatus();
    });
    if (!read.ok()) {
      LogEvent(def_.name(), absl::StrCat("sweeping bucket ", s, " on disk: ", read.message()));
      continue;
    }
    absl::MutexLock tier_lock(&tier_mu_);
    std::vector<uint64_t> victims;
    uint64_t cached = 0;
    {
      const Slice& slice = *slices_[s];
      absl::ReaderMutexLock lock(&slice.mu);
      // The cache's rows are the newer: those keys are not the disk's to evict.
      size_t kept = 0;
      for (const DiskRow& d : disk) {
        if (slice.rows.Find(d.key) == nullptr) disk[kept++] = d;
      }
      disk.resize(kept);
      cached = slice.rows.size();
    }
    {
      std::sort(disk.begin(), disk.end(), [](const DiskRow& a, const DiskRow& b) {
        return a.expired != b.expired ? a.expired : a.score < b.score;
      });
      const uint64_t total = cached + disk.size();
      const uint64_t over = slice_cap_ > 0 && total > slice_cap_ ? total - slice_cap_ : 0;
      for (size_t i = 0; i < disk.size() && (disk[i].expired || i < over); ++i) {
        victims.push_back(disk[i].key);
      }
    }
    evict(s, victims);
  }
  return evicted;
}

}  // namespace ps
