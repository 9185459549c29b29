// SparseRowIo: a worker's pulls and pushes of one sparse table's rows,
// through the staleness-bounded row cache (worker/train/row_cache.h) and the
// significantly-modified filter (worker/train/update_filter.h), each off
// when its parameter is 0, counting the keys actually pulled and pushed.
// Used by the sparse models' trainers. Not thread-safe.
#ifndef PS_WORKER_TRAIN_SPARSE_ROW_IO_H_
#define PS_WORKER_TRAIN_SPARSE_ROW_IO_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "worker/client/ps_client.h"
#include "worker/train/row_cache.h"
#include "worker/train/row_io.h"
#include "worker/train/update_filter.h"

namespace ps {

struct SparseRowIoOptions {
  uint64_t cache_staleness = 0;  // 0: no cache
  size_t cache_rows = 1 << 20;
  float push_threshold = 0;  // 0: no filter
  size_t filter_rows = 1 << 20;
};

class SparseRowIo : public RowIo {
 public:
  // `client` must outlive this.
  SparseRowIo(PsClient& client, std::string table, uint32_t width,
              const SparseRowIoOptions& options);

  // The rows of `keys` (distinct) as of step `step` into out (keys.size() *
  // width floats): rows cached within the staleness bound from the cache,
  // the others pulled (and cached).
  absl::Status Pull(absl::Span<const uint64_t> keys, uint64_t step, absl::Span<float> out) override;
  // Pushes the keys' gradients stamped with `clock`, or holds back those the
  // filter finds too small.
  absl::Status Push(absl::Span<const uint64_t> keys, absl::Span<const float> grads,
                    uint64_t clock) override;
  // Pushes whatever the filter holds.
  absl::Status Flush(uint64_t clock) override;

  int64_t keys_pulled() const override { return keys_pulled_; }
  int64_t keys_pushed() const override { return keys_pushed_; }

 private:
  absl::Status SendHeld(uint64_t clock);

  PsClient& client_;
  const std::string table_;
  const uint32_t width_;
  const SparseRowIoOptions options_;
  RowCache cache_;
  UpdateFilter filter_;
  std::vector<uint64_t> to_pull_, push_keys_;
  std::vector<size_t> to_pull_at_;
  std::vector<float> pulled_, push_grads_;
  int64_t keys_pulled_ = 0, keys_pushed_ = 0;
};

}  // namespace ps

#endif  // PS_WORKER_TRAIN_SPARSE_ROW_IO_H_
