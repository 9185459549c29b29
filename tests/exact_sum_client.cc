// exact_sum_client: W workers (threads, each its own client and worker id)
// each push +1 to every key of a dense table (or, with --tiered, a sparse
// tiered one) K times through a replicated
// cluster (--etcd), then the sums are read back: every key must be exactly
// W * K, whatever servers died meanwhile (tests/replication_process_test.sh
// kills one). Prints the longest push (the time a failover held pushes up)
// and exits 1 naming the first wrong key.
//
//   exact_sum_client --etcd=127.0.0.1:2379 --workers=4 --pushes=400 --keys=20000
//
// Under a fault schedule (tests/fault_schedule_test.sh) the workers push for
// --seconds instead, and with --tolerate_unknown a push that still fails
// after the client's retries is an unknown outcome (it may have been applied
// on some shards and not on others): the worker counts it and goes on. Each
// key must then end in [lo, hi]: lo = the pushes acknowledged, hi = lo + the
// unknown ones. Below lo an acknowledged update was lost; above hi one was
// applied twice.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/clock.h"
#include "common/etcd_kv_store.h"
#include "tests/test_util/table_defs.h"
#include "worker/client/ps_client.h"
#include "worker/client/shard_directory.h"

ABSL_FLAG(std::string, etcd, "", "etcd endpoint of the replicated cluster");
ABSL_FLAG(std::string, cluster, "default", "cluster name");
ABSL_FLAG(int, workers, 4, "workers (threads, one client each)");
ABSL_FLAG(int, pushes, 0,
          "pushes per worker; 0: 400, or with --seconds no limit (with --seconds, a maximum)");
ABSL_FLAG(std::string, stop_file, "",
          "the workers stop pushing once this file exists (checked before each push)");
ABSL_FLAG(double, seconds, 0,
          "push until this many seconds have passed since the start (0: a fixed --pushes)");
ABSL_FLAG(bool, tolerate_unknown, false,
          "a push that fails after the client's retries is an unknown outcome: count it and go "
          "on with the next clock (without: fail at once)");
ABSL_FLAG(uint64_t, keys, 20000, "keys of the table (spread over every shard)");
ABSL_FLAG(std::string, table, "sum", "table name");
ABSL_FLAG(bool, tiered, false,
          "the table is sparse and tiered (keys 0..--keys-1 as a key list, a 1 MiB cache a "
          "shard: servers need --table_dir) instead of dense in memory");
ABSL_FLAG(int64_t, base, 0,
          "what every key holds before this run (an earlier run's pushes): the sums must be "
          "that plus this run's");
ABSL_FLAG(std::string, started_file, "", "written once every worker has pushed once");
ABSL_FLAG(std::string, progress_file, "",
          "rewritten every 50 ms with the number of pushes acknowledged so far (all workers)");
ABSL_FLAG(std::string, start_file, "",
          "written at the start with its Unix time in seconds (the time base of the timeline, "
          "for scripts that log events against it)");
ABSL_FLAG(std::string, timeline_file, "",
          "'<bucket start, s since the start> <pushes acknowledged>' per 100 ms bucket; rewritten "
          "every second while the workers push, and at the end");
ABSL_FLAG(double, final_read_seconds, 60,
          "how long the final read may be retried (a new connection each try) while the cluster "
          "repairs");

