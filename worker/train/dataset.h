// In-memory classification data set: dense float features plus integer labels.
// A Dataset is a plain value type (copyable, movable); it owns its buffers.
// Thread-compatible: concurrent const access is safe, mutation is not.
#ifndef PS_WORKER_TRAIN_DATASET_H_
#define PS_WORKER_TRAIN_DATASET_H_

#include <cstdint>
#include <vector>

namespace ps {

struct Dataset {
  int64_t num_examples = 0;
  int dim = 0;
  int num_classes = 0;
  std::vector<float> features;  // row-major, num_examples x dim
  std::vector<int32_t> labels;  // num_examples, each in [0, num_classes)

  // Pointer to the `dim` features of example i. Requires 0 <= i < num_examples.
  const float* row(int64_t i) const { return features.data() + i * dim; }
};

// Worker `index` of `count` keeps examples i with i % count == index, in their
// original order. Requires count >= 1 and 0 <= index < count (aborts otherwise).
Dataset ShardOf(const Dataset& full, int index, int count);

// The first n examples of `full` (all of them when n >= num_examples; none when
// n <= 0).
Dataset Head(const Dataset& full, int64_t n);

}  // namespace ps

#endif  // PS_WORKER_TRAIN_DATASET_H_
