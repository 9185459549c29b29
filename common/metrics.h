// Metrics of one process for Prometheus: counters, gauges and histograms in
// labelled families, rendered in Prometheus' text exposition format (0.0.4),
// served by common/metrics_http.h.
//
// Counters and histograms are kept here and updated where things happen
// (Counter::Add, Histogram::Observe: lock-free, resp. one short lock).
// Values that already live elsewhere (rows of a table, a replication
// stream's backlog) are read at scrape time by collectors (AddCollector)
// instead of being copied here on every change.
//
// Names follow Prometheus' conventions: ps_<what>_<unit>, counters end in
// _total, durations are in seconds and sizes in bytes. Thread-safe.
#ifndef PS_COMMON_METRICS_H_
#define PS_COMMON_METRICS_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/synchronization/mutex.h"

namespace ps {

// Label name -> value, in the order given.
using MetricLabels = std::vector<std::pair<std::string, std::string>>;

class Counter {
 public:
  void Add(uint64_t n = 1) { value_.fetch_add(n, std::memory_order_relaxed); }
  uint64_t value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<uint64_t> value_{0};
};

// Lock-free: Observe is a few atomic operations. A Read concurrent with
// Observes may see a count without its sum, never a torn value.
class Histogram {
 public:
  // `bounds`: the buckets' upper bounds, increasing (+Inf is implied).
  explicit Histogram(std::vector<double> bounds);
  void Observe(double value);
  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (= count)
    double sum = 0;
  };
  Snapshot Read() const;

 private:
  const std::vector<double> bounds_;
  // Per bucket; the last: above every bound.
  const std::unique_ptr<std::atomic<uint64_t>[]> counts_;
  std::atomic<double> sum_{0};
};

// Bucket bounds: `count` bounds from `start`, each `factor` times the last.
std::vector<double> ExponentialBuckets(double start, double factor, int count);

// What a collector writes at scrape time.
class MetricsWriter {
 public:
  void Gauge(const std::string& name, const std::string& help, const MetricLabels& labels,
             double value);
  void CounterValue(const std::string& name, const std::string& help, const MetricLabels& labels,
                    double value);
  void HistogramValue(const std::string& name, const std::string& help, const MetricLabels& labels,
                      const Histogram::Snapshot& value);

 private:
  friend class MetricsRegistry;
  struct Family {
    std::string type;
    std::string help;
    std::vector<std::pair<MetricLabels, double>> samples;
    std::vector<std::pair<MetricLabels, Histogram::Snapshot>> histograms;
  };
  void Add(const std::string& name, const char* type, const std::string& help,
           const MetricLabels& labels, double value);
  std::map<std::string, Family> families_;
};

class MetricsRegistry {
 public:
  MetricsRegistry() = default;
  MetricsRegistry(const MetricsRegistry&) = delete;
  MetricsRegistry& operator=(const MetricsRegistry&) = delete;

  // The counter (histogram) of family `name` with `labels`, created at the
  // first call; the same object for the same name and labels afterwards.
  // The reference stays valid as long as the registry. A family keeps the
  // help (and bounds) of its first call.
  Counter& GetCounter(const std::string& name, const std::string& help,
                      const MetricLabels& labels = {});
  Histogram& GetHistogram(const std::string& name, const std::string& help,
                          const std::vector<double>& bounds, const MetricLabels& labels = {});

  // Runs at every scrape, in the order added; must be thread-safe and must
  // not call back into the registry.
  void AddCollector(std::function<void(MetricsWriter&)> collect);

  // Every family, sorted by name, in the text exposition format.
  std::string Render() const;
  // The series of histogram family `name` kept here (not collectors'), with
  // their labels; none when there is no such family.
  std::vector<std::pair<MetricLabels, Histogram::Snapshot>> ReadHistograms(
      const std::string& name) const;

 private:
  template <typename T>
  struct Family {
    std::string help;
    std::map<std::string, std::pair<MetricLabels, std::unique_ptr<T>>> series;  // by label text
  };
  mutable absl::Mutex mu_;
  std::map<std::string, Family<Counter>> counters_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, Family<Histogram>> histograms_ ABSL_GUARDED_BY(mu_);
  std::vector<std::function<void(MetricsWriter&)>> collectors_ ABSL_GUARDED_BY(mu_);
};

// `{a="x",b="y"}` with values escaped as the format requires ("" for none).
std::string FormatLabels(const MetricLabels& labels);

}  // namespace ps

#endif  // PS_COMMON_METRICS_H_
