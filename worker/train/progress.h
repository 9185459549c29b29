// A trainer's progress, as numbers: what the progress lines print, for the
// worker's training-curve CSV (--curve_csv) and its metrics.
#ifndef PS_WORKER_TRAIN_PROGRESS_H_
#define PS_WORKER_TRAIN_PROGRESS_H_

#include <cstdint>
#include <functional>

namespace ps {

struct ProgressPoint {
  double seconds = 0;  // since training started
  int epoch = 0;       // 1-based
  int64_t step = 0;    // steps so far
  int64_t examples = 0;
  double loss = 0;                 // mean over the steps since the last point
  double examples_per_second = 0;  // since the last point
  // Updates by other workers between a push's read and the push (mean so
  // far); dense trainer only, 0 elsewhere.
  double mean_staleness = 0;
  bool epoch_end = false;
};

using ProgressSink = std::function<void(const ProgressPoint&)>;

}  // namespace ps

#endif  // PS_WORKER_TRAIN_PROGRESS_H_
