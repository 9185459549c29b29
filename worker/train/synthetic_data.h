// Synthetic classification data that a linear (softmax) classifier can fit
// perfectly (feature vectors, or small images); used by tests and smoke runs
// in place of a real data set.
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

// n grey-scale images of rows x cols pixels in 4 classes: in an image of
// class c, quadrant c (0 top-left, 1 top-right, 2 bottom-left, 3
// bottom-right; the first rows/2 rows and cols/2 columns are top and left)
// is bright (pixels in [160, 255] / 255) and the rest dark ([0, 96] / 255).
// Pixels are multiples of 1/255, so the images survive a round trip through
// an IDX file exactly. Labels are uniformly random; dim = rows * cols.
// Requires n >= 0, rows >= 2, cols >= 2 (aborts otherwise). Same arguments
// => same result.
Dataset MakeQuadrantImages(int64_t n, int rows, int cols, uint64_t seed);

}  // namespace ps

#endif  // PS_WORKER_TRAIN_SYNTHETIC_DATA_H_
