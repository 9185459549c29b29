// UpdateFilter: the PS paper's significantly-modified filter (section 4.2),
// on the worker. A key's gradient is held back and accumulated until the
// accumulation reaches `threshold` in absolute value (in any of the row's
// values); then the accumulation is pushed and cleared. Nothing is lost:
// what is held is pushed by Flush (at the end, or when more than `capacity`
// keys are held). threshold 0 passes everything through.
//
// Not thread-safe (one per worker thread).
#ifndef PS_WORKER_TRAIN_UPDATE_FILTER_H_
#define PS_WORKER_TRAIN_UPDATE_FILTER_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/types/span.h"

namespace ps {

class UpdateFilter {
 public:
  UpdateFilter(uint32_t width, float threshold, size_t capacity);

  // Adds the gradients of `keys` (grads key-major, width values each) and
  // appends to *push_keys / *push_grads the keys to push now with their
  // accumulated gradients. Past the capacity, everything held is appended.
  void Add(absl::Span<const uint64_t> keys, absl::Span<const float> grads,
           std::vector<uint64_t>* push_keys, std::vector<float>* push_grads);
  // Appends every held key and its accumulation, and holds nothing after.
  void Flush(std::vector<uint64_t>* push_keys, std::vector<float>* push_grads);

  size_t held() const { return held_.size(); }

 private:
  const uint32_t width_;
  const float threshold_;
  const size_t capacity_;
  // Key -> slot of its accumulation in sums_ (width floats); free slots are
  // reused.
  absl::flat_hash_map<uint64_t, size_t> held_;
  std::vector<float> sums_;
  std::vector<size_t> free_slots_;
};

}  // namespace ps

#endif  // PS_WORKER_TRAIN_UPDATE_FILTER_H_
