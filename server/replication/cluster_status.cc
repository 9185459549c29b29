#include "server/replication/cluster_status.h"

#include <algorithm>
#include <cstdint>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ps {

namespace {

std::string Mib(uint64_t bytes) { return absl::StrFormat("%.1f", bytes / 1048576.0); }

}  // namespace

std::string FormatClusterStatus(const std::vector<ShardStatus>& shards) {
  std::string out =
      absl::StrFormat("%-5s  %-28s  %6s  %10s  %21s  %9s  %10s  %8s\n", "shard", "primary",
                      "tables", "rows", "memory MiB (budget)", "max clock", "pulls", "repl lag");
  struct TableTotals {
    uint64_t rows = 0, clock = 0, pulls = 0, admitted = 0, evicted = 0;
    uint64_t disk_rows = 0, disk_bytes = 0, hits = 0, misses = 0, demoted = 0;
    int shards = 0;
  };
  std::map<std::string, TableTotals> tables;
  uint64_t memory = 0;
  for (const ShardStatus& s : shards) {
    uint64_t rows = 0, clock = 0, pulls = 0;
    for (const proto::TableStats& t : s.stats.tables()) {
      rows += t.rows();
      clock = std::max(clock, t.server_clock());
      pulls += t.pulls();
      TableTotals& total = tables[t.table()];
      total.rows += t.rows();
      total.clock = std::max(total.clock, t.server_clock());
      total.pulls += t.pulls();
      total.admitted += t.admitted();
      total.evicted += t.evicted();
      total.disk_rows += t.disk_rows();
      total.disk_bytes += t.disk_bytes();
      total.hits += t.cache_hits();
      total.misses += t.cache_misses();
      total.demoted += t.demoted();
      ++total.shards;
    }
    memory += s.stats.memory_bytes();
    const std::string lag =
        s.stats.has_replication() ? absl::StrCat(s.stats.replication().pending()) : "-";
    out += absl::StrFormat(
        "%-5d  %-28s  %6d  %10d  %21s  %9d  %10d  %8s\n", s.shard, s.server, s.stats.tables_size(),
        rows,
        absl::StrCat(Mib(s.stats.memory_bytes()), " (", Mib(s.stats.memory_budget_bytes()), ")"),
        clock, pulls, lag);
  }
  out += absl::StrFormat("%d shard(s), %s MiB of parameters and optimizer state\n", shards.size(),
                         Mib(memory));
  if (tables.empty()) return out + "no tables\n";
  out += absl::StrFormat("\n%-24s  %6s  %10s  %9s  %10s  %10s  %10s\n", "table", "shards", "rows",
                         "max clock", "pulls", "admitted", "evicted");
  for (const auto& [name, t] : tables) {
    out += absl::StrFormat("%-24s  %6d  %10d  %9d  %10d  %10d  %10d\n", name, t.shards, t.rows,
                           t.clock, t.pulls, t.admitted, t.evicted);
  }
  // Tiered tables: where their rows are, and how often a key was in memory.
  bool header = false;
  for (const auto& [name, t] : tables) {
    if (t.disk_rows + t.hits + t.misses == 0) continue;
    if (!header) {
      out += absl::StrFormat("\n%-24s  %10s  %10s  %9s  %8s  %10s\n", "tiered table", "in memory",
                             "on disk", "disk MiB", "hit rate", "demoted");
      header = true;
    }
    const uint64_t keys = t.hits + t.misses;
    out += absl::StrFormat(
        "%-24s  %10d  %10d  %9s  %8s  %10d\n", name, t.rows, t.disk_rows, Mib(t.disk_bytes),
        keys == 0 ? "-" : absl::StrFormat("%.3f", 1.0 * t.hits / keys), t.demoted);
  }
  return out;
}

}  // namespace ps
