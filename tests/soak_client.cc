// Soak client: threads push +1 and pull random ranges of random dense
// tables, and random keys of a sparse table (one key a call), for a bounded time, with
// attempts so short that many time out and are retried (the same request
// id: the server must apply each push once). Every acknowledged push is
// counted per key; at the end every table is read back and must hold
// exactly the counts. A push refused for the memory budget (RESOURCE_
// EXHAUSTED) applied nothing and is not counted.
//
//   soak_client --servers=h:p,... --seconds=20 --threads=4 --seed=1 [--create]
//   soak_client --servers=... --victim   (pushes to table 'victim' until killed)
//
// Prints "RESULT pushes=N refused=N pulls=N retried_attempts=N wrong=N".
#include <atomic>
#include <cstdio>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/cluster_spec.h"
#include "tests/test_util/table_defs.h"
#include "worker/client/ps_client.h"

ABSL_FLAG(std::string, servers, "", "cluster spec");
ABSL_FLAG(double, seconds, 20, "how long to push and pull");
ABSL_FLAG(int, threads, 4, "client threads (each its own worker id)");
ABSL_FLAG(uint64_t, seed, 1, "random seed");
ABSL_FLAG(bool, create, false, "create the tables first");
ABSL_FLAG(bool, victim, false, "push to table 'victim' until killed");
ABSL_FLAG(int, attempt_ms, 15, "deadline of each attempt (short: many time out and are retried)");

namespace {

constexpr int kDenseTables = 3;
constexpr uint64_t kDenseKeys[kDenseTables] = {1000, 50000, 200000};
constexpr uint64_t kSparseKeySpace = 1 << 16;  // keys drawn from [0, 2^16) * a large odd number
constexpr uint64_t kSparseStride = 0x9E3779B97F4A7C15ull;

int Fail(const std::string& message) {
  std::fprintf(stderr, "soak_client: %s\n", message.c_str());
  return 1;
}

// One soak: threads push and pull until the deadline, counting every
// acknowledged push per key; then every table is read back. Each method
// returns 0 or the exit code after saying why.
class Soak {
 public:
  explicit Soak(std::vector<std::string> servers)
      : servers_(std::move(servers)), errors_(absl::GetFlag(FLAGS_threads)) {
    for (int t = 0; t < kDenseTables; ++t) {
      counts_.emplace_back(new std::atomic<uint32_t>[kDenseKeys[t]]());
    }
  }

  // Pushes to table 'victim' until the test kills this process.
  int Victim() {
    auto client = ps::PsClient::Connect(Options(1000 + static_cast<int>(getpid() % 1000)));
    if (!client.ok()) return Fail(std::string(client.status().message()));
    const std::vector<float> grads(4096, -1.0f);
    for (uint64_t k = 0;; ++k) {  // ends when the test kills it
      ps::PushRange op{"victim", 0, grads.size(), grads};
      (void)(*client)->Push({&op, 1}, k);
    }
  }

  int CreateTables() {
    auto admin = ps::PsClient::Connect(Options(999));
    if (!admin.ok()) return Fail(std::string(admin.status().message()));
    for (int t = 0; t < kDenseTables; ++t) {
      if (absl::Status s =
              (*admin)->CreateTable(ps::SumTable(absl::StrCat("d", t), kDenseKeys[t], 1));
          !s.ok()) {
        return Fail(absl::StrCat("creating d", t, ": ", s.message()));
      }
    }
    if (absl::Status s = (*admin)->CreateTable(ps::SparseSumTable("s", 4)); !s.ok()) {
      return Fail(absl::StrCat("creating s: ", s.message()));
    }
    if (absl::Status s = (*admin)->CreateTable(ps::SumTable("victim", 4096, 1)); !s.ok()) {
      return Fail(absl::StrCat("creating victim: ", s.message()));
    }
    return 0;
  }

  int Run() {
    const absl::Time end = absl::Now() + absl::Seconds(absl::GetFlag(FLAGS_seconds));
    std::vector<std::thread> pool;
    for (int w = 0; w < static_cast<int>(errors_.size()); ++w) {
      pool.emplace_back([this, w, end] { errors_[w] = Work(w, end); });
    }
    for (std::thread& t : pool) t.join();
    for (const std::string& e : errors_) {
      if (!e.empty()) return Fail(e);
    }
    return Check();
  }

 private:
  ps::PsClientOptions Options(int worker) const {
    ps::PsClientOptions o;
    o.servers = servers_;
    o.worker_id = static_cast<uint32_t>(worker);
    o.timeout = absl::Milliseconds(absl::GetFlag(FLAGS_attempt_ms));
    o.max_attempts = 400;
    o.retry_backoff = absl::Milliseconds(1);
    o.connect_timeout = absl::Seconds(30);
    return o;
  }

  // Worker w's random pushes and pulls until `end`; the error that stopped
  // it, or empty.
  std::string Work(int w, absl::Time end) {
    auto client = ps::PsClient::Connect(Options(w));
    if (!client.ok()) return std::string(client.status().message());
    std::mt19937_64 rng(absl::GetFlag(FLAGS_seed) * 1000003 + w);
    for (uint64_t round = 0; absl::Now() < end; ++round) {
      const int what = static_cast<int>(rng() % 10);
      std::string error = what < 2 ? PushSparse(**client, rng, round)
                                   : PushOrPullDense(**client, rng, round, /*push=*/what < 8);
      if (!error.empty()) return error;
    }
    return "";
  }

