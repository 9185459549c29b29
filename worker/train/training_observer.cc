#include "worker/train/training_observer.h"

#include <cerrno>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace ps {

absl::StatusOr<std::unique_ptr<TrainingObserver>> TrainingObserver::Create(
    const std::string& csv_path, MetricsRegistry* metrics) {
  std::unique_ptr<TrainingObserver> observer(new TrainingObserver());
  if (!csv_path.empty()) {
    std::FILE* f = std::fopen(csv_path.c_str(), "w");
    if (f == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--curve_csv=", csv_path, ": cannot create it: ", std::strerror(errno)));
    }
    std::fputs(
        "seconds,epoch,step,examples,loss,examples_per_second,staleness,test_metric,"
        "test_value\n",
        f);
    std::fflush(f);
    absl::MutexLock lock(&observer->mu_);
    observer->csv_ = f;
  }
  if (metrics != nullptr) {
    metrics->AddCollector([o = observer.get()](MetricsWriter& out) { o->Collect(out); });
  }
  return observer;
}

TrainingObserver::~TrainingObserver() {
  absl::MutexLock lock(&mu_);
  if (csv_ != nullptr) std::fclose(csv_);
}

ProgressSink TrainingObserver::Sink() {
  return [this](const ProgressPoint& p) { Record(p); };
}

void TrainingObserver::Record(const ProgressPoint& p) {
  absl::MutexLock lock(&mu_);
  last_ = p;
  have_point_ = true;
  if (csv_ == nullptr) return;
  std::fprintf(csv_, "%.3f,%d,%lld,%lld,%.6f,%.1f,%.3f,,\n", p.seconds, p.epoch,
               static_cast<long long>(p.step), static_cast<long long>(p.examples), p.loss,
               p.examples_per_second, p.mean_staleness);
  std::fflush(csv_);  // readable while training goes on
}

void TrainingObserver::Finish(const std::string& metric, double value) {
  absl::MutexLock lock(&mu_);
  test_metric_ = metric;
  test_value_ = value;
  if (csv_ == nullptr) return;
  const ProgressPoint& p = last_;
  std::fprintf(csv_, "%.3f,%d,%lld,%lld,%.6f,%.1f,%.3f,%s,%.4f\n", p.seconds, p.epoch,
               static_cast<long long>(p.step), static_cast<long long>(p.examples), p.loss,
               p.examples_per_second, p.mean_staleness, metric.c_str(), value);
  std::fflush(csv_);
}

void TrainingObserver::Collect(MetricsWriter& out) {
  absl::MutexLock lock(&mu_);
  if (have_point_) {
    out.Gauge("ps_worker_epoch", "Epoch of the latest progress point (1-based)", {}, last_.epoch);
    out.CounterValue("ps_worker_steps_total", "Training steps so far", {},
                     static_cast<double>(last_.step));
    out.CounterValue("ps_worker_examples_total", "Training examples so far", {},
                     static_cast<double>(last_.examples));
    out.Gauge("ps_worker_loss", "Mean training loss since the previous progress point", {},
              last_.loss);
    out.Gauge("ps_worker_examples_per_second", "Training speed since the previous progress point",
              {}, last_.examples_per_second);
    out.Gauge("ps_worker_staleness_mean",
              "Mean updates by other workers between a push's read and the push", {},
              last_.mean_staleness);
  }
  if (!test_metric_.empty()) {
    out.Gauge("ps_worker_test_result", "The test result after training", {{"metric", test_metric_}},
              test_value_);
  }
}

}  // namespace ps
