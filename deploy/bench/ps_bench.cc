// ps_bench: push/pull throughput and latency of the parameter server.
//
// Runs a matrix of cases against running servers (--servers) or against
// shards it starts in this process (--in_process_servers). Each case creates
// its own table, then W client threads (each with its own PsClient, each
// keeping --inflight requests outstanding from that client) repeat the
// operation for --seconds. Pushes with several in flight are kept in flight
// by one thread per client with PsClient::PushAsync (each completion starts
// the next); other operations use one thread per request in flight.
// Prints one RESULT line per case:
//
//   RESULT kind=dense op=pushpull values=1048576 width=1 servers=1 clients=1 inflight=1
//          ops_per_s=... values_per_s=... gbytes_per_s=... p50_us=... p99_us=...
//
// gbytes_per_s counts payload bytes (4 per value each way; a push+pull moves
// the values twice). Against servers in their own processes (--servers or
// --etcd) the line ends with client_cpu_us=... server_cpu_us=...: the CPU
// time (user + system) this process and the servers together (their Stats'
// process_cpu_seconds) used over the measured time, per operation.
//
// With --paired_blocks=N, each key-list case on the dense table's key path
// and the same case on a sparse table run in turns (N of each, alternating
// which goes first) instead of one after the other, and a line
//
//   PAIR op=pushpull width=1 turns=20 hashed_over_sparse=... turn_median=...
//        turn_min=... turn_max=...
//
// gives the sparse table's speed over the dense key path's: the drift of a
// shared machine then falls on both alike. --slice_size sets the dense
// tables' slicing, to compare the two at equal slice (lock) counts.
#include <algorithm>
#include <atomic>
#include <cstdio>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/cluster_spec.h"
#include "common/etcd_kv_store.h"
#include "common/process_cpu.h"
#include "common/process_tuning.h"
#include "server/ps_server.h"
#include "worker/client/ps_client.h"
#include "worker/client/shard_directory.h"

ABSL_FLAG(std::string, servers, "", "running servers (host:port,...); empty: start in-process");
ABSL_FLAG(std::string, etcd, "",
          "instead of --servers: a running replicated cluster's etcd endpoint (host:port); the "
          "clients follow its ring");
ABSL_FLAG(std::string, cluster, "default", "with --etcd: the cluster's name");
ABSL_FLAG(int, in_process_servers, 1, "shards to start in this process when --servers is empty");
ABSL_FLAG(int, clients, 1, "client threads, each with its own PsClient");
ABSL_FLAG(std::string, dense_values, "1024,65536,1048576", "dense request sizes (floats)");
ABSL_FLAG(std::string, ops, "push,pull,pushpull", "operations to measure");
ABSL_FLAG(std::string, inflight, "1", "requests kept outstanding per client (list)");
ABSL_FLAG(int, small_inflight, 16, "extra case: 1K-float pushes with this many in flight (0: off)");
ABSL_FLAG(int64_t, sparse_keys, 10000, "keys per sparse request (0: no sparse cases)");
ABSL_FLAG(std::string, sparse_widths, "1,16", "widths of the sparse tables");
ABSL_FLAG(uint64_t, sparse_key_space, 1000000, "keys in a sparse table");
ABSL_FLAG(bool, sparse_tables, true,
          "also run the key-list cases on a sparse table (kind=hashed: the same number of "
          "distinct keys, spread over uint64 like hashed feature ids)");
ABSL_FLAG(uint32_t, sparse_buckets, 0,
          "slices (hash buckets) of the kind=hashed tables (0: the server's default, 1024)");
ABSL_FLAG(uint64_t, slice_size, 4096,
          "keys per slice of the dense tables (ps_server --slice_size; with --servers, must "
          "be the servers')");
ABSL_FLAG(std::string, optimizer, "adagrad", "adagrad or sgd");
ABSL_FLAG(double, seconds, 2.0, "measured time per case");
ABSL_FLAG(uint64_t, max_values_per_request, 1 << 20,
          "PsClient cuts requests into parts of at most this many values");
ABSL_FLAG(double, warmup_seconds, 0.3, "unmeasured time per case");
ABSL_FLAG(bool, async_pushes, true,
          "keep dense pushes in flight with PushAsync from one thread per client (false: one "
          "thread per push in flight, each calling Push)");
