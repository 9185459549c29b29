// Synthetic classification data that a linear (softmax) classifier can fit
// perfectly; used by tests and smoke runs in place of a real data set.
// Pure functions of their arguments (deterministic for a seed); thread-safe.
#ifndef PS_WORKER_TRAIN_SYNTHETIC_DATA_H_
#define PS_WORKER_TRAIN_SYNTHETIC_DATA_H_

#include <cstdint>
#include <vector>

#include "worker/train/dataset.h"

namespace ps {

// A generated data set together with the linear rule that labels it.
struct LinearProblem {
  Dataset data;
  // num_classes x dim, row-major, unit-norm rows. For every example,
  // label = argmax_k (weights_k . x) and the best score beats the runner-up by
  // at least `margin`.
  std::vector<float> weights;
  float margin = 0;
};

// Draws a random unit-norm W (num_classes x dim) and n points. Each point is
// x = g + 2 w_c with g ~ N(0, I) and c a uniformly random class (the shift
// keeps classes roughly balanced); its label is argmax W x, and points whose
// top two scores differ by less than the margin (0.5) are redrawn. Features
// are therefore roughly N(0, 1) per coordinate. Requires n >= 0, dim >= 1,
// num_classes >= 2 (aborts otherwise). Same arguments => same result.
LinearProblem MakeLinearProblem(int64_t n, int dim, int num_classes, uint64_t seed);

// The data of MakeLinearProblem(n, dim, num_classes, seed).
Dataset MakeLinearlySeparable(int64_t n, int dim, int num_classes, uint64_t seed);

}  // namespace ps

#endif  // PS_WORKER_TRAIN_SYNTHETIC_DATA_H_
