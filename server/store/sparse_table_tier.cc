// SparseTable's disk tier (tiered tables, sparse_table.h): rows read from
// the store into the cache, and the least pushed rows moved to the store.
#include <algorithm>
#include <cstring>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/store/sparse_table.h"

namespace ps {

absl::Status SparseTable::TierNotYet(const std::string& what) const {
  return absl::FailedPreconditionError(
      absl::StrCat("table '", def_.name(), "' is tiered (storage STORAGE_TIERED): ", what,
                   " of tiered tables are not built yet (issue 32); use a table in memory"));
}

absl::Status SparseTable::ReadTier(uint64_t s, absl::Span<const uint64_t> keys,
                                   const std::vector<size_t>& missing, std::vector<char>* rows,
                                   std::unique_ptr<bool[]>* found) const {
  std::vector<uint64_t> wanted;
  wanted.reserve(missing.size());
  for (size_t i : missing) wanted.push_back(keys[i]);
  rows->resize(wanted.size() * stride_bytes());
  found->reset(new bool[wanted.size()]);
  absl::Status status = tier_->Read(static_cast<uint32_t>(s), wanted, rows->data(), found->get());
  if (status.ok()) return status;
  return absl::Status(status.code(),
                      absl::StrCat("table '", def_.name(), "': reading ", wanted.size(),
                                   " rows of slice ", s, " from disk: ", status.message()));
}

absl::Status SparseTable::LoadFromTier(absl::Span<const uint64_t> keys, const KeyPlan& plan,
                                       uint64_t* grown, uint64_t* promoted) {
  std::vector<size_t> missing;
  std::vector<char> rows;
  std::unique_ptr<bool[]> found;
  uint64_t misses = 0;
  absl::Status status;
  for (const Group& g : plan.groups) {
    Slice& slice = *slices_[g.slice];
    absl::MutexLock lock(&slice.mu);
    missing.clear();
    for (size_t i = g.begin; i < g.end; ++i) {
      if (slice.rows.Find(keys[i], plan.hashes[i]) == nullptr) missing.push_back(i);
    }
    if (missing.empty()) continue;
    misses += missing.size();
    status = ReadTier(g.slice, keys, missing, &rows, &found);
    if (!status.ok()) break;
    const uint64_t before = slice.rows.bytes();
    for (size_t j = 0; j < missing.size(); ++j) {
      if (!found[j]) continue;  // a new key: the push creates it (admission)
      const size_t i = missing[j];
      bool created = false;
      float* const row = slice.rows.Insert(keys[i], plan.hashes[i], &created);
      if (!created) continue;  // listed twice
      // The row's floats and its change tag, as Demote wrote them.
      std::memcpy(row, rows.data() + j * stride_bytes(), stride_bytes());
      ++*promoted;
    }
    *grown += slice.rows.bytes() - before;
    PublishShape(g.slice, slice);
  }
  cache_misses_.fetch_add(misses, std::memory_order_relaxed);
  cache_hits_.fetch_add(keys.size() - misses, std::memory_order_relaxed);
  return status;
}

absl::StatusOr<uint64_t> SparseTable::Demote() {
  if (tier_ == nullptr) return 0;
  absl::MutexLock demoting(&demote_mu_);
  const uint64_t held = rows_.load(std::memory_order_relaxed);
  if (held <= cache_rows_) return 0;
  const uint64_t need = held - (cache_rows_ - cache_rows_ / 10);
  // 1. How often the cached rows were pushed (since the last halving).
  constexpr uint32_t kBins = 64;
  std::vector<uint64_t> counts(kBins, 0);
  for (const auto& slice : slices_) {
    if (slice == nullptr) continue;
    absl::ReaderMutexLock lock(&slice->mu);
    slice->rows.ForEach([&](uint64_t, const float* row) {
      ++counts[std::min<uint32_t>(TouchCount(row), kBins - 1)];
    });
  }
  uint32_t threshold = 0;
  for (uint64_t below = 0; threshold < kBins - 1 && below + counts[threshold] < need; ++threshold) {
    below += counts[threshold];
  }
  // 2. The rows pushed at most `threshold` times are copied (up to `need`),
  // the others' counts halved: old popularity fades.
  struct Victim {
    uint32_t slice;
    uint64_t key;
  };
  std::vector<Victim> victims;
  std::vector<char> copies;
  const size_t stride = stride_bytes();
  for (uint64_t s = 0; s < slices_.size(); ++s) {
    if (slices_[s] == nullptr) continue;
    Slice& slice = *slices_[s];
    absl::MutexLock lock(&slice.mu);
    SparseRows* const rows = &slice.rows;
    rows->ForEach([&](uint64_t key, float* row) {
      const uint32_t count = TouchCount(row);
      if (victims.size() < need && count <= threshold) {
        victims.push_back({static_cast<uint32_t>(s), key});
        const char* bytes = reinterpret_cast<const char*>(row);
        copies.insert(copies.end(), bytes, bytes + stride);
        return;
      }
      SetTouchCount(row, count / 2);
    });
  }
  if (victims.empty()) return 0;
  // 3. To disk, in one batch.
  RowStore::Batch batch;
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
    for (; v < victims.size() && victims[v].slice == s; ++v) {
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

}  // namespace ps