namespace {

constexpr double kBucketSeconds = 0.1;
constexpr int kLoggedUnknown = 5;  // unknown outcomes whose error is printed

int Fail(const std::string& message) {
  std::fprintf(stderr, "exact_sum_client: %s\n", message.c_str());
  return 1;
}

// Writes `text` to a temporary file renamed to `path`, so that a reader sees
// the old text or the new one.
bool WriteFile(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  std::FILE* f = std::fopen(tmp.c_str(), "w");
  if (f == nullptr) return false;
  const bool ok = std::fputs(text.c_str(), f) >= 0;
  return std::fclose(f) == 0 && ok && std::rename(tmp.c_str(), path.c_str()) == 0;
}

// What one worker thread did; written by that thread only, read after join.
struct WorkerLog {
  std::string error;             // set when the worker stopped on an error
  std::vector<double> acked_at;  // seconds since the start, one per acknowledged push
  int64_t unknown = 0;           // pushes whose outcome is unknown
  int64_t pushes = 0;            // pushes made (acknowledged or not)
  absl::Duration longest;        // the longest push
};

// The longest stretch of [0, end] without an acknowledgement in `times`
// (sorted), in seconds.
double LongestGap(const std::vector<double>& times, double end) {
  double gap = 0, last = 0;
  for (double t : times) {
    gap = std::max(gap, t - last);
    last = t;
  }
  return std::max(gap, end - last);
}

// Acknowledgements counted per 100 ms since the start. Thread-safe.
class AckTimeline {
 public:
  void Add(double seconds) {
    const size_t b = static_cast<size_t>(seconds / kBucketSeconds);
    std::lock_guard<std::mutex> lock(mu_);
    if (buckets_.size() <= b) buckets_.resize(b + 1, 0);
    ++buckets_[b];
  }
  // One line per bucket from the start to `end` seconds.
  std::string Format(double end) const {
    std::vector<int64_t> buckets;
    {
      std::lock_guard<std::mutex> lock(mu_);
      buckets = buckets_;
    }
    buckets.resize(std::max(buckets.size(), static_cast<size_t>(std::ceil(end / kBucketSeconds))),
                   0);
    std::string text;
    for (size_t b = 0; b < buckets.size(); ++b) {
      absl::StrAppend(&text, absl::StrFormat("%.1f %d\n", b * kBucketSeconds, buckets[b]));
    }
    return text;
  }

 private:
  mutable std::mutex mu_;
  std::vector<int64_t> buckets_;  // guarded by mu_
};

// The totals of every worker's log, after they joined.
struct Totals {
  int64_t acked = 0, unknown = 0, most_pushes = 0;
  absl::Duration slowest;
  std::vector<double> acked_at;  // sorted
};

// One run: creates the table, pushes from every worker (with the reporter
// writing progress and timeline meanwhile), reads the sums back and checks
// them. Run() returns the exit code.
class ExactSumRun {
 public:
  explicit ExactSumRun(std::shared_ptr<const ps::ShardDirectory> directory)
      : directory_(std::move(directory)),
        workers_(absl::GetFlag(FLAGS_workers)),
        push_seconds_(absl::GetFlag(FLAGS_seconds)),
        pushes_(absl::GetFlag(FLAGS_pushes) != 0 ? absl::GetFlag(FLAGS_pushes)
                : push_seconds_ > 0              ? INT64_MAX
                                                 : 400),
        keys_(absl::GetFlag(FLAGS_keys)),
        table_(absl::GetFlag(FLAGS_table)),
        tiered_(absl::GetFlag(FLAGS_tiered)),
        logs_(workers_) {
    if (tiered_) {
      key_list_.resize(static_cast<size_t>(keys_));
      for (size_t k = 0; k < key_list_.size(); ++k) key_list_[k] = k;
    }
  }

  int Run() {
    {
      auto admin = ps::PsClient::Connect(Options(workers_));
      if (!admin.ok()) return Fail(std::string(admin.status().message()));
      if (absl::Status s = (*admin)->CreateTable(Table()); !s.ok()) {
        return Fail(std::string(s.message()));
      }
    }
    start_ = absl::Now();
    if (const std::string path = absl::GetFlag(FLAGS_start_file); !path.empty()) {
      if (!WriteFile(path, absl::StrFormat("%.6f\n", absl::ToUnixMicros(start_) / 1e6))) {
        return Fail(absl::StrCat("could not write --start_file=", path));
      }
    }
    PushFromEveryWorker();
    for (const WorkerLog& log : logs_) {
      if (!log.error.empty()) return Fail(log.error);
    }
    const double seconds = SinceStart();
    const Totals totals = Sum();
    if (const std::string path = absl::GetFlag(FLAGS_timeline_file);
        !path.empty() && !WriteFile(path, timeline_.Format(seconds))) {
      return Fail(absl::StrCat("could not write --timeline_file=", path));
    }
    std::vector<float> values(keys_);
    std::vector<ps::ServerStats> stats;
    if (absl::Status read = FinalRead(&values, &stats); !read.ok()) {
      return Fail(absl::StrCat("the final read failed for --final_read_seconds=",
                               absl::GetFlag(FLAGS_final_read_seconds), ": ", read.message()));
    }
    return Check(totals, values, stats, seconds);
  }

