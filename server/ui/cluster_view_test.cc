// ClusterViewJson: the ring's chains with their roles, shards and tables
// summed, each worker once (its newest report), the checkpoint's age, and
// the alerts (no primary, a short chain, memory over 90%, unreadable
// shards, an old checkpoint).
#include "server/ui/cluster_view.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using Json = nlohmann::json;

ShardStatus Shard(int shard, uint64_t memory, uint64_t budget) {
  ShardStatus s;
  s.shard = shard;
  s.server = "server " + std::to_string(shard);
  s.stats.set_memory_bytes(memory);
  s.stats.set_memory_budget_bytes(budget);
  proto::TableStats* t = s.stats.add_tables();
  t->set_table("emb");
  t->set_rows(10 + shard);
  t->set_pulls(100);
  t->set_server_clock(5 + shard);
  proto::CallStats* c = s.stats.add_calls();
  c->set_method("Push");
  c->set_count(7);
  c->set_seconds_total(0.5);
  return s;
}

void AddWorker(ShardStatus* s, uint32_t id, double age, int points) {
  proto::WorkerProgress* w = s->stats.add_workers();
  w->set_worker_id(id);
  w->set_job("mlp");
  w->set_age_seconds(age);
  for (int i = 1; i <= points; ++i) {
    proto::ProgressPoint* p = w->add_points();
    p->set_step(10 * i);
    p->set_loss(1.0 / i);
  }
}

TEST(ClusterViewTest, ARingWithItsRolesAndTheAlertsOfItsChains) {
  proto::RingRecord record;
  record.set_version(4);
  record.set_replicas(2);
  proto::ShardChain* full = record.add_shards();
  full->add_servers(1);
  full->add_servers(2);
  proto::ShardChain* short_chain = record.add_shards();
  short_chain->add_servers(2);
  short_chain->add_joining(1);
  record.add_shards();  // no copy at all
  for (uint32_t id : {1u, 2u})
    (*record.mutable_members())[id].set_address("h:" + std::to_string(id));
  absl::StatusOr<ShardRing> ring = ShardRing::FromRecord(record);
  ASSERT_TRUE(ring.ok()) << ring.status();
  ClusterViewInput in;
  in.source = "test";
  in.now = absl::FromUnixSeconds(5000);
  in.ring = *ring;
  const Json v = Json::parse(ClusterViewJson(in));
  EXPECT_EQ(v["ring"]["version"], 4);
  const Json& chain0 = v["ring"]["shards"][0]["chain"];
  EXPECT_EQ(chain0[0]["role"], "primary");
  EXPECT_EQ(chain0[0]["address"], "h:1");
  EXPECT_EQ(chain0[1]["role"], "copy");
  EXPECT_EQ(v["ring"]["shards"][1]["chain"][1]["role"], "joining");
  std::vector<std::string> alerts = v["alerts"];
  EXPECT_THAT(alerts, ElementsAre(HasSubstr("shard 1 has 1 of 2 copies (a copy is being made)"),
                                  HasSubstr("shard 2 has no primary")));
}

TEST(ClusterViewTest, ShardsTablesWorkersAndCheckpoint) {
  ClusterViewInput in;
  in.source = "ps_server 0";
  in.now = absl::FromUnixSeconds(10000);
  in.shards.push_back(Shard(0, 95, 100));  // over 90%
  in.shards.push_back(Shard(1, 10, 100));
  AddWorker(&in.shards[0], 3, 2.0, 5);
  AddWorker(&in.shards[1], 3, 1.0, 2);  // the newer report of worker 3
  AddWorker(&in.shards[1], 1, 4.0, 1);
  in.checkpoint = ClusterViewInput::Checkpoint{"/ck/ckpt-7", 42, in.now - absl::Hours(1), 2048};
  in.stats_error = "server 2 (h:2): UNAVAILABLE";
  const Json v = Json::parse(ClusterViewJson(in));
  EXPECT_TRUE(v["ring"].is_null());
  ASSERT_EQ(v["shards"].size(), 2u);
  EXPECT_EQ(v["shards"][0]["calls"]["Push"]["count"], 7);
  ASSERT_EQ(v["tables"].size(), 1u);
  EXPECT_EQ(v["tables"][0]["rows"], 21);  // 10 + 11
  EXPECT_EQ(v["tables"][0]["pulls"], 200);
  EXPECT_EQ(v["tables"][0]["server_clock"], 6);  // the largest
  ASSERT_EQ(v["workers"].size(), 2u);
  EXPECT_EQ(v["workers"][0]["worker"], 1);
  EXPECT_EQ(v["workers"][1]["worker"], 3);
  EXPECT_EQ(v["workers"][1]["points"].size(), 2u);  // from the newer report
  EXPECT_EQ(v["checkpoint"]["cut"], 42);
  EXPECT_DOUBLE_EQ(v["checkpoint"]["age_seconds"].get<double>(), 3600);
  std::vector<std::string> alerts = v["alerts"];
  EXPECT_THAT(alerts, ElementsAre(HasSubstr("cannot read every shard: server 2"),
                                  HasSubstr("server 0 (shard 0): memory"),
                                  HasSubstr("newest checkpoint is 60 minutes old")));
}

}  // namespace
}  // namespace ps
