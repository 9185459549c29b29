// tier_client: a tiered sparse table (tests/tiered_server_test.sh) on static
// servers (--servers), or on a replicated cluster (--etcd, --cluster;
// tests/tiered_replication_test.sh): width 4, SGD at rate 1 from zeros, so that a push of -1 adds 1
// and every value counts the pushes acknowledged; a 1 MiB cache (about
// 22,000 rows) and --keys keys, so most rows are on disk.
//
//   tier_client --servers=A,B --mode=push --rounds=3   # every key +3
//   tier_client --servers=A,B --mode=push --until_refused --rounds=1000
//   tier_client --servers=A,B --mode=check --expect=3  # every value 3
//
// push: rounds of pushes of every key (in requests of 2,000 keys); prints
// "ACKED n" (rounds acknowledged whole) and, with --until_refused, stops at
// the first refused push and prints "REFUSED <error>" (its round may be
// partly applied: each key of it is then at n or n + 1). check: every value
// must be --expect, or in [--expect, --expect_max] when that is set; exits 1
// naming the first wrong key.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "common/etcd_kv_store.h"
#include "worker/client/ps_client.h"
#include "worker/client/shard_directory.h"

ABSL_FLAG(std::string, servers, "", "host:port of the static servers, comma-separated");
ABSL_FLAG(std::string, etcd, "", "etcd endpoint of a replicated cluster (instead of --servers)");
ABSL_FLAG(std::string, cluster, "default", "the replicated cluster's name");
ABSL_FLAG(std::string, mode, "push", "push or check");
ABSL_FLAG(int32_t, worker_id, 1, "the worker id (clients running at once each need their own)");
ABSL_FLAG(int64_t, keys, 100000, "keys of the table");
ABSL_FLAG(int64_t, rounds, 1, "push: rounds of pushes of every key");
ABSL_FLAG(bool, until_refused, false, "push: stop at the first refused push and say why");
ABSL_FLAG(int64_t, expect, 0, "check: the value of every key");
ABSL_FLAG(int64_t, expect_max, -1, "check: values may lie in [expect, expect_max]");

namespace {

constexpr uint32_t kWidth = 4;

ps::proto::TableDef Table() {
  ps::proto::TableDef def;
  def.set_name("ctr/emb");
  def.set_kind(ps::proto::TABLE_SPARSE);
  def.set_width(kWidth);
  def.set_num_buckets(64);
  def.set_optimizer(ps::proto::OPT_SGD);
  def.set_learning_rate(1.0f);
  def.set_storage(ps::proto::STORAGE_TIERED);
  def.set_cache_mb(1);
  return def;
}

int Fail(const std::string& what) {
  std::fprintf(stderr, "tier_client: %s\n", what.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  ps::PsClientOptions options;
  options.servers = absl::StrSplit(absl::GetFlag(FLAGS_servers), ',', absl::SkipEmpty());
  options.worker_id = static_cast<uint32_t>(absl::GetFlag(FLAGS_worker_id));
  std::unique_ptr<ps::EtcdKvStore> etcd;
  if (!absl::GetFlag(FLAGS_etcd).empty()) {
    // Calls follow the ring, retried across a failover (40 attempts).
    etcd = std::make_unique<ps::EtcdKvStore>(ps::EtcdOptions{absl::GetFlag(FLAGS_etcd)});
    auto directory =
        ps::EtcdShardDirectory::Start(etcd.get(), absl::GetFlag(FLAGS_cluster), absl::Seconds(30));
    if (!directory.ok()) return Fail(directory.status().ToString());
    options.directory = std::shared_ptr<const ps::ShardDirectory>(std::move(*directory));
    ps::SpanFailoverWithRetries(&options);
  }
  auto client = ps::PsClient::Connect(options);
  if (!client.ok()) return Fail(client.status().ToString());
  if (absl::Status s = (*client)->CreateTable(Table()); !s.ok()) return Fail(s.ToString());
  std::vector<uint64_t> keys(static_cast<size_t>(absl::GetFlag(FLAGS_keys)));
  for (size_t i = 0; i < keys.size(); ++i) keys[i] = i * 0x9e3779b97f4a7c15ULL + 11;
  constexpr size_t kPerRequest = 2000;
  if (absl::GetFlag(FLAGS_mode) == "push") {
    const std::vector<float> minus_one(kPerRequest * kWidth, -1.0f);
    int64_t acked = 0;
    for (int64_t round = 0; round < absl::GetFlag(FLAGS_rounds); ++round) {
      for (size_t b = 0; b < keys.size(); b += kPerRequest) {
        const size_t n = std::min(kPerRequest, keys.size() - b);
        absl::Status s = (*client)->PushKeys(
            "ctr/emb", absl::MakeConstSpan(keys.data() + b, n), kWidth,
            absl::MakeConstSpan(minus_one.data(), n * kWidth), static_cast<uint64_t>(round));
        if (s.ok()) continue;
        if (!absl::GetFlag(FLAGS_until_refused)) return Fail(s.ToString());
        std::printf("ACKED %lld\nREFUSED %s\n", static_cast<long long>(acked),
                    std::string(s.message()).c_str());
        return 0;
      }
      ++acked;
    }
    std::printf("ACKED %lld\n", static_cast<long long>(acked));
    return 0;
  }
  const int64_t lo = absl::GetFlag(FLAGS_expect);
  const int64_t hi = absl::GetFlag(FLAGS_expect_max) < 0 ? lo : absl::GetFlag(FLAGS_expect_max);
  std::vector<float> values(kPerRequest * kWidth);
  for (size_t b = 0; b < keys.size(); b += kPerRequest) {
    const size_t n = std::min(kPerRequest, keys.size() - b);
    absl::Status s = (*client)->PullKeys("ctr/emb", absl::MakeConstSpan(keys.data() + b, n), kWidth,
                                         absl::MakeSpan(values.data(), n * kWidth));
    if (!s.ok()) return Fail(s.ToString());
    for (size_t i = 0; i < n * kWidth; ++i) {
      if (values[i] < static_cast<float>(lo) || values[i] > static_cast<float>(hi)) {
        return Fail("key " + std::to_string(keys[b + i / kWidth]) + " holds " +
                    std::to_string(values[i]) + ", not in [" + std::to_string(lo) + ", " +
                    std::to_string(hi) + "]");
      }
    }
  }
  std::printf("CHECKED %zu keys\n", keys.size());
  return 0;
}