 private:
  // The summed table: dense in memory, or sparse and tiered (--tiered).
  ps::proto::TableDef Table() const {
    if (!tiered_) return ps::SumTable(table_, keys_, 1);
    ps::proto::TableDef def = ps::SparseSumTable(table_, 1, 64);
    def.set_storage(ps::proto::STORAGE_TIERED);
    def.set_cache_mb(1);
    return def;
  }
  // +1 to every key (grads of -1), at clock `clock`.
  absl::Status PushOnce(ps::PsClient& client, const std::vector<float>& grads, uint64_t clock) {
    if (tiered_) return client.PushKeys(table_, key_list_, 1, grads, clock);
    ps::PushRange op{table_, 0, keys_, grads};
    return client.Push({&op, 1}, clock);
  }
  absl::Status PullAll(ps::PsClient& client, absl::Span<float> values) {
    if (tiered_) return client.PullKeys(table_, key_list_, 1, values);
    ps::PullRange pull{table_, 0, keys_, values};
    return client.Pull({&pull, 1});
  }

  ps::PsClientOptions Options(int worker) const {
    ps::PsClientOptions o;
    o.directory = directory_;
    o.worker_id = static_cast<uint32_t>(worker);
    o.timeout = absl::Seconds(2);
    o.max_attempts = 40;
    return o;
  }
  double SinceStart() const { return absl::ToDoubleSeconds(absl::Now() - start_); }

  // The workers' threads, and the reporter's while they push: the progress
  // every 50 ms, the timeline every second (so that it is there even if
  // this process is killed).
  void PushFromEveryWorker() {
    const std::string progress_file = absl::GetFlag(FLAGS_progress_file);
    const std::string timeline_file = absl::GetFlag(FLAGS_timeline_file);
    std::atomic<bool> finished{false};
    std::thread reporter;
    if (!progress_file.empty() || !timeline_file.empty()) {
      reporter = std::thread([&] {
        for (int tick = 1; !finished.load(); ++tick) {
          if (!progress_file.empty()) {
            WriteFile(progress_file, absl::StrCat(acknowledged_.load(), "\n"));
          }
          if (!timeline_file.empty() && tick % 20 == 0) {
            WriteFile(timeline_file, timeline_.Format(SinceStart()));
          }
          absl::SleepFor(absl::Milliseconds(50));  // a report's period, not a synchronisation
        }
      });
    }
    std::vector<std::thread> threads;
    for (int w = 0; w < workers_; ++w) threads.emplace_back([this, w] { Push(w); });
    for (std::thread& t : threads) t.join();
    finished = true;
    if (reporter.joinable()) reporter.join();
  }

