// RowCache: a worker's cache of hot rows of a sparse table, bounded by
// staleness. A row pulled at clock c may be reused at clocks up to c + tau
// and never later, so reads from the cache are at most tau clocks old, the
// bound a bounded-delay (SSP) pull would give. Capacity-bounded: when full,
// the rows pulled longest ago make room (so the hot rows, pulled again and
// again, stay).
//
// Not thread-safe (one per worker thread).
#ifndef PS_WORKER_TRAIN_ROW_CACHE_H_
#define PS_WORKER_TRAIN_ROW_CACHE_H_

#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace ps {

class RowCache {
 public:
  // Rows of `width` floats; reused for `staleness` clocks after their pull;
  // at most `capacity` rows.
  RowCache(uint32_t width, uint64_t staleness, size_t capacity);

  // The row of `key` if it was pulled at a clock c with clock <= c +
  // staleness (copied to out, width floats), else false.
  bool Lookup(uint64_t key, uint64_t clock, float* out);
  // Remembers `key`'s values as pulled at `clock`.
  void Insert(uint64_t key, uint64_t clock, absl::Span<const float> values);

  size_t size() const { return rows_.size(); }
  uint64_t hits() const { return hits_; }
  uint64_t misses() const { return misses_; }

 private:
  struct Row {
    uint64_t clock;
    size_t slot;  // its values are values_[slot * width_, (slot + 1) * width_)
  };
  const uint32_t width_;
  const uint64_t staleness_;
  const size_t capacity_;
  absl::flat_hash_map<uint64_t, Row> rows_;
  // Values of every row in one array (no allocation per row); slots of
  // evicted rows are reused.
  std::vector<float> values_;
  std::vector<size_t> free_slots_;
  // Keys in the order they were (re)inserted, with that insertion's clock:
  // the oldest entries are evicted first; entries whose key was inserted
  // again since are skipped.
  std::deque<std::pair<uint64_t, uint64_t>> order_;
  uint64_t hits_ = 0, misses_ = 0;
};

}  // namespace ps

#endif  // PS_WORKER_TRAIN_ROW_CACHE_H_
