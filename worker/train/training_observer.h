// What a worker shows of its training besides its log lines: a CSV of the
// training curve (--curve_csv: one row per progress point, and a last row
// with the test result) and, with --metrics_port, Prometheus metrics of the
// latest point next to its gRPC calls (common/grpc_metrics.h).
//
// CSV columns: seconds,epoch,step,examples,loss,examples_per_second,
// staleness,test_metric,test_value (test_*: empty but in the last row, e.g.
// "accuracy,0.8712"). Thread-safe.
#ifndef PS_WORKER_TRAIN_TRAINING_OBSERVER_H_
#define PS_WORKER_TRAIN_TRAINING_OBSERVER_H_

#include <cstdio>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/metrics.h"
#include "worker/train/progress.h"

namespace ps {

class TrainingObserver {
 public:
  // `csv_path` empty: no CSV. `metrics` (may be null) gets the gauges and
  // must outlive the observer. Errors: INVALID_ARGUMENT naming the CSV path
  // when it cannot be created.
  static absl::StatusOr<std::unique_ptr<TrainingObserver>> Create(const std::string& csv_path,
                                                                  MetricsRegistry* metrics);
  ~TrainingObserver();

  // For TrainerConfig::on_progress.
  ProgressSink Sink();
  void Record(const ProgressPoint& point);
  // The test result (metric "accuracy" or "auc"): the CSV's last row.
  void Finish(const std::string& metric, double value);

 private:
  TrainingObserver() = default;
  void Collect(MetricsWriter& out);

  absl::Mutex mu_;
  std::FILE* csv_ ABSL_GUARDED_BY(mu_) = nullptr;
  ProgressPoint last_ ABSL_GUARDED_BY(mu_);
  bool have_point_ ABSL_GUARDED_BY(mu_) = false;
  std::string test_metric_ ABSL_GUARDED_BY(mu_);
  double test_value_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ps

#endif  // PS_WORKER_TRAIN_TRAINING_OBSERVER_H_
