// SparseTable's eviction: by age (Sweep), of a primary's keys on a copy
// (EvictKeys), and at the row cap (sparse_table.h).
#include <algorithm>
#include <cstring>
#include <vector>

#include "server/store/sparse_table.h"

namespace ps {

void SparseTable::EvictRow(Slice& slice, uint64_t key) {
  if (slice.rows.Erase(key)) {
    evicted_.fetch_add(1, std::memory_order_relaxed);
    rows_.fetch_sub(1, std::memory_order_relaxed);
    NoteErased(slice, key);
  }
}

void SparseTable::EvictOverCap(uint64_t s, Slice& slice, Decisions* decisions) {
  if (decisions != nullptr && decisions->replay) {
    for (uint64_t key : decisions->evicted) {
      if (SliceOf(key) == s) EvictRow(slice, key);
    }
    return;
  }
  const bool lfu = def_.eviction() == proto::EVICT_LFU;
  while (slice.rows.size() > slice_cap_) {
    // Of a few sampled rows, the least recently (LRU) or least often (LFU)
    // updated.
    uint64_t victim = 0;
    uint64_t best = ~uint64_t{0};
    for (int i = 0; i < kEvictionSamples; ++i) {
      uint64_t key;
      if (!slice.rows.SampleKey(NextRandom(&slice.rng), &key)) return;
      const float* row = slice.rows.Find(key);
      const uint64_t score = lfu ? TouchCount(row) : LastTouch(row);
      if (score < best) {
        best = score;
        victim = key;
      }
    }
    EvictRow(slice, victim);
    if (decisions != nullptr) decisions->evicted.push_back(victim);
  }
}

uint64_t SparseTable::EvictKeys(absl::Span<const uint64_t> keys) {
  if (tier_ != nullptr) return EvictTierKeys(keys);
  const uint64_t before = evicted();
  absl::flat_hash_map<uint64_t, std::vector<uint64_t>> by_slice;
  for (uint64_t key : keys) {
    const uint64_t s = SliceOf(key);
    if (s < slices_.size() && slices_[s] != nullptr) by_slice[s].push_back(key);
  }
  for (auto& [s, slice_keys] : by_slice) {
    Slice& slice = *slices_[s];
    absl::MutexLock lock(&slice.mu);
    EvictLocked(slice, slice_keys);
    PublishShape(s, slice);
  }
  return evicted() - before;
}

void SparseTable::EvictLocked(Slice& slice, absl::Span<const uint64_t> keys) {
  if (keys.empty()) return;
  CopyForCut(slice);  // evictions are outside any cut
  const uint64_t before = slice.rows.bytes();
  for (uint64_t key : keys) EvictRow(slice, key);
  // Erased rows go to a free list, which may grow.
  const uint64_t grown = slice.rows.bytes() - before;
  budget_->Charge(grown);
  bytes_.fetch_add(grown, std::memory_order_relaxed);
}

uint64_t SparseTable::Sweep(std::vector<uint64_t>* keys) {
  if (tier_ != nullptr) return SweepTier(keys);
  const absl::Time now = clock_->Now();
  const uint64_t oldest = OldestKept(now);
  if (oldest == 0) return 0;
  uint64_t evicted = 0;
  std::vector<uint64_t> expired;
  for (const auto& slice : slices_) {
    if (slice == nullptr) continue;
    absl::MutexLock lock(&slice->mu);
    expired.clear();
    slice->rows.ForEach([&](uint64_t key, const float* row) {
      if (LastTouch(row) < oldest) expired.push_back(key);
    });
    EvictLocked(*slice, expired);
    if (keys != nullptr) keys->insert(keys->end(), expired.begin(), expired.end());
    evicted += expired.size();
  }
  return evicted;
}

uint64_t SparseTable::OldestKept(absl::Time now) const {
  const uint64_t by_clocks = def_.evict_after_clocks(), by_seconds = def_.evict_after_seconds();
  if (by_clocks == 0 && by_seconds == 0) return 0;
  // The age of a row in the unit of its metadata.
  const uint64_t current =
      by_seconds > 0
          ? static_cast<uint64_t>(std::max<int64_t>(0, absl::ToInt64Seconds(now - created_)))
          : max_clock_.load(std::memory_order_relaxed);
  const uint64_t limit = by_seconds > 0 ? by_seconds : by_clocks;
  return current <= limit ? 0 : current - limit;
}

}  // namespace ps
