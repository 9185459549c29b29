// Per-table statistics of pulls: how stale the returned parameters were
// (the server's clock for the table, i.e. the furthest round any worker has
// completed, minus the clock of the parameters returned) and how long pulls
// waited for slower workers. Thread-safe.
#ifndef PS_SERVER_CORE_PULL_STATS_H_
#define PS_SERVER_CORE_PULL_STATS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/ps.pb.h"

namespace ps {

class PullStats {
 public:
  // Staleness buckets 0..kBuckets-2, and kBuckets-1 for that many or more.
  static constexpr int kBuckets = 17;

  void Record(const std::string& table, uint64_t staleness, absl::Duration waited);
  // One entry per table, sorted by name; server_clock is left for the caller.
  std::vector<proto::TableStats> Snapshot() const;

 private:
  struct Table {
    uint64_t pulls = 0;
    std::vector<uint64_t> histogram = std::vector<uint64_t>(kBuckets, 0);
    uint64_t wait_us_total = 0;
    uint64_t wait_us_max = 0;
  };
  mutable absl::Mutex mu_;
  absl::flat_hash_map<std::string, Table> tables_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_SERVER_CORE_PULL_STATS_H_
