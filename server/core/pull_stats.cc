#include "server/core/pull_stats.h"

#include <algorithm>

namespace ps {

void PullStats::Record(const std::string& table, uint64_t staleness, absl::Duration waited) {
  const uint64_t us =
      static_cast<uint64_t>(std::max<int64_t>(0, absl::ToInt64Microseconds(waited)));
  absl::MutexLock lock(&mu_);
  Table& t = tables_[table];
  ++t.pulls;
  ++t.histogram[std::min<uint64_t>(staleness, kBuckets - 1)];
  t.wait_us_total += us;
  t.wait_us_max = std::max(t.wait_us_max, us);
}

std::vector<proto::TableStats> PullStats::Snapshot() const {
  std::vector<proto::TableStats> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, t] : tables_) {
      proto::TableStats& s = out.emplace_back();
      s.set_table(name);
      s.set_pulls(t.pulls);
      for (uint64_t c : t.histogram) s.add_staleness_histogram(c);
      s.set_wait_us_total(t.wait_us_total);
      s.set_wait_us_max(t.wait_us_max);
    }
  }
  std::sort(out.begin(), out.end(),
            [](const auto& a, const auto& b) { return a.table() < b.table(); });
  return out;
}

}  // namespace ps
