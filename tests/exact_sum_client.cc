// exact_sum_client: W workers (threads, each its own client and worker id)
// each push +1 to every key of a dense table K times through a replicated
// cluster (--etcd), then the sums are read back: every key must be exactly
// W * K, whatever servers died meanwhile (tests/replication_process_test.sh
// kills one). Prints the longest push (the time a failover held pushes up)
// and exits 1 naming the first wrong key.
//
//   exact_sum_client --etcd=127.0.0.1:2379 --workers=4 --pushes=400 --keys=20000
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/etcd_kv_store.h"
#include "common/grpc_lifetime.h"
#include "tests/test_tables.h"
#include "worker/client/ps_client.h"
#include "worker/client/shard_directory.h"

ABSL_FLAG(std::string, etcd, "", "etcd endpoint of the replicated cluster");
ABSL_FLAG(std::string, cluster, "default", "cluster name");
ABSL_FLAG(int, workers, 4, "workers (threads, one client each)");
ABSL_FLAG(int, pushes, 400, "pushes per worker");
ABSL_FLAG(uint64_t, keys, 20000, "keys of the table (spread over every shard)");
ABSL_FLAG(std::string, table, "sum", "table name");
ABSL_FLAG(std::string, started_file, "", "written once every worker has pushed once");
ABSL_FLAG(std::string, progress_file, "",
          "rewritten every 50 ms with the number of pushes acknowledged so far (all workers)");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "exact_sum_client: %s\n", message.c_str());
  return 1;
}

}  // namespace

int main(int argc, char** argv) {
  ps::KeepGrpcUntilExit();
  absl::ParseCommandLine(argc, argv);
  ps::EtcdKvStore etcd(ps::EtcdOptions{absl::GetFlag(FLAGS_etcd)});
  auto directory =
      ps::EtcdShardDirectory::Start(&etcd, absl::GetFlag(FLAGS_cluster), absl::Seconds(30));
  if (!directory.ok()) return Fail(std::string(directory.status().message()));
  std::shared_ptr<const ps::ShardDirectory> dir(std::move(*directory));

  const int workers = absl::GetFlag(FLAGS_workers);
  const int pushes = absl::GetFlag(FLAGS_pushes);
  const uint64_t keys = absl::GetFlag(FLAGS_keys);
  const std::string table = absl::GetFlag(FLAGS_table);
  auto options = [&](int w) {
    ps::PsClientOptions o;
    o.directory = dir;
    o.worker_id = static_cast<uint32_t>(w);
    o.timeout = absl::Seconds(2);
    o.max_attempts = 40;
    return o;
  };
  {
    auto admin = ps::PsClient::Connect(options(workers));
    if (!admin.ok()) return Fail(std::string(admin.status().message()));
    if (absl::Status s = (*admin)->CreateTable(ps::SumTable(table, keys, 1)); !s.ok()) {
      return Fail(std::string(s.message()));
    }
  }
  const absl::Time start = absl::Now();
  std::atomic<int> started{0};
  std::atomic<int64_t> acknowledged{0};
  std::atomic<bool> finished{false};
  std::thread progress;
  if (const std::string path = absl::GetFlag(FLAGS_progress_file); !path.empty()) {
    progress = std::thread([&, path] {
      while (!finished.load()) {
        const std::string tmp = path + ".tmp";
        if (std::FILE* f = std::fopen(tmp.c_str(), "w"); f != nullptr) {
          std::fprintf(f, "%lld\n", static_cast<long long>(acknowledged.load()));
          std::fclose(f);
          std::rename(tmp.c_str(), path.c_str());
        }
        absl::SleepFor(absl::Milliseconds(50));  // a report's period, not a synchronisation
      }
    });
  }
  std::vector<std::string> errors(workers);
  std::vector<absl::Duration> longest(workers);
  std::vector<std::thread> threads;
  for (int w = 0; w < workers; ++w) {
    threads.emplace_back([&, w] {
      auto client = ps::PsClient::Connect(options(w));
      if (!client.ok()) {
        errors[w] = std::string(client.status().message());
        return;
      }
      const std::vector<float> grads(keys, -1.0f);  // SGD at rate 1: +1 each
      for (int k = 0; k < pushes; ++k) {
        const absl::Time t0 = absl::Now();
        ps::PushRange op{table, 0, keys, grads};
        absl::Status s = (*client)->Push({&op, 1}, static_cast<uint64_t>(k));
        longest[w] = std::max(longest[w], absl::Now() - t0);
        if (!s.ok()) {
          errors[w] = absl::StrCat("worker ", w, " push ", k, ": ", s.message());
          return;
        }
        acknowledged.fetch_add(1);
        if (k == 0 && started.fetch_add(1) + 1 == workers &&
            !absl::GetFlag(FLAGS_started_file).empty()) {
          std::FILE* f = std::fopen(absl::GetFlag(FLAGS_started_file).c_str(), "w");
          if (f != nullptr) std::fclose(f);
        }
      }
    });
  }
  for (std::thread& t : threads) t.join();
  finished = true;
  if (progress.joinable()) progress.join();
  for (const std::string& e : errors) {
    if (!e.empty()) return Fail(e);
  }
  const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
  auto reader = ps::PsClient::Connect(options(workers + 1));
  if (!reader.ok()) return Fail(std::string(reader.status().message()));
  std::vector<float> values(keys);
  ps::PullRange pull{table, 0, keys, absl::MakeSpan(values)};
  if (absl::Status s = (*reader)->Pull({&pull, 1}); !s.ok()) return Fail(std::string(s.message()));
  const float want = static_cast<float>(workers) * static_cast<float>(pushes);
  uint64_t wrong = 0;
  for (uint64_t k = 0; k < keys; ++k) {
    if (values[k] != want) {
      if (wrong == 0) {
        std::fprintf(stderr, "exact_sum_client: key %llu is %.1f, want %.1f\n",
                     static_cast<unsigned long long>(k), values[k], want);
      }
      ++wrong;
    }
  }
  const absl::Duration slowest = *std::max_element(longest.begin(), longest.end());
  // Replication counters of the primaries at the end (a killed server's die
  // with it).
  ps::proto::ReplicationStats replication;
  auto stats = (*reader)->Stats();
  if (!stats.ok()) return Fail(std::string(stats.status().message()));
  for (const ps::ServerStats& server : *stats) {
    const ps::proto::ReplicationStats& r = server.stats.replication();
    replication.set_entries_forwarded(replication.entries_forwarded() + r.entries_forwarded());
    replication.set_entries_resent(replication.entries_resent() + r.entries_resent());
    replication.set_batches_resent(replication.batches_resent() + r.batches_resent());
    replication.set_snapshots(replication.snapshots() + r.snapshots());
  }
  std::printf("RESULT keys=%llu workers=%d pushes=%d wrong=%llu seconds=%.2f pushes_per_second=%.0f "
              "longest_push_seconds=%.3f forwarded=%llu resent=%llu resent_batches=%llu "
              "snapshots=%llu\n",
              static_cast<unsigned long long>(keys), workers, pushes,
              static_cast<unsigned long long>(wrong), seconds, workers * pushes / seconds,
              absl::ToDoubleSeconds(slowest),
              static_cast<unsigned long long>(replication.entries_forwarded()),
              static_cast<unsigned long long>(replication.entries_resent()),
              static_cast<unsigned long long>(replication.batches_resent()),
              static_cast<unsigned long long>(replication.snapshots()));
  return wrong == 0 ? 0 : Fail(absl::StrCat(wrong, " of ", keys, " keys are not ", want));
}
