// RowIo: how a sparse model's trainer reads and writes the rows of one
// table, a step at a time: through the servers at every step (SparseRowIo:
// Downpour, with its row cache and filter) or through a local copy sent
// once per round (AveragingRows: model and elastic averaging).
#ifndef PS_WORKER_TRAIN_ROW_IO_H_
#define PS_WORKER_TRAIN_ROW_IO_H_

#include <cstdint>

#include "absl/status/status.h"
#include "absl/types/span.h"

namespace ps {

class RowIo {
 public:
  virtual ~RowIo() = default;
  // The rows of `keys` (distinct) for step `step` into out (keys.size() *
  // width floats).
  virtual absl::Status Pull(absl::Span<const uint64_t> keys, uint64_t step,
                            absl::Span<float> out) = 0;
  // The keys' gradients of step `clock` (keys as last pulled).
  virtual absl::Status Push(absl::Span<const uint64_t> keys, absl::Span<const float> grads,
                            uint64_t clock) = 0;
  // Sends whatever is held back; called once training ends.
  virtual absl::Status Flush(uint64_t clock) = 0;
  // Keys read from and written to the servers.
  virtual int64_t keys_pulled() const = 0;
  virtual int64_t keys_pushed() const = 0;
};

}  // namespace ps

#endif  // PS_WORKER_TRAIN_ROW_IO_H_
