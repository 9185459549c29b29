#include "server/replication/cluster_status.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

proto::TableStats Table(const std::string& name, uint64_t rows, uint64_t clock, uint64_t pulls) {
  proto::TableStats t;
  t.set_table(name);
  t.set_rows(rows);
  t.set_server_clock(clock);
  t.set_pulls(pulls);
  return t;
}

TEST(ClusterStatusTest, OneLinePerShardThenPerTable) {
  std::vector<ShardStatus> shards(2);
  shards[0].shard = 0;
  shards[0].server = "server 0 (127.0.0.1:7000)";
  *shards[0].stats.add_tables() = Table("emb", 1000, 7, 50);
  *shards[0].stats.add_tables() = Table("mlp/w0", 0, 9, 20);
  shards[0].stats.set_memory_bytes(3 << 20);
  shards[0].stats.set_memory_budget_bytes(uint64_t{1024} << 20);
  shards[0].stats.mutable_replication()->set_pending(4);
  shards[1].shard = 1;
  shards[1].server = "server 2 (127.0.0.1:7002)";
  *shards[1].stats.add_tables() = Table("emb", 500, 8, 30);
  shards[1].stats.set_memory_bytes(1 << 20);
  shards[1].stats.set_memory_budget_bytes(uint64_t{1024} << 20);
  const std::string text = FormatClusterStatus(shards);
  EXPECT_THAT(text, HasSubstr("0      server 0 (127.0.0.1:7000)          2        1000  "
                              "         3.0 (1024.0)          9          70         4\n"));
  EXPECT_THAT(text, HasSubstr("1      server 2 (127.0.0.1:7002)          1         500  "
                              "         1.0 (1024.0)          8          30         -\n"));
  EXPECT_THAT(text, HasSubstr("2 shard(s), 4.0 MiB of parameters"));
  EXPECT_THAT(text,
              HasSubstr("emb                            2        1500          8          80"));
  EXPECT_THAT(text,
              HasSubstr("mlp/w0                         1           0          9          20"));
}

TEST(ClusterStatusTest, TieredTablesSayWhereTheirRowsAre) {
  std::vector<ShardStatus> shards(2);
  for (int s = 0; s < 2; ++s) {
    shards[s].shard = s;
    proto::TableStats t = Table("ctr/emb", 1000, 3, 10);
    t.set_disk_rows(9000);
    t.set_disk_bytes(uint64_t{3} << 20);
    t.set_cache_hits(300);
    t.set_cache_misses(100);
    t.set_demoted(50);
    *shards[s].stats.add_tables() = t;
    *shards[s].stats.add_tables() = Table("mlp/w0", 0, 3, 10);
  }
  const std::string text = FormatClusterStatus(shards);
  EXPECT_THAT(text, HasSubstr("tiered table"));
  EXPECT_THAT(text,
              HasSubstr("ctr/emb                         2000       18000        6.0     0.750"
                        "         100\n"));
  EXPECT_THAT(text, ::testing::Not(HasSubstr("mlp/w0                          ")));
}

TEST(ClusterStatusTest, NoTablesSaysSo) {
  std::vector<ShardStatus> shards(1);
  shards[0].server = "server 0 (127.0.0.1:7000)";
  EXPECT_THAT(FormatClusterStatus(shards), HasSubstr("no tables\n"));
}

}  // namespace
}  // namespace ps