ABSL_FLAG(int, paired_blocks, 0,
          "0: each case alone, one after another. N > 0: the key-list cases on the dense "
          "table's key path (kind=sparse) and on a sparse table (kind=hashed) of one width and "
          "op run in turns, in 2N blocks of equal time from one client with one request in "
          "flight, and a PAIR line gives the hashed:sparse speed ratio over the whole run and "
          "the spread of the per-turn ratios (drift of the machine then hits both alike)");
ABSL_FLAG(double, spin_wait_us, -1,
          "PsClientOptions::spin_wait in microseconds (negative: the library's default)");

namespace ps {
namespace {

struct Case {
  // dense: ranges; sparse: key lists on a dense table; hashed: key lists on
  // a sparse table (TABLE_SPARSE).
  std::string kind;
  std::string op;  // push, pull, pushpull
  uint64_t keys = 0;
  uint32_t width = 1;
  int inflight = 1;
};

std::vector<int64_t> ParseList(const std::string& flag, const std::string& text) {
  std::vector<int64_t> out;
  for (absl::string_view part : absl::StrSplit(text, ',', absl::SkipEmpty())) {
    int64_t v = 0;
    if (!absl::SimpleAtoi(part, &v) || v < 1) {
      std::fprintf(stderr, "ps_bench: --%s=%s: '%s' is not a positive number\n", flag.c_str(),
                   text.c_str(), std::string(part).c_str());
      std::exit(2);
    }
    out.push_back(v);
  }
  return out;
}

proto::TableDef BenchTable(const std::string& name, const std::string& kind, uint64_t keys,
                           uint32_t width) {
  proto::TableDef def;
  def.set_name(name);
  if (kind == "hashed") {
    def.set_kind(proto::TABLE_SPARSE);
    def.set_num_buckets(absl::GetFlag(FLAGS_sparse_buckets));
  } else {
    def.set_num_keys(keys);
  }
  def.set_width(width);
  def.set_initializer(proto::INIT_ZEROS);
  if (absl::GetFlag(FLAGS_optimizer) == "sgd") {
    def.set_optimizer(proto::OPT_SGD);
  } else {
    def.set_optimizer(proto::OPT_ADAGRAD);
    def.set_initial_accumulator(0.1f);
  }
  def.set_learning_rate(0.01f);
  return def;
}

// One worker thread's loop: repeats the case's op until `stop`, recording
// latencies of the ops that started after `measure_from`.
class Runner {
 public:
  Runner(PsClient* client, const Case& c, const std::string& table, uint64_t seed)
      : client_(client), case_(c), table_(table) {
    const uint64_t n = c.keys * c.width;
    grads_.assign(n, 1e-3f);
    values_.assign(n, 0.0f);
    if (c.kind != "dense") {
      std::mt19937_64 rng(seed);
      keys_.resize(c.keys);
      for (auto& k : keys_) k = rng() % absl::GetFlag(FLAGS_sparse_key_space);
      // An odd multiplier is a bijection of uint64: as many distinct keys,
      // spread like hashed ids.
      if (c.kind == "hashed") {
        for (auto& k : keys_) k *= 0x9e3779b97f4a7c15ULL;
      }
    }
  }

  absl::Status Once() {
    if (case_.op == "pushpull") {
      // The Downpour step: push the gradient, get the fresh parameters.
      if (case_.kind == "dense") {
        PushRange push{table_, 0, case_.keys, grads_};
        PullRange pull{table_, 0, case_.keys, absl::MakeSpan(values_)};
        return client_->PushPull({&push, 1}, {&pull, 1}, 0);
      }
      return client_->PushPullKeys(table_, keys_, case_.width, grads_, absl::MakeSpan(values_), 0);
    }
    const bool push = case_.op != "pull", pull = case_.op != "push";
    if (case_.kind == "dense") {
      if (push) {
        PushRange op{table_, 0, case_.keys, grads_};
        if (absl::Status s = client_->Push({&op, 1}, 0); !s.ok()) return s;
      }
      if (pull) {
        PullRange op{table_, 0, case_.keys, absl::MakeSpan(values_)};
        if (absl::Status s = client_->Pull({&op, 1}); !s.ok()) return s;
      }
      return absl::OkStatus();
    }
    if (push) {
      if (absl::Status s = client_->PushKeys(table_, keys_, case_.width, grads_, 0); !s.ok()) {
        return s;
      }
    }
    if (pull) return client_->PullKeys(table_, keys_, case_.width, absl::MakeSpan(values_));
    return absl::OkStatus();
  }

