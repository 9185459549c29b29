#include "worker/train/row_cache.h"

#include <algorithm>

namespace ps {

RowCache::RowCache(uint32_t width, uint64_t staleness, size_t capacity)
    : width_(width), staleness_(staleness), capacity_(capacity) {}

bool RowCache::Lookup(uint64_t key, uint64_t clock, float* out) {
  auto it = rows_.find(key);
  if (it == rows_.end() || clock > it->second.clock + staleness_) {
    ++misses_;
    return false;
  }
  const float* values = values_.data() + it->second.slot * width_;
  std::copy(values, values + width_, out);
  ++hits_;
  return true;
}

void RowCache::Insert(uint64_t key, uint64_t clock, absl::Span<const float> values) {
  if (capacity_ == 0) return;
  auto [it, inserted] = rows_.try_emplace(key);
  Row& row = it->second;
  row.clock = clock;
  if (inserted) {
    if (!free_slots_.empty()) {
      row.slot = free_slots_.back();
      free_slots_.pop_back();
    } else {
      row.slot = values_.size() / width_;
      values_.resize(values_.size() + width_);
    }
  }
  std::copy(values.begin(), values.begin() + width_, values_.begin() + row.slot * width_);
  order_.emplace_back(key, clock);
  // Evict the oldest insertions. A queue entry superseded by a later insert
  // of its key (another clock) is dropped; one that is current but need not
  // go moves to the back, so the queue stays within twice the capacity.
  while (!order_.empty() && (rows_.size() > capacity_ || order_.size() > 2 * capacity_)) {
    const auto [old_key, old_clock] = order_.front();
    order_.pop_front();
    auto it = rows_.find(old_key);
    if (it == rows_.end() || it->second.clock != old_clock) continue;
    if (rows_.size() > capacity_) {
      free_slots_.push_back(it->second.slot);
      rows_.erase(it);
    } else {
      order_.emplace_back(old_key, old_clock);
    }
  }
}

}  // namespace ps