  // Worker w's pushes, into logs_[w].
  void Push(int w) {
    WorkerLog& log = logs_[w];
    auto client = ps::PsClient::Connect(Options(w));
    if (!client.ok()) {
      log.error = std::string(client.status().message());
      return;
    }
    const std::string stop_file = absl::GetFlag(FLAGS_stop_file);
    const std::vector<float> grads(keys_, -1.0f);  // SGD at rate 1: +1 each
    for (int64_t k = 0; k < pushes_; ++k) {
      if (push_seconds_ > 0 && SinceStart() >= push_seconds_) break;
      if (!stop_file.empty() && (k & 15) == 0 && std::filesystem::exists(stop_file)) break;
      const absl::Time t0 = absl::Now();
      absl::Status s = PushOnce(**client, grads, static_cast<uint64_t>(k));
      log.longest = std::max(log.longest, absl::Now() - t0);
      log.pushes = k + 1;
      if (!s.ok()) {
        if (!absl::GetFlag(FLAGS_tolerate_unknown)) {
          log.error = absl::StrCat("worker ", w, " push ", k, ": ", s.message());
          return;
        }
        ++log.unknown;
        if (unknown_logged_.fetch_add(1) < kLoggedUnknown) {
          std::fprintf(stderr,
                       "exact_sum_client: unknown outcome: worker %d clock %lld at %.3f s: %s\n", w,
                       static_cast<long long>(k), SinceStart(), std::string(s.message()).c_str());
        }
        // A backoff before the next clock, not a synchronisation.
        absl::SleepFor(absl::Milliseconds(100));
        continue;
      }
      log.acked_at.push_back(SinceStart());
      timeline_.Add(log.acked_at.back());
      acknowledged_.fetch_add(1);
      if (log.acked_at.size() == 1 && started_.fetch_add(1) + 1 == workers_ &&
          !absl::GetFlag(FLAGS_started_file).empty()) {
        std::FILE* f = std::fopen(absl::GetFlag(FLAGS_started_file).c_str(), "w");
        if (f != nullptr) std::fclose(f);
      }
    }
  }

  Totals Sum() const {
    Totals t;
    for (const WorkerLog& log : logs_) {
      t.acked += static_cast<int64_t>(log.acked_at.size());
      t.unknown += log.unknown;
      t.most_pushes = std::max(t.most_pushes, log.pushes);
      t.slowest = std::max(t.slowest, log.longest);
      t.acked_at.insert(t.acked_at.end(), log.acked_at.begin(), log.acked_at.end());
    }
    std::sort(t.acked_at.begin(), t.acked_at.end());
    return t;
  }