  // Keeps `window` async pushes in flight from this client until `stop`:
  // each completion starts the next push. Returns once all have ended.
  void RunAsyncPushes(int window, absl::Time measure_from, absl::Time stop) {
    absl::Mutex mu;
    int lanes = window;
    std::function<void()> start = [&] {
      const absl::Time t0 = absl::Now();
      PushRange op{table_, 0, case_.keys, grads_};
      client_->PushAsync({&op, 1}, 0, [&, t0](absl::Status s) {
        const absl::Time t1 = absl::Now();
        bool again = false;
        {
          absl::MutexLock lock(&mu);
          if (!s.ok() && status_.ok()) status_ = s;
          if (t0 >= measure_from) latencies_us_.push_back(absl::ToDoubleMicroseconds(t1 - t0));
          again = s.ok() && t1 < stop;
          if (!again) --lanes;
        }
        if (again) start();
      });
    };
    for (int i = 0; i < window; ++i) start();
    absl::MutexLock lock(&mu);
    auto ended = [&lanes]() { return lanes == 0; };
    mu.Await(absl::Condition(&ended));
  }

  void Run(absl::Time measure_from, absl::Time stop) {
    while (true) {
      const absl::Time t0 = absl::Now();
      if (t0 >= stop) return;
      status_ = Once();
      if (!status_.ok()) return;
      if (t0 >= measure_from) {
        latencies_us_.push_back(absl::ToDoubleMicroseconds(absl::Now() - t0));
      }
    }
  }

  const absl::Status& status() const { return status_; }
  const std::vector<double>& latencies_us() const { return latencies_us_; }
  void ClearLatencies() { latencies_us_.clear(); }

