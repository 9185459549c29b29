#include "common/metrics.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ps {

namespace {

std::string EscapeLabelValue(const std::string& value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string EscapeHelp(const std::string& help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  if (v == std::floor(v) && std::fabs(v) < 1e15) return absl::StrFormat("%.0f", v);
  return absl::StrFormat("%.9g", v);
}

void Header(const std::string& name, const std::string& type, const std::string& help,
            std::string* out) {
  absl::StrAppend(out, "# HELP ", name, " ", EscapeHelp(help), "\n# TYPE ", name, " ", type, "\n");
}

}  // namespace

std::string FormatLabels(const MetricLabels& labels) {
  if (labels.empty()) return "";
  std::string out = "{";
  for (size_t i = 0; i < labels.size(); ++i) {
    absl::StrAppend(&out, i ? "," : "", labels[i].first, "=\"", EscapeLabelValue(labels[i].second),
                    "\"");
  }
  return out + "}";
}

Histogram::Histogram(std::vector<double> bounds)
    : bounds_(std::move(bounds)), counts_(new std::atomic<uint64_t>[bounds_.size() + 1]()) {}

void Histogram::Observe(double value) {
  const size_t bucket = std::lower_bound(bounds_.begin(), bounds_.end(), value) - bounds_.begin();
  counts_[bucket].fetch_add(1, std::memory_order_relaxed);
  double sum = sum_.load(std::memory_order_relaxed);
  while (!sum_.compare_exchange_weak(sum, sum + value, std::memory_order_relaxed)) {
  }
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.bounds = bounds_;
  uint64_t running = 0;
  for (size_t i = 0; i <= bounds_.size(); ++i) {
    running += counts_[i].load(std::memory_order_relaxed);
    s.cumulative.push_back(running);
  }
  s.sum = sum_.load(std::memory_order_relaxed);
  return s;
}

namespace {

// A histogram's _bucket, _sum and _count lines.
void AppendHistogram(const std::string& name, const MetricLabels& labels,
                     const Histogram::Snapshot& s, std::string* out) {
  const std::string key = FormatLabels(labels);
  for (size_t i = 0; i <= s.bounds.size(); ++i) {
    MetricLabels with_le = labels;
    with_le.emplace_back("le", i < s.bounds.size() ? FormatValue(s.bounds[i]) : "+Inf");
    absl::StrAppend(out, name, "_bucket", FormatLabels(with_le), " ", s.cumulative[i], "\n");
  }
  absl::StrAppend(out, name, "_sum", key, " ", FormatValue(s.sum), "\n");
  absl::StrAppend(out, name, "_count", key, " ", s.cumulative.back(), "\n");
}

}  // namespace

std::vector<double> ExponentialBuckets(double start, double factor, int count) {
  std::vector<double> bounds;
  double b = start;
  for (int i = 0; i < count; ++i, b *= factor) bounds.push_back(b);
  return bounds;
}

void MetricsWriter::Gauge(const std::string& name, const std::string& help,
                          const MetricLabels& labels, double value) {
  Add(name, "gauge", help, labels, value);
}

void MetricsWriter::CounterValue(const std::string& name, const std::string& help,
                                 const MetricLabels& labels, double value) {
  Add(name, "counter", help, labels, value);
}

void MetricsWriter::HistogramValue(const std::string& name, const std::string& help,
                                   const MetricLabels& labels, const Histogram::Snapshot& value) {
  Family& f = families_[name];
  if (f.type.empty()) {
    f.type = "histogram";
    f.help = help;
  }
  f.histograms.emplace_back(labels, value);
}

void MetricsWriter::Add(const std::string& name, const char* type, const std::string& help,
                        const MetricLabels& labels, double value) {
  Family& f = families_[name];
  if (f.type.empty()) {
    f.type = type;
    f.help = help;
  }
  f.samples.emplace_back(labels, value);
}

Counter& MetricsRegistry::GetCounter(const std::string& name, const std::string& help,
                                     const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  Family<Counter>& f = counters_[name];
  if (f.help.empty()) f.help = help;
  auto& slot = f.series[FormatLabels(labels)];
  if (slot.second == nullptr) slot = {labels, std::make_unique<Counter>()};
  return *slot.second;
}

Histogram& MetricsRegistry::GetHistogram(const std::string& name, const std::string& help,
                                         const std::vector<double>& bounds,
                                         const MetricLabels& labels) {
  absl::MutexLock lock(&mu_);
  Family<Histogram>& f = histograms_[name];
  if (f.help.empty()) f.help = help;
  auto& slot = f.series[FormatLabels(labels)];
  if (slot.second == nullptr) slot = {labels, std::make_unique<Histogram>(bounds)};
  return *slot.second;
}

void MetricsRegistry::AddCollector(std::function<void(MetricsWriter&)> collect) {
  absl::MutexLock lock(&mu_);
  collectors_.push_back(std::move(collect));
}

std::vector<std::pair<MetricLabels, Histogram::Snapshot>> MetricsRegistry::ReadHistograms(
    const std::string& name) const {
  std::vector<std::pair<MetricLabels, Histogram::Snapshot>> out;
  absl::MutexLock lock(&mu_);
  auto it = histograms_.find(name);
  if (it == histograms_.end()) return out;
  for (const auto& [key, series] : it->second.series) {
    out.emplace_back(series.first, series.second->Read());
  }
  return out;
}

std::string MetricsRegistry::Render() const {
  // Families by name: each one's text.
  std::map<std::string, std::string> text;
  std::vector<std::function<void(MetricsWriter&)>> collectors;
  {
    absl::MutexLock lock(&mu_);
    collectors = collectors_;
    for (const auto& [name, family] : counters_) {
      std::string& out = text[name];
      Header(name, "counter", family.help, &out);
      for (const auto& [key, series] : family.series) {
        absl::StrAppend(&out, name, key, " ", series.second->value(), "\n");
      }
    }
    for (const auto& [name, family] : histograms_) {
      std::string& out = text[name];
      Header(name, "histogram", family.help, &out);
      for (const auto& [key, series] : family.series) {
        AppendHistogram(name, series.first, series.second->Read(), &out);
      }
    }
  }
  // Outside the lock: collectors take the locks of what they read.
  MetricsWriter writer;
  for (const auto& collect : collectors) collect(writer);
  for (const auto& [name, family] : writer.families_) {
    std::string& out = text[name];
    if (!out.empty()) continue;  // a name kept here wins over a collector's
    Header(name, family.type, family.help, &out);
    for (const auto& [labels, value] : family.samples) {
      absl::StrAppend(&out, name, FormatLabels(labels), " ", FormatValue(value), "\n");
    }
    for (const auto& [labels, snapshot] : family.histograms) {
      AppendHistogram(name, labels, snapshot, &out);
    }
  }
  std::string all;
  for (const auto& [name, t] : text) all += t;
  return all;
}

}  // namespace ps