  // Up to 16 random keys, width 4, one call each (a call's parts to several
  // servers may be refused apart: one key per call is applied or refused
  // as a whole).
  std::string PushSparse(ps::PsClient& client, std::mt19937_64& rng, uint64_t round) {
    const std::vector<float> grads(4, -1.0f);
    for (size_t n = 1 + rng() % 16; n > 0; --n) {
      const uint64_t index = rng() % kSparseKeySpace;
      const uint64_t key = index * kSparseStride;
      absl::Status s = client.PushKeys("s", {&key, 1}, 4, grads, round);
      if (s.code() == absl::StatusCode::kResourceExhausted) {
        ++refused_;
        continue;
      }
      if (!s.ok()) return absl::StrCat("sparse push: ", s.message());
      sparse_counts_[index].fetch_add(1);
      ++pushes_;
    }
    return "";
  }

  // A random range of a random dense table.
  std::string PushOrPullDense(ps::PsClient& client, std::mt19937_64& rng, uint64_t round,
                              bool push) {
    const int t = static_cast<int>(rng() % kDenseTables);
    const uint64_t keys = kDenseKeys[t];
    uint64_t a = rng() % keys, b = rng() % keys;
    if (a > b) std::swap(a, b);
    ++b;
    std::vector<float> buffer(b - a, -1.0f);
    const std::string table = absl::StrCat("d", t);
    if (push) {
      ps::PushRange op{table, a, b, buffer};
      absl::Status s = client.Push({&op, 1}, round);
      if (!s.ok()) return absl::StrCat("push to ", table, " [", a, ", ", b, "): ", s.message());
      for (uint64_t k = a; k < b; ++k) counts_[t][k].fetch_add(1);
      ++pushes_;
      return "";
    }
    ps::PullRange op{table, a, b, absl::MakeSpan(buffer)};
    absl::Status s = client.Pull({&op, 1}, round);
    if (!s.ok()) return absl::StrCat("pull of ", table, ": ", s.message());
    ++pulls_;
    return "";
  }

  // Every key, read back once nothing is in flight.
  int Check() {
    auto reader = ps::PsClient::Connect(Options(998));
    if (!reader.ok()) return Fail(std::string(reader.status().message()));
    int64_t wrong = 0;
    for (int t = 0; t < kDenseTables; ++t) {
      std::vector<float> values(kDenseKeys[t]);
      ps::PullRange op{absl::StrCat("d", t), 0, kDenseKeys[t], absl::MakeSpan(values)};
      if (absl::Status s = (*reader)->Pull({&op, 1}); !s.ok()) {
        return Fail(std::string(s.message()));
      }
      for (uint64_t k = 0; k < kDenseKeys[t]; ++k) {
        if (values[k] != static_cast<float>(counts_[t][k].load())) {
          if (wrong++ < 5) {
            std::fprintf(stderr, "d%d key %llu: %g, expected %u\n", t,
                         static_cast<unsigned long long>(k), values[k], counts_[t][k].load());
          }
        }
      }
    }
    std::vector<uint64_t> keys(kSparseKeySpace);
    for (uint64_t i = 0; i < kSparseKeySpace; ++i) keys[i] = i * kSparseStride;
    std::vector<float> rows(kSparseKeySpace * 4);
    if (absl::Status s = (*reader)->PullKeys("s", keys, 4, absl::MakeSpan(rows)); !s.ok()) {
      return Fail(absl::StrCat("sparse read-back: ", s.message()));
    }
    for (uint64_t i = 0; i < kSparseKeySpace; ++i) {
      for (int c = 0; c < 4; ++c) {
        if (rows[i * 4 + c] != static_cast<float>(sparse_counts_[i].load())) {
          if (wrong++ < 5) {
            std::fprintf(stderr, "s key %llu: %g, expected %u\n",
                         static_cast<unsigned long long>(keys[i]), rows[i * 4 + c],
                         sparse_counts_[i].load());
          }
          break;
        }
      }
    }
    std::printf("RESULT pushes=%lld refused=%lld pulls=%lld wrong=%lld\n",
                static_cast<long long>(pushes_.load()), static_cast<long long>(refused_.load()),
                static_cast<long long>(pulls_.load()), static_cast<long long>(wrong));
    return wrong == 0 ? 0 : 1;
  }

  const std::vector<std::string> servers_;
  std::vector<std::string> errors_;  // one per thread, written by it
  // Acknowledged pushes per key (sparse: per key index, each row of width 4).
  std::vector<std::unique_ptr<std::atomic<uint32_t>[]>> counts_;
  std::unique_ptr<std::atomic<uint32_t>[]> sparse_counts_ {
    new std::atomic<uint32_t>[ kSparseKeySpace ]()
  };
  std::atomic<int64_t> pushes_{0}, refused_{0}, pulls_{0};
};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  auto spec = ps::ClusterSpec::Parse(absl::GetFlag(FLAGS_servers));
  if (!spec.ok()) return Fail(std::string(spec.status().message()));
  Soak soak(spec->servers);
  if (absl::GetFlag(FLAGS_victim)) return soak.Victim();
  if (absl::GetFlag(FLAGS_create)) {
    if (int rc = soak.CreateTables(); rc != 0) return rc;
  }
  return soak.Run();
}