 private:
  PsClient* client_;
  const Case case_;
  const std::string table_;
  std::vector<float> grads_, values_;
  std::vector<uint64_t> keys_;
  std::vector<double> latencies_us_;
  absl::Status status_;
};

double Percentile(std::vector<double>& v, double p) {
  if (v.empty()) return 0;
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(p * v.size()));
  std::nth_element(v.begin(), v.begin() + i, v.end());
  return v[i];
}

// Creates case c's table: a dense table of c.keys keys, or a key-list table
// of --sparse_key_space keys. Prints the error and returns false on failure.
bool CreateCaseTable(PsClient* client, const std::string& table, const Case& c) {
  const uint64_t table_keys = c.kind == "dense" ? c.keys : absl::GetFlag(FLAGS_sparse_key_space);
  absl::Status s = client->CreateTable(BenchTable(table, c.kind, table_keys, c.width));
  if (!s.ok()) std::fprintf(stderr, "ps_bench: %s\n", std::string(s.message()).c_str());
  return s.ok();
}

// CPU seconds used so far by this process (the clients) and by the server
// processes (the sum of their Stats' process_cpu_seconds); servers < 0 when
// they run in this process or did not answer.
struct CpuUse {
  double clients = 0;
  double servers = -1;
};

CpuUse MeasureCpu(PsClient* client) {
  CpuUse use;
  use.clients = ProcessCpuSeconds();
  if (absl::GetFlag(FLAGS_servers).empty() && absl::GetFlag(FLAGS_etcd).empty()) return use;
  absl::StatusOr<std::vector<ServerStats>> stats = client->Stats();
  if (!stats.ok()) return use;
  use.servers = 0;
  for (const ServerStats& s : *stats) use.servers += s.stats.process_cpu_seconds();
  return use;
}

// Case c's RESULT line: `ops` operations a second, percentiles of
// `latencies_us`, and `cpu`, the CPU used over the measured time (from
// MeasureCpu's difference), per operation when known (null: not measured).
void PrintResult(const Case& c, int servers, size_t clients, double ops,
                 std::vector<double>& latencies_us, const CpuUse* cpu = nullptr) {
  const double values = ops * c.keys * c.width;
  const double bytes = values * sizeof(float) * (c.op == "pushpull" ? 2 : 1);
  const double p50 = Percentile(latencies_us, 0.50), p99 = Percentile(latencies_us, 0.99);
  std::string cpu_fields;
  const double measured_ops = ops * absl::GetFlag(FLAGS_seconds);
  if (cpu != nullptr && measured_ops > 0 && cpu->servers >= 0) {
    // Only with servers in their own processes: in-process shards' CPU is
    // the clients' too.
    cpu_fields =
        absl::StrFormat(" client_cpu_us=%.1f server_cpu_us=%.1f", cpu->clients * 1e6 / measured_ops,
                        cpu->servers * 1e6 / measured_ops);
  }
  std::printf(
      "RESULT kind=%s op=%s values=%llu width=%u servers=%d clients=%zu inflight=%d "
      "ops_per_s=%.0f values_per_s=%.4g gbytes_per_s=%.3f p50_us=%.0f p99_us=%.0f%s\n",
      c.kind.c_str(), c.op.c_str(), static_cast<unsigned long long>(c.keys) * c.width, c.width,
      servers, clients, c.inflight, ops, values, bytes / 1e9, p50, p99, cpu_fields.c_str());
  std::fflush(stdout);
}

int RunCase(const Case& c, const std::vector<std::unique_ptr<PsClient>>& clients, int index) {
  const std::string table = absl::StrCat("bench", index, "_", c.kind, "_", c.op);
  if (!CreateCaseTable(clients[0].get(), table, c)) return 1;
  // Dense pushes with several in flight: one thread per client, PushAsync.
  const bool async =
      absl::GetFlag(FLAGS_async_pushes) && c.op == "push" && c.kind == "dense" && c.inflight > 1;
  std::vector<std::unique_ptr<Runner>> runners;
  for (size_t w = 0; w < clients.size(); ++w) {
    for (int i = 0; i < (async ? 1 : c.inflight); ++i) {
      runners.push_back(std::make_unique<Runner>(clients[w].get(), c, table, w * 1000 + i + 1));
    }
  }
  const absl::Time start = absl::Now();
  const absl::Time measure_from = start + absl::Seconds(absl::GetFlag(FLAGS_warmup_seconds));
  const absl::Time stop = measure_from + absl::Seconds(absl::GetFlag(FLAGS_seconds));
  std::vector<std::thread> threads;
  for (auto& r : runners) {
    threads.emplace_back([&r, &c, async, measure_from, stop] {
      if (async) {
        r->RunAsyncPushes(c.inflight, measure_from, stop);
      } else {
        r->Run(measure_from, stop);
      }
    });
  }
  // The CPU both sides use over the measured time (the runners count what
  // completes inside it).
  absl::SleepFor(measure_from - absl::Now());
  const CpuUse cpu_from = MeasureCpu(clients[0].get());
  absl::SleepFor(stop - absl::Now());
  const CpuUse cpu_to = MeasureCpu(clients[0].get());
  for (auto& t : threads) t.join();
  std::vector<double> all;
  for (auto& r : runners) {
    if (!r->status().ok()) {
      std::fprintf(stderr, "ps_bench: %s\n", std::string(r->status().message()).c_str());
      return 1;
    }
    all.insert(all.end(), r->latencies_us().begin(), r->latencies_us().end());
  }
  const double ops = all.size() / absl::GetFlag(FLAGS_seconds);
  CpuUse cpu;
  cpu.clients = cpu_to.clients - cpu_from.clients;
  if (cpu_from.servers >= 0 && cpu_to.servers >= 0) cpu.servers = cpu_to.servers - cpu_from.servers;
  PrintResult(c, clients[0]->num_servers(), clients.size(), ops, all, &cpu);
  return 0;
}

// A key-list case on the dense table's key path (`a`, kind sparse) and on a
// sparse table (`b`, kind hashed) in turns: --paired_blocks turns each of
// --seconds / (2 * blocks), after a warm-up of both. Prints each one's
// RESULT line (over the time of its own turns) and a PAIR line: the ratio
// of b's ops/s to a's over the whole run, and the median, lowest and
// highest of the per-turn ratios.
int RunPair(const Case& a, const Case& b, PsClient* client, int index) {
  const Case* cases[2] = {&a, &b};
  std::vector<std::unique_ptr<Runner>> runners;
  for (int k = 0; k < 2; ++k) {
    const Case& c = *cases[k];
    const std::string table = absl::StrCat("bench", index, "_", k, "_", c.kind, "_", c.op);
    if (!CreateCaseTable(client, table, c)) return 1;
    // The same keys (before b's spreading), from the same seed.
    runners.push_back(std::make_unique<Runner>(client, c, table, 1));
  }
  const int blocks = absl::GetFlag(FLAGS_paired_blocks);
  const absl::Duration turn = absl::Seconds(absl::GetFlag(FLAGS_seconds)) / (2 * blocks);
  const absl::Duration warmup = absl::Seconds(absl::GetFlag(FLAGS_warmup_seconds));
  for (auto& r : runners) {
    const absl::Time now = absl::Now();
    r->Run(now, now + warmup / 2);
  }
  for (auto& r : runners) r->ClearLatencies();
  // Per turn: ops and time of each case.
  std::vector<double> ratios;
  double total_ops[2] = {0, 0}, total_us[2] = {0, 0};
  for (int t = 0; t < blocks; ++t) {
    double rate[2];
    // Alternate which goes first, so neither always follows the other.
    for (int j = 0; j < 2; ++j) {
      const int k = (t % 2 == 0) ? j : 1 - j;
      Runner& r = *runners[k];
      const size_t before = r.latencies_us().size();
      const absl::Time t0 = absl::Now();
      r.Run(t0, t0 + turn);
      const double us = absl::ToDoubleMicroseconds(absl::Now() - t0);
      if (!r.status().ok()) {
        std::fprintf(stderr, "ps_bench: %s\n", std::string(r.status().message()).c_str());
        return 1;
      }
      const double ops = static_cast<double>(r.latencies_us().size() - before);
      total_ops[k] += ops;
      total_us[k] += us;
      rate[k] = ops / us;
    }
    if (rate[0] > 0) ratios.push_back(rate[1] / rate[0]);
  }
  for (int k = 0; k < 2; ++k) {
    std::vector<double> all = runners[k]->latencies_us();
    PrintResult(*cases[k], client->num_servers(), 1, total_ops[k] / (total_us[k] / 1e6), all);
  }
  std::sort(ratios.begin(), ratios.end());
  const double whole = (total_ops[1] / total_us[1]) / (total_ops[0] / total_us[0]);
  std::printf(
      "PAIR op=%s width=%u turns=%d hashed_over_sparse=%.3f turn_median=%.3f "
      "turn_min=%.3f turn_max=%.3f\n",
      a.op.c_str(), a.width, blocks, whole, ratios[ratios.size() / 2], ratios.front(),
      ratios.back());
  std::fflush(stdout);
  return 0;
}

// The servers measured: started in this process, given by address, or a
// replicated cluster's ring followed in etcd. Destroyed after the clients.
struct Servers {
  std::vector<std::unique_ptr<PsServer>> local;
  std::vector<std::string> addresses;
  std::unique_ptr<EtcdKvStore> kv;
  std::shared_ptr<const ShardDirectory> directory;
};

// Each returns 0, or the exit code after saying why on stderr.
int FindServers(Servers* out) {
  if (const std::string etcd = absl::GetFlag(FLAGS_etcd); !etcd.empty()) {
    out->kv = std::make_unique<EtcdKvStore>(EtcdOptions{etcd});
    auto followed =
        EtcdShardDirectory::Start(out->kv.get(), absl::GetFlag(FLAGS_cluster), absl::Seconds(30));
    if (!followed.ok()) {
      std::fprintf(stderr, "ps_bench: --etcd=%s: %s\n", etcd.c_str(),
                   std::string(followed.status().message()).c_str());
      return 1;
    }
    out->directory = std::shared_ptr<const ShardDirectory>(*std::move(followed));
    return 0;
  }
  if (!absl::GetFlag(FLAGS_servers).empty()) {
    auto spec = ClusterSpec::Parse(absl::GetFlag(FLAGS_servers));
    if (!spec.ok()) {
      std::fprintf(stderr, "ps_bench: --servers: %s\n",
                   std::string(spec.status().message()).c_str());
      return 2;
    }
    out->addresses = spec->servers;
    return 0;
  }
  const int n = absl::GetFlag(FLAGS_in_process_servers);
  for (int i = 0; i < n; ++i) {
    ServerOptions options;
    options.server_index = i;
    options.num_servers = n;
    options.placement.slice_size = absl::GetFlag(FLAGS_slice_size);
    auto server = PsServer::Start(options);
    if (!server.ok()) {
      std::fprintf(stderr, "ps_bench: %s\n", std::string(server.status().message()).c_str());
      return 1;
    }
    out->addresses.push_back((*server)->address());
    out->local.push_back(*std::move(server));
  }
  return 0;
}

int ConnectClients(const Servers& servers, std::vector<std::unique_ptr<PsClient>>* clients) {
  for (int w = 0; w < absl::GetFlag(FLAGS_clients); ++w) {
    PsClientOptions options;
    options.servers = servers.addresses;
    options.directory = servers.directory;
    options.worker_id = static_cast<uint32_t>(w);
    options.placement.slice_size = absl::GetFlag(FLAGS_slice_size);
    options.max_values_per_request = absl::GetFlag(FLAGS_max_values_per_request);
    if (absl::GetFlag(FLAGS_spin_wait_us) >= 0) {
      options.spin_wait = absl::Microseconds(absl::GetFlag(FLAGS_spin_wait_us));
    }
    auto client = PsClient::Connect(options);
    if (!client.ok()) {
      std::fprintf(stderr, "ps_bench: %s\n", std::string(client.status().message()).c_str());
      return 1;
    }
    clients->push_back(*std::move(client));
  }
  return 0;
}

// The cases the flags ask for, in the order they run.
int PlanCases(std::vector<Case>* cases) {
  const std::vector<std::string> ops =
      absl::StrSplit(absl::GetFlag(FLAGS_ops), ',', absl::SkipEmpty());
  for (const std::string& op : ops) {
    if (op != "push" && op != "pull" && op != "pushpull") {
      std::fprintf(stderr, "ps_bench: --ops: '%s' is not push, pull or pushpull\n", op.c_str());
      return 2;
    }
  }
  const auto inflight = ParseList("inflight", absl::GetFlag(FLAGS_inflight));
  for (int64_t n : ParseList("dense_values", absl::GetFlag(FLAGS_dense_values))) {
    for (const std::string& op : ops) {
      for (int64_t k : inflight)
        cases->push_back({"dense", op, static_cast<uint64_t>(n), 1, static_cast<int>(k)});
    }
  }
  if (absl::GetFlag(FLAGS_small_inflight) > 0) {
    cases->push_back({"dense", "push", 1024, 1, absl::GetFlag(FLAGS_small_inflight)});
  }
  if (absl::GetFlag(FLAGS_sparse_keys) > 0) {
    for (int64_t w : ParseList("sparse_widths", absl::GetFlag(FLAGS_sparse_widths))) {
      for (const std::string& op : ops) {
        for (const char* kind : {"sparse", "hashed"}) {
          if (std::string(kind) == "hashed" && !absl::GetFlag(FLAGS_sparse_tables)) continue;
          cases->push_back({kind, op, static_cast<uint64_t>(absl::GetFlag(FLAGS_sparse_keys)),
                            static_cast<uint32_t>(w), 1});
        }
      }
    }
  }
  return 0;
}

int Main() {
  if (absl::GetFlag(FLAGS_slice_size) < 1) {
    std::fprintf(stderr, "ps_bench: --slice_size=%llu must be >= 1\n",
                 static_cast<unsigned long long>(absl::GetFlag(FLAGS_slice_size)));
    return 2;
  }
  const int paired = absl::GetFlag(FLAGS_paired_blocks);
  if (paired < 0) {
    std::fprintf(stderr, "ps_bench: --paired_blocks=%d: must be 0 or more\n", paired);
    return 2;
  }
  std::vector<Case> cases;
  if (int rc = PlanCases(&cases); rc != 0) return rc;
  Servers servers;
  std::vector<std::unique_ptr<PsClient>> clients;
  if (int rc = FindServers(&servers); rc != 0) return rc;
  if (int rc = ConnectClients(servers, &clients); rc != 0) return rc;
  for (size_t i = 0; i < cases.size(); ++i) {
    // A key-list case on the dense table followed by its sparse table's.
    if (paired > 0 && cases[i].kind == "sparse" && i + 1 < cases.size() &&
        cases[i + 1].kind == "hashed") {
      if (int rc = RunPair(cases[i], cases[i + 1], clients[0].get(), static_cast<int>(i));
          rc != 0) {
        return rc;
      }
      ++i;
      continue;
    }
    if (int rc = RunCase(cases[i], clients, static_cast<int>(i)); rc != 0) return rc;
  }
  return 0;
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  ps::TuneProcessForDataPath();
  return ps::Main();
}
