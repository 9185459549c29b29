// PsServer's metrics read at scrape time (see ps_server.h): per shard held
// here and table, rows, memory, clocks, pull staleness and sparse-row
// admission; the shard's replication stream; membership; checkpoints.
#include <algorithm>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "server/ps_server.h"

namespace ps {

namespace {

// One shard held here: memory, apply time, and each table's rows, clocks,
// pulls, staleness, sparse admission and bytes.
void CollectShardMetrics(PsCore& core, const std::string& shard, MetricsWriter& out) {
  out.Gauge("ps_memory_used_bytes", "Bytes of parameters and optimizer state held, by shard",
            {{"shard", shard}}, static_cast<double>(core.bytes_used()));
  out.HistogramValue("ps_apply_seconds",
                     "Time a push took to apply in the store (optimizer included), by shard",
                     {{"shard", shard}}, core.apply_seconds().Read());
  const proto::StatsResponse stats = core.Stats();
  for (const proto::TableStats& t : stats.tables()) {
    const MetricLabels labels = {{"shard", shard}, {"table", t.table()}};
    out.Gauge("ps_table_rows", "Rows of a sparse table held here (dense: 0)", labels,
              static_cast<double>(t.rows()));
    out.Gauge("ps_table_server_clock", "Largest round any worker completed on the table", labels,
              static_cast<double>(t.server_clock()));
    out.CounterValue("ps_table_pulls_total", "Pulls served", labels,
                     static_cast<double>(t.pulls()));
    out.CounterValue("ps_table_pull_wait_seconds_total",
                     "Time pulls waited for slower workers (bounded delay, BSP)", labels,
                     t.wait_us_total() / 1e6);
    for (int i = 0; i < t.staleness_histogram_size(); ++i) {
      if (t.staleness_histogram(i) == 0) continue;
      const bool last = i + 1 == t.staleness_histogram_size();
      MetricLabels by_rounds = labels;
      by_rounds.emplace_back("rounds", last ? absl::StrCat(i, "+") : absl::StrCat(i));
      out.CounterValue("ps_table_pulls_by_staleness_total",
                       "Pulls by how many rounds their parameters were behind the table's "
                       "server clock",
                       by_rounds, static_cast<double>(t.staleness_histogram(i)));
    }
    out.CounterValue("ps_sparse_rows_admitted_total", "Sparse rows created", labels,
                     static_cast<double>(t.admitted()));
    out.CounterValue("ps_sparse_pushes_refused_total",
                     "Pushes of keys refused by the admission filter", labels,
                     static_cast<double>(t.refused()));
    out.CounterValue("ps_sparse_rows_evicted_total", "Sparse rows evicted", labels,
                     static_cast<double>(t.evicted()));
    if (t.disk_rows() + t.cache_hits() + t.cache_misses() == 0) continue;  // not tiered
    out.Gauge("ps_tier_disk_rows", "Rows of a tiered table on this server's disk", labels,
              static_cast<double>(t.disk_rows()));
    out.Gauge("ps_tier_disk_bytes", "Bytes of a tiered table's files on this server's disk", labels,
              static_cast<double>(t.disk_bytes()));
    out.CounterValue("ps_tier_cache_hits_total",
                     "Keys of pushes and pulls of a tiered table found in its memory cache", labels,
                     static_cast<double>(t.cache_hits()));
    out.CounterValue("ps_tier_cache_misses_total",
                     "Keys of pushes and pulls of a tiered table read from disk", labels,
                     static_cast<double>(t.cache_misses()));
    out.CounterValue("ps_tier_rows_demoted_total",
                     "Rows of a tiered table moved from memory to disk", labels,
                     static_cast<double>(t.demoted()));
  }
  for (const auto& [table, bytes] : core.TableBytes()) {
    out.Gauge("ps_table_bytes", "Bytes a table's slices and optimizer state take here",
              {{"shard", shard}, {"table", table}}, static_cast<double>(bytes));
  }
  out.Gauge("ps_key_lists_kept", "Key lists kept for key-list caching", {{"shard", shard}},
            static_cast<double>(stats.key_lists_kept()));
}

// The shard's replication stream, where this server forwards down a chain.
void CollectLinkMetrics(const ReplicaLink::Stats& link, const std::string& shard,
                        MetricsWriter& out) {
  const MetricLabels labels = {{"shard", shard}};
  out.Gauge("ps_replication_pending",
            "Updates and barriers on their way down the shard's chain (replication lag)", labels,
            static_cast<double>(link.pending));
  out.CounterValue("ps_replication_forwarded_total", "Updates forwarded down the chain", labels,
                   static_cast<double>(link.entries_sent));
  out.CounterValue("ps_replication_resent_total", "Updates sent again after a failed batch", labels,
                   static_cast<double>(link.entries_resent));
  out.CounterValue("ps_replication_snapshots_total", "Snapshots sent to a new successor", labels,
                   static_cast<double>(link.snapshots));
  out.CounterValue("ps_replication_snapshot_bytes_total",
                   "Bytes of snapshots sent to a new successor", labels,
                   static_cast<double>(link.snapshot_bytes));
  out.CounterValue("ps_replication_catch_ups_total",
                   "Successors caught up from the recent history instead of a snapshot", labels,
                   static_cast<double>(link.catch_ups));
}

void CollectCheckpointMetrics(const CheckpointScheduler::Record& r, MetricsWriter& out) {
  out.CounterValue("ps_checkpoints_total", "Checkpoints taken, by result", {{"result", "ok"}},
                   static_cast<double>(r.taken));
  out.CounterValue("ps_checkpoints_total", "Checkpoints taken, by result", {{"result", "failed"}},
                   static_cast<double>(r.failed));
  if (r.taken > 0) {
    out.Gauge("ps_checkpoint_last_cut", "Cut of the latest checkpoint", {},
              static_cast<double>(r.last_cut));
    out.Gauge("ps_checkpoint_age_seconds", "Time since the latest checkpoint was taken", {},
              absl::ToDoubleSeconds(absl::Now() - r.last_taken_at));
  }
}

}  // namespace

void PsServer::CollectMetrics(MetricsWriter& out) const {
  out.Gauge("ps_server_ready", "1 when the server serves its shards (see /readyz), else 0", {},
            Readiness().ok() ? 1 : 0);
  out.Gauge("ps_memory_budget_bytes",
            "Bytes of parameters and optimizer state allowed (--memory_budget_mb)", {},
            static_cast<double>(options_.limits.memory_budget_bytes));
  const bool replicated = options_.replication.kv != nullptr;
  if (replicated) {
    std::shared_ptr<const ShardRing> ring = host_->ring();
    out.Gauge("ps_ring_version", "Version of the ring this server follows (0: none yet)", {},
              ring == nullptr ? 0 : static_cast<double>(ring->version()));
    out.Gauge("ps_server_fenced", "1 while the server refuses calls for want of its etcd lease", {},
              host_->fenced() ? 1 : 0);
  }
  for (const std::shared_ptr<PsCore>& core : host_->Cores()) {
    const std::string shard = absl::StrCat(core->server_index());
    CollectShardMetrics(*core, shard, out);
    if (replicated) {
      if (std::optional<ReplicaLink::Stats> link = host_->LinkStats(core->server_index())) {
        CollectLinkMetrics(*link, shard, out);
      }
    }
  }
  if (std::optional<CheckpointScheduler::Record> record = checkpoints_->SchedulerRecord()) {
    CollectCheckpointMetrics(*record, out);
  }
}

}  // namespace ps
