#include "server/ui/cluster_view.h"

#include <map>

#include "absl/strings/str_cat.h"
#include "nlohmann/json.hpp"

namespace ps {
namespace {

using Json = nlohmann::json;

Json RingJson(const ShardRing& ring, std::vector<std::string>* alerts) {
  Json shards = Json::array();
  for (int s = 0; s < ring.num_shards(); ++s) {
    const proto::ShardChain& chain = ring.record().shards(s);
    Json members = Json::array();
    for (int i = 0; i < chain.servers_size(); ++i) {
      const uint32_t id = chain.servers(i);
      members.push_back(
          {{"server", id}, {"address", ring.Address(id)}, {"role", i == 0 ? "primary" : "copy"}});
    }
    for (uint32_t id : chain.joining()) {
      members.push_back({{"server", id}, {"address", ring.Address(id)}, {"role", "joining"}});
    }
    if (chain.servers_size() == 0) {
      alerts->push_back(absl::StrCat("shard ", s,
                                     " has no primary: its data is lost until a "
                                     "checkpoint is restored"));
    } else if (chain.servers_size() < ring.replicas()) {
      alerts->push_back(absl::StrCat("shard ", s, " has ", chain.servers_size(), " of ",
                                     ring.replicas(), " copies",
                                     chain.joining_size() > 0 ? " (a copy is being made)" : ""));
    }
    shards.push_back({{"shard", s}, {"chain", members}});
  }
  return {{"version", ring.version()},
          {"replicas", ring.replicas()},
          {"description", ring.Describe()},
          {"shards", shards}};
}

Json ShardJson(const ShardStatus& shard, std::vector<std::string>* alerts) {
  const proto::StatsResponse& st = shard.stats;
  Json tables = Json::array();
  for (const proto::TableStats& t : st.tables()) {
    tables.push_back({{"name", t.table()},
                      {"rows", t.rows()},
                      {"pulls", t.pulls()},
                      {"server_clock", t.server_clock()},
                      {"admitted", t.admitted()},
                      {"evicted", t.evicted()}});
  }
  Json calls = Json::object();
  for (const proto::CallStats& c : st.calls()) {
    calls[c.method()] = {{"count", c.count()}, {"seconds", c.seconds_total()}};
  }
  if (st.memory_budget_bytes() > 0 && st.memory_bytes() * 10 > st.memory_budget_bytes() * 9) {
    alerts->push_back(absl::StrCat(shard.server, " (shard ", shard.shard, "): memory ",
                                   st.memory_bytes() >> 20, " MiB of a ",
                                   st.memory_budget_bytes() >> 20, " MiB budget (over 90%)"));
  }
  return {{"shard", shard.shard},
          {"server", shard.server},
          {"memory_bytes", st.memory_bytes()},
          {"memory_budget_bytes", st.memory_budget_bytes()},
          {"cpu_seconds", st.process_cpu_seconds()},
          {"key_lists_kept", st.key_lists_kept()},
          {"replication_pending", st.has_replication() ? st.replication().pending() : 0},
          {"calls", calls},
          {"tables", tables}};
}

// Every worker once: the shard whose report of it is the newest (a worker
// reports to every server; a server that restarted has fewer points).
Json WorkersJson(const std::vector<ShardStatus>& shards) {
  std::map<uint32_t, const proto::WorkerProgress*> newest;
  for (const ShardStatus& shard : shards) {
    for (const proto::WorkerProgress& w : shard.stats.workers()) {
      const proto::WorkerProgress*& kept = newest[w.worker_id()];
      if (kept == nullptr || w.age_seconds() < kept->age_seconds() ||
          (w.age_seconds() == kept->age_seconds() && w.points_size() > kept->points_size())) {
        kept = &w;
      }
    }
  }
  Json out = Json::array();
  for (const auto& [id, w] : newest) {
    Json points = Json::array();
    for (const proto::ProgressPoint& p : w->points()) {
      points.push_back({{"seconds", p.seconds()},
                        {"epoch", p.epoch()},
                        {"step", p.step()},
                        {"examples", p.examples()},
                        {"loss", p.loss()},
                        {"examples_per_second", p.examples_per_second()},
                        {"staleness", p.staleness()}});
    }
    out.push_back(
        {{"worker", id}, {"job", w->job()}, {"age_seconds", w->age_seconds()}, {"points", points}});
  }
  return out;
}

}  // namespace

std::string ClusterViewJson(const ClusterViewInput& input) {
  std::vector<std::string> alerts;
  Json view = {{"source", input.source}, {"time", absl::ToUnixMicros(input.now) / 1e6}};
  view["ring"] = input.ring ? RingJson(*input.ring, &alerts) : Json();
  if (!input.stats_error.empty()) {
    alerts.push_back(absl::StrCat("cannot read every shard: ", input.stats_error));
  }
  Json shards = Json::array();
  std::map<std::string, Json> tables;
  for (const ShardStatus& shard : input.shards) {
    shards.push_back(ShardJson(shard, &alerts));
    for (const proto::TableStats& t : shard.stats.tables()) {
      Json& agg = tables[t.table()];
      if (agg.is_null())
        agg = {{"name", t.table()}, {"rows", 0}, {"pulls", 0}, {"server_clock", 0}};
      agg["rows"] = agg["rows"].get<uint64_t>() + t.rows();
      agg["pulls"] = agg["pulls"].get<uint64_t>() + t.pulls();
      agg["server_clock"] = std::max(agg["server_clock"].get<uint64_t>(), t.server_clock());
    }
  }
  view["shards"] = shards;
  Json table_list = Json::array();
  for (auto& [name, t] : tables) table_list.push_back(std::move(t));
  view["tables"] = table_list;
  view["workers"] = WorkersJson(input.shards);
  if (input.checkpoint) {
    const double age = absl::ToDoubleSeconds(input.now - input.checkpoint->time);
    view["checkpoint"] = {{"path", input.checkpoint->path},
                          {"cut", input.checkpoint->cut},
                          {"age_seconds", age},
                          {"bytes", input.checkpoint->bytes}};
    if (input.now - input.checkpoint->time > input.checkpoint_alert_after) {
      alerts.push_back(absl::StrCat("the newest checkpoint is ", static_cast<int64_t>(age / 60),
                                    " minutes old"));
    }
  } else if (!input.checkpoint_error.empty()) {
    view["checkpoint"] = {{"error", input.checkpoint_error}};
  } else {
    view["checkpoint"] = Json();
  }
  view["alerts"] = alerts;
  return view.dump();
}

}  // namespace ps
