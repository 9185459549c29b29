// What the sparse models share: a worker's minibatches of LibSVM examples
// (its share of the file), the distinct keys a minibatch uses, and the
// logistic link and loss.
#ifndef PS_WORKER_TRAIN_SPARSE_BATCH_H_
#define PS_WORKER_TRAIN_SPARSE_BATCH_H_

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "absl/status/statusor.h"
#include "worker/train/libsvm_reader.h"

namespace ps {

// The keys a minibatch uses (sorted, distinct, plus `extra_key` if not ~0
// unused) and, for each example, the index into them of each feature.
struct BatchKeys {
  std::vector<uint64_t> keys;
  std::vector<std::vector<uint32_t>> index;  // per example, per feature
  uint32_t extra = 0;                        // index of extra_key

  void Build(const std::vector<SparseExample>& batch, uint64_t extra_key) {
    keys.clear();
    for (const SparseExample& e : batch)
      keys.insert(keys.end(), e.indices.begin(), e.indices.end());
    keys.push_back(extra_key);
    std::sort(keys.begin(), keys.end());
    keys.erase(std::unique(keys.begin(), keys.end()), keys.end());
    index.resize(batch.size());
    for (size_t i = 0; i < batch.size(); ++i) {
      index[i].resize(batch[i].indices.size());
      for (size_t j = 0; j < batch[i].indices.size(); ++j) {
        index[i][j] = static_cast<uint32_t>(
            std::lower_bound(keys.begin(), keys.end(), batch[i].indices[j]) - keys.begin());
      }
    }
    extra =
        static_cast<uint32_t>(std::lower_bound(keys.begin(), keys.end(), extra_key) - keys.begin());
  }
};

// Example i of the file goes to worker i mod num_workers. Reads this
// worker's next minibatch of up to batch_size examples into *batch (empty
// at the end of the epoch, or past max_examples of the file when > 0).
// *file_index counts the examples of the file read so far this epoch.
inline absl::Status NextShardBatch(LibsvmReader& reader, int worker_index, int num_workers,
                                   int batch_size, int64_t max_examples, int64_t* file_index,
                                   std::vector<SparseExample>* batch) {
  batch->clear();
  while (static_cast<int>(batch->size()) < batch_size) {
    if (max_examples > 0 && *file_index >= max_examples) break;
    SparseExample e;
    absl::StatusOr<bool> got = reader.Next(&e);
    if (!got.ok()) return got.status();
    if (!*got) break;
    if ((*file_index)++ % num_workers == worker_index) batch->push_back(std::move(e));
  }
  return absl::OkStatus();
}

inline double Sigmoid(double z) { return 1.0 / (1.0 + std::exp(-z)); }

// The log-loss of probability p for label y, with p kept off 0 and 1.
inline double LogLoss(double p, float y) {
  p = std::min(std::max(p, 1e-15), 1.0 - 1e-15);
  return y > 0.5f ? -std::log(p) : -std::log(1.0 - p);
}

}  // namespace ps

#endif  // PS_WORKER_TRAIN_SPARSE_BATCH_H_
