// A trainer's progress, as numbers: what the progress lines print, for the
// worker's training-curve CSV (--curve_csv) and its metrics.
#ifndef PS_WORKER_TRAIN_PROGRESS_H_
#define PS_WORKER_TRAIN_PROGRESS_H_

#include <algorithm>
#include <cstdint>
#include <functional>
#include <optional>

#include "absl/time/clock.h"
#include "absl/time/time.h"

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

// The steps since the last progress report of a trainer, and when the next
// one is due: every `interval`, and at each epoch's end.
class ProgressWindow {
 public:
  ProgressWindow(absl::Time run_start, absl::Duration interval)
      : run_start_(run_start), start_(run_start), interval_(interval) {}

  // Counts a step of `batch` examples and `loss`. When a report is due,
  // returns its point (the loss and rate since the last report; the
  // caller fills what only it knows, e.g. the staleness) and starts a new
  // window; otherwise nullopt.
  std::optional<ProgressPoint> Step(float loss, int batch, int epoch, int64_t step,
                                    int64_t examples, bool epoch_end) {
    loss_ += loss;
    ++steps_;
    window_examples_ += batch;
    const absl::Time now = absl::Now();
    if (now - start_ < interval_ && !epoch_end) return std::nullopt;
    const double secs = absl::ToDoubleSeconds(now - start_);
    ProgressPoint point;
    point.seconds = absl::ToDoubleSeconds(now - run_start_);
    point.epoch = epoch;
    point.step = step;
    point.examples = examples;
    point.loss = loss_ / std::max<int64_t>(1, steps_);
    point.examples_per_second = secs > 0 ? window_examples_ / secs : 0.0;
    point.epoch_end = epoch_end;
    start_ = now;
    loss_ = 0;
    steps_ = window_examples_ = 0;
    return point;
  }

 private:
  const absl::Time run_start_;
  absl::Time start_;
  const absl::Duration interval_;
  double loss_ = 0;
  int64_t steps_ = 0, window_examples_ = 0;
};

}  // namespace ps

#endif  // PS_WORKER_TRAIN_PROGRESS_H_
