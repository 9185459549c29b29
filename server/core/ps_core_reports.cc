// PsCore's reports: Info (where a server stands, its restored checkpoint,
// a worker's clocks) and Stats (memory, key-list cache, tables), and the
// bytes of each table, for the metrics.
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "common/process_cpu.h"
#include "server/core/ps_core.h"

namespace ps {

absl::StatusOr<proto::InfoResponse> PsCore::Info(const proto::InfoRequest& request) {
  proto::InfoResponse info;
  if (!request.table().empty()) {
    absl::StatusOr<proto::TableDef> def = store_.GetTableDef(request.table());
    if (!def.ok()) return def.status();
    *info.mutable_table() = *std::move(def);
  }
  info.set_server_index(options_.server_index);
  info.set_num_servers(options_.num_servers);
  info.set_virtual_nodes(options_.placement.virtual_nodes);
  info.set_slice_size(options_.placement.slice_size);
  info.set_dedup_retention_ms(
      static_cast<uint64_t>(absl::ToInt64Milliseconds(options_.limits.dedup_retention)));
  if (request.worker_clocks()) {
    for (const ClockTracker::WorkerClock& c : clocks_.Clocks(UINT64_MAX)) {
      if (c.worker != request.worker_id()) continue;
      proto::TableClock* t = info.add_worker_clocks();
      t->set_table(c.table);
      t->set_clock(c.clock);
    }
  }
  absl::MutexLock lock(&address_mu_);
  info.set_address(address_);
  info.set_restored_from(restored_from_);
  info.set_restored_cut(restored_cut_);
  return info;
}

void PsCore::set_restored(const std::string& path, uint64_t cut) {
  absl::MutexLock lock(&address_mu_);
  restored_from_ = path;
  restored_cut_ = cut;
}

proto::StatsResponse PsCore::Stats() {
  proto::StatsResponse reply;
  const KeyListCache::Stats key_lists = key_lists_.stats();
  reply.set_key_lists_kept(key_lists.lists);
  reply.set_key_list_bytes(key_lists.bytes);
  reply.set_key_list_hits(key_lists.hits);
  reply.set_key_list_misses(key_lists.misses);
  reply.set_memory_bytes(store_.bytes_used());
  reply.set_memory_budget_bytes(options_.limits.memory_budget_bytes);
  reply.set_process_cpu_seconds(ProcessCpuSeconds());
  absl::flat_hash_set<std::string> listed;
  for (proto::TableStats& t : stats_.Snapshot()) {
    t.set_server_clock(clocks_.ServerClock(t.table()));
    store_.FillSparseStats(&t);
    listed.insert(t.table());
    *reply.add_tables() = std::move(t);
  }
  // Sparse tables nobody has pulled from yet still report their rows.
  for (const std::string& name : store_.SparseTableNames()) {
    if (listed.contains(name)) continue;
    proto::TableStats* t = reply.add_tables();
    t->set_table(name);
    t->set_server_clock(clocks_.ServerClock(name));
    store_.FillSparseStats(t);
  }
  return reply;
}

uint64_t PsCore::bytes_used() const { return store_.bytes_used(); }

std::vector<std::pair<std::string, uint64_t>> PsCore::TableBytes() const {
  std::vector<std::pair<std::string, uint64_t>> out;
  for (const proto::TableDef& def : store_.TableDefs()) {
    absl::StatusOr<uint64_t> bytes = store_.TableBytes(def);
    if (bytes.ok()) out.emplace_back(def.name(), *bytes);
  }
  return out;
}

}  // namespace ps