  // The final read, retried while the cluster may still be repairing; each
  // try connects anew (under a worker id of its own, so that a try whose
  // client could not leave does not hold the next one's id).
  absl::Status FinalRead(std::vector<float>* values, std::vector<ps::ServerStats>* stats) {
    const absl::Time read_deadline =
        absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_final_read_seconds));
    absl::Status read = absl::UnknownError("not tried");
    for (int attempt = 0; !read.ok() && (attempt == 0 || absl::Now() < read_deadline); ++attempt) {
      ps::PsClientOptions o = Options(workers_ + 1 + attempt);
      o.connect_timeout =
          std::clamp(read_deadline - absl::Now(), absl::Seconds(1), o.connect_timeout);
      auto reader = ps::PsClient::Connect(o);
      if (!reader.ok()) {
        read = reader.status();
      } else {
        read = PullAll(**reader, absl::MakeSpan(*values));
        if (read.ok()) {
          absl::StatusOr<std::vector<ps::ServerStats>> got = (*reader)->Stats();
          read = got.status();
          if (got.ok()) *stats = *std::move(got);
        }
      }
      if (!read.ok()) {
        if (attempt < 3 || (attempt + 1) % 10 == 0) {  // not every try: they may be many
          std::fprintf(stderr, "exact_sum_client: final read try %d failed: %s\n", attempt + 1,
                       std::string(read.message()).c_str());
        }
        absl::SleepFor(absl::Milliseconds(500));  // a retry's backoff
      }
    }
    return read;
  }

  // Each key in [lo, hi]: every acknowledged push applied once, every
  // unknown one at most once. Prints the RESULT line.
  int Check(const Totals& totals, const std::vector<float>& values,
            const std::vector<ps::ServerStats>& stats, double seconds) const {
    const int64_t base = absl::GetFlag(FLAGS_base);
    const float lo = static_cast<float>(base + totals.acked);
    const float hi = static_cast<float>(base + totals.acked + totals.unknown);
    uint64_t lost = 0, duplicated = 0;
    for (uint64_t k = 0; k < keys_; ++k) {
      if (values[k] >= lo && values[k] <= hi) continue;
      if (lost + duplicated == 0) {
        if (lo == hi) {
          std::fprintf(stderr, "exact_sum_client: key %llu is %.1f, want %.1f\n",
                       static_cast<unsigned long long>(k), values[k], lo);
        } else {
          std::fprintf(stderr, "exact_sum_client: key %llu is %.1f, want [%.1f, %.1f] (%s)\n",
                       static_cast<unsigned long long>(k), values[k], lo, hi,
                       values[k] < lo ? "lost" : "duplicated");
        }
      }
      ++(values[k] < lo ? lost : duplicated);
    }
    PrintResult(totals, stats, seconds, lost, duplicated);
    const uint64_t wrong = lost + duplicated;
    if (wrong == 0) return 0;
    if (lo == hi) return Fail(absl::StrCat(wrong, " of ", keys_, " keys are not ", lo));
    return Fail(absl::StrCat(lost, " of ", keys_, " keys lost an acknowledged update and ",
                             duplicated, " applied one twice (want [", lo, ", ", hi, "])"));
  }

  // With the replication counters of the primaries at the end (a killed
  // server's die with it).
  void PrintResult(const Totals& totals, const std::vector<ps::ServerStats>& stats, double seconds,
                   uint64_t lost, uint64_t duplicated) const {
    ps::proto::ReplicationStats replication;
    for (const ps::ServerStats& server : stats) {
      const ps::proto::ReplicationStats& r = server.stats.replication();
      replication.set_entries_forwarded(replication.entries_forwarded() + r.entries_forwarded());
      replication.set_entries_resent(replication.entries_resent() + r.entries_resent());
      replication.set_batches_resent(replication.batches_resent() + r.batches_resent());
      replication.set_snapshots(replication.snapshots() + r.snapshots());
    }
    std::printf(
        "RESULT keys=%llu workers=%d pushes=%lld wrong=%llu acked=%lld unknown=%lld "
        "lost=%llu duplicated=%llu seconds=%.2f pushes_per_second=%.0f "
        "longest_push_seconds=%.3f longest_gap_seconds=%.3f forwarded=%llu resent=%llu "
        "resent_batches=%llu snapshots=%llu\n",
        static_cast<unsigned long long>(keys_), workers_,
        static_cast<long long>(totals.most_pushes),
        static_cast<unsigned long long>(lost) + duplicated, static_cast<long long>(totals.acked),
        static_cast<long long>(totals.unknown), static_cast<unsigned long long>(lost),
        static_cast<unsigned long long>(duplicated), seconds, totals.acked / seconds,
        absl::ToDoubleSeconds(totals.slowest), LongestGap(totals.acked_at, seconds),
        static_cast<unsigned long long>(replication.entries_forwarded()),
        static_cast<unsigned long long>(replication.entries_resent()),
        static_cast<unsigned long long>(replication.batches_resent()),
        static_cast<unsigned long long>(replication.snapshots()));
  }

  const std::shared_ptr<const ps::ShardDirectory> directory_;
  const int workers_;
  const double push_seconds_;
  const int64_t pushes_;
  const uint64_t keys_;
  const std::string table_;
  const bool tiered_;
  std::vector<uint64_t> key_list_;  // --tiered: 0 .. keys_ - 1
  absl::Time start_;
  std::vector<WorkerLog> logs_;  // one per worker, written by its thread
  AckTimeline timeline_;
  std::atomic<int> started_{0};
  std::atomic<int64_t> acknowledged_{0};
  std::atomic<int> unknown_logged_{0};
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  ps::EtcdKvStore etcd(ps::EtcdOptions{absl::GetFlag(FLAGS_etcd)});
  auto directory =
      ps::EtcdShardDirectory::Start(&etcd, absl::GetFlag(FLAGS_cluster), absl::Seconds(30));
  if (!directory.ok()) return Fail(std::string(directory.status().message()));
  return ExactSumRun(std::shared_ptr<const ps::ShardDirectory>(std::move(*directory))).Run();
}
