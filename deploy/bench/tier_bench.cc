// A tiered sparse table against the same table in memory (issue 32's
// benchmark), in one process and one run: a width-16 AdaGrad table of
// --rows rows, every row pushed once, whose tiered copy keeps
// --cache_fraction of its rows in memory; then requests of --batch distinct
// keys drawn from a Zipf law (each --exponents value in turn), each a push
// with the values read back (ShardStore::PushAndRead: the PushPull RPC's
// work on the server), alternating between the two tables in blocks of 50
// requests. Prints keys/s of each, their ratio, the tiered table's cache
// hit rate, and its bytes on disk and in memory per row. The keys of a
// request come grouped by slice, as the client's planner sends them. The
// requests come from one thread; the tiered table's demoter moves rows to
// disk on its own thread meanwhile, as it does in a server. With --rpc,
// the same through gRPC: both tables on a ps_server started in this
// process, the requests PushPull RPCs of a PsClient (what a worker sees).
// With --cold, the tiered table's segment files are paged out before each
// block of its requests, so that its misses read the disk. With
// --checkpoints=N, after the warm-up, N full checkpoints of the tiered
// table each way instead of requests (deploy/bench/tier_bench_checkpoint.h).
#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "common/key_spec.h"
#include "common/optimizer/optimizer.h"
#include "common/placement.h"
#include "common/process_tuning.h"
#include "deploy/bench/tier_bench_checkpoint.h"
#include "server/ps_server.h"
#include "server/store/shard_store.h"
#include "worker/client/ps_client.h"
#include "worker/train/libsvm_generator.h"

ABSL_FLAG(std::string, dir, "/var/tmp/tier_bench", "the tiered table's directory (emptied)");
ABSL_FLAG(int64_t, rows, 2000000, "rows of the table");
ABSL_FLAG(double, cache_fraction, 0.1, "rows the tiered table keeps in memory, as a fraction");
ABSL_FLAG(int64_t, batch, 512, "distinct keys a request");
ABSL_FLAG(int64_t, requests, 2000, "requests measured on each table for each exponent");
ABSL_FLAG(int64_t, warmup_requests, 8000, "requests to the tiered table before measuring");
ABSL_FLAG(std::string, exponents, "1.05,1.2", "Zipf exponents of the keys");
ABSL_FLAG(bool, cold, false,
          "the tiered table's files out of memory before each block of its requests (the "
          "process's mappings of them paged out, MADV_PAGEOUT): every miss reads the disk");
ABSL_FLAG(int32_t, checkpoints, 0,
          "N > 0: after the warm-up, N full checkpoints of the tiered table with its rows on "
          "disk read into records and N with them in a snapshot of its store, alternated, "
          "instead of the requests (not with --rpc)");
ABSL_FLAG(bool, rpc, false,
          "through a ps_server in this process (PushPull RPCs of a PsClient over gRPC) instead "
          "of calls to the servers' store");

namespace ps {
namespace {

constexpr uint32_t kWidth = 16;
constexpr uint32_t kBuckets = 1024;

// The tables: 0 tiered, 1 in memory.
constexpr const char* kNames[2] = {"ctr/tiered", "ctr/memory"};

proto::TableDef Def(uint64_t cache_mb) {
  proto::TableDef def;
  def.set_name(kNames[cache_mb > 0 ? 0 : 1]);
  def.set_kind(proto::TABLE_SPARSE);
  def.set_width(kWidth);
  def.set_num_buckets(kBuckets);
  def.set_initializer(proto::INIT_UNIFORM);
  def.set_init_low(-0.05f);
  def.set_init_high(0.05f);
  def.set_optimizer(proto::OPT_ADAGRAD);
  def.set_learning_rate(0.05f);
  def.set_initial_accumulator(0.1f);
  def.set_epsilon(1e-8f);
  if (cache_mb > 0) {
    def.set_storage(proto::STORAGE_TIERED);
    def.set_cache_mb(cache_mb);
  }
  return def;
}

void Die(const absl::Status& s) {
  std::fprintf(stderr, "tier_bench: %s\n", s.ToString().c_str());
  std::exit(1);
}

// Pages out this process's mappings of files under `dir` (the tiered
// table's segments): their pages leave the page cache, as they would
// under memory pressure.
void PageOutMappingsUnder(const std::string& dir) {
  std::FILE* maps = std::fopen("/proc/self/maps", "r");
  if (maps == nullptr) Die(absl::InternalError("reading /proc/self/maps"));
  char line[4096];
  while (std::fgets(line, sizeof line, maps) != nullptr) {
    const char* path = std::strchr(line, '/');
    unsigned long long start = 0, end = 0;
    if (path == nullptr || std::strncmp(path, dir.c_str(), dir.size()) != 0 ||
        std::sscanf(line, "%llx-%llx", &start, &end) != 2) {
      continue;
    }
    // ENOMEM: unmapped meanwhile (a segment compacted away).
    if (madvise(reinterpret_cast<void*>(start), end - start, MADV_PAGEOUT) != 0 &&
        errno != ENOMEM) {
      Die(absl::InternalError(absl::StrCat("madvise(MADV_PAGEOUT) of ", path, ": errno ", errno)));
    }
  }
  std::fclose(maps);
}

// Rank r's key: spread like hashed feature ids.
uint64_t KeyOf(uint64_t r) { return (r + 1) * 0x9e3779b97f4a7c15ULL; }

// Sorts keys by slice, as the client's planner sends them.
void BySlice(std::vector<uint64_t>* keys) {
  std::sort(keys->begin(), keys->end(), [](uint64_t a, uint64_t b) {
    return Placement::SparseSliceOf(a, kBuckets) < Placement::SparseSliceOf(b, kBuckets);
  });
}

// The two tables and how a request reaches them: index 0 the tiered one,
// 1 the one in memory.
class Tables {
 public:
  virtual ~Tables() = default;
  // One request: push grads to keys, read the values back into *out.
  virtual void PushPull(int t, const std::vector<uint64_t>& keys, const std::vector<float>& grads,
                        std::vector<float>* out) = 0;
  // The tiered table's statistics.
  virtual proto::TableStats Stats() = 0;
};

// The servers' store, called directly (ShardStore::PushAndRead: the
// PushPull RPC's work on the server).
class StoreTables : public Tables {
 public:
  StoreTables(const std::string& dir, uint64_t cache_mb)
      : tiered_(0, Placement(1), Limits(dir)), memory_(0, Placement(1)) {
    if (auto s = tiered_.CreateTable(Def(cache_mb)); !s.ok()) Die(s.status());
    if (auto s = memory_.CreateTable(Def(0)); !s.ok()) Die(s.status());
  }
  void PushPull(int t, const std::vector<uint64_t>& keys, const std::vector<float>& grads,
                std::vector<float>* out) override {
    out->resize(keys.size() * kWidth);
    absl::StatusOr<ShardStore::PushResult> r =
        (t == 0 ? tiered_ : memory_)
            .PushAndRead(
                kNames[t], KeySpec::List(keys),
                absl::MakeConstSpan(grads.data(), keys.size() * kWidth), 1,
                [] { return absl::StatusOr<bool>(true); },
                [&](size_t) { return reinterpret_cast<char*>(out->data()); });
    if (!r.ok()) Die(r.status());
  }
  ShardStore& tiered() { return tiered_; }
  proto::TableStats Stats() override {
    proto::TableStats stats;
    stats.set_table(kNames[0]);
    tiered_.FillSparseStats(&stats);
    return stats;
  }

 private:
  static StoreLimits Limits(const std::string& dir) {
    StoreLimits limits;
    limits.table_dir = dir;
    return limits;
  }
  ShardStore tiered_, memory_;
};

// A ps_server in this process holding both tables, and a PsClient.
class RpcTables : public Tables {
 public:
  RpcTables(const std::string& dir, uint64_t cache_mb) {
    ServerOptions options;
    options.limits.table_dir = dir;
    options.limits.memory_budget_bytes = uint64_t{4} << 30;
    absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start(options);
    if (!server.ok()) Die(server.status());
    server_ = *std::move(server);
    PsClientOptions client;
    client.servers = {server_->address()};
    absl::StatusOr<std::unique_ptr<PsClient>> connected = PsClient::Connect(client);
    if (!connected.ok()) Die(connected.status());
    client_ = *std::move(connected);
    if (auto s = client_->CreateTable(Def(cache_mb)); !s.ok()) Die(s);
    if (auto s = client_->CreateTable(Def(0)); !s.ok()) Die(s);
  }
  ~RpcTables() override {
    client_.reset();
    server_->Shutdown();
    server_->Wait();
  }
  void PushPull(int t, const std::vector<uint64_t>& keys, const std::vector<float>& grads,
                std::vector<float>* out) override {
    out->resize(keys.size() * kWidth);
    if (auto s = client_->PushPullKeys(kNames[t], keys, kWidth,
                                       absl::MakeConstSpan(grads.data(), keys.size() * kWidth),
                                       absl::MakeSpan(*out), ++clock_);
        !s.ok()) {
      Die(s);
    }
  }
  proto::TableStats Stats() override {
    absl::StatusOr<std::vector<ServerStats>> stats = client_->Stats();
    if (!stats.ok()) Die(stats.status());
    for (const proto::TableStats& table : (*stats)[0].stats.tables()) {
      if (table.table() == kNames[0]) return table;
    }
    Die(absl::NotFoundError("the server has no table ctr/tiered"));
    return {};
  }

 private:
  std::unique_ptr<PsServer> server_;
  std::unique_ptr<PsClient> client_;
  uint64_t clock_ = 0;
};

void Run(double exponent) {
  const uint64_t n = static_cast<uint64_t>(absl::GetFlag(FLAGS_rows));
  const std::string dir = absl::GetFlag(FLAGS_dir);
  std::filesystem::remove_all(dir);
  // A cache_mb that holds --cache_fraction of the rows (the table's own
  // measure of its maps and chunks), rounded up to MiB.
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(Def(0));
  if (!optimizer.ok()) Die(optimizer.status());
  const uint64_t cached_rows = static_cast<uint64_t>(absl::GetFlag(FLAGS_cache_fraction) * n);
  const uint64_t cache_mb =
      (SparseTable::CacheBytes(Def(0), **optimizer, cached_rows, kBuckets) + (1 << 20) - 1) >> 20;
  std::unique_ptr<Tables> tables;
  if (absl::GetFlag(FLAGS_rpc)) {
    tables = std::make_unique<RpcTables>(dir, cache_mb);
  } else {
    tables = std::make_unique<StoreTables>(dir, cache_mb);
  }
  std::vector<float> grads(size_t{4096} * kWidth, 0.01f), out;
  // Every row pushed once.
  const absl::Time fill = absl::Now();
  std::vector<uint64_t> keys;
  for (uint64_t b = 0; b < n; b += 4096) {
    keys.clear();
    for (uint64_t r = b; r < std::min(n, b + 4096); ++r) keys.push_back(KeyOf(r));
    BySlice(&keys);
    tables->PushPull(0, keys, grads, &out);
    tables->PushPull(1, keys, grads, &out);
  }
  std::printf(
      "zipf %.2f: %llu rows pushed once to both tables in %.1f s; cache %llu MiB (%llu rows)\n",
      exponent, static_cast<unsigned long long>(n), absl::ToDoubleSeconds(absl::Now() - fill),
      static_cast<unsigned long long>(cache_mb), static_cast<unsigned long long>(cached_rows));
  const ZipfSampler zipf(n, exponent);
  SplitMix64 rng(11);
  const size_t batch = static_cast<size_t>(absl::GetFlag(FLAGS_batch));
  absl::flat_hash_set<uint64_t> seen;
  auto draw = [&] {
    keys.clear();
    seen.clear();
    while (keys.size() < batch) {
      const uint64_t key = KeyOf(zipf.Sample(rng) - 1);
      if (seen.insert(key).second) keys.push_back(key);
    }
    BySlice(&keys);
  };
  // The cache learns the popular rows first (its counts age every 8x its
  // rows pushed: a few such periods).
  for (int64_t i = 0; i < absl::GetFlag(FLAGS_warmup_requests); ++i) {
    draw();
    tables->PushPull(0, keys, grads, &out);
  }
  const bool cold = absl::GetFlag(FLAGS_cold);
  if (const int32_t checkpoints = absl::GetFlag(FLAGS_checkpoints); checkpoints > 0) {
    auto* store = dynamic_cast<StoreTables*>(tables.get());
    if (store == nullptr) Die(absl::InvalidArgumentError("--checkpoints is not for --rpc"));
    RunTierCheckpoints(store->tiered(), kNames[0], dir, checkpoints, cold, PageOutMappingsUnder);
    return;
  }
  const proto::TableStats before = tables->Stats();
  const int64_t requests = absl::GetFlag(FLAGS_requests);
  absl::Duration spent[2];
  for (int64_t done = 0; done < requests; done += 50) {
    for (int t = 0; t < 2; ++t) {
      if (cold && t == 0) PageOutMappingsUnder(dir);
      SplitMix64 block_rng(static_cast<uint64_t>(done) + 1);  // the same keys on both
      rng = block_rng;
      for (int i = 0; i < 50; ++i) {
        draw();
        const absl::Time start = absl::Now();
        tables->PushPull(t, keys, grads, &out);
        spent[t] += absl::Now() - start;
      }
    }
  }
  const proto::TableStats after = tables->Stats();
  const double keys_total = static_cast<double>(requests) * static_cast<double>(batch);
  const double rate_tiered = keys_total / absl::ToDoubleSeconds(spent[0]);
  const double rate_memory = keys_total / absl::ToDoubleSeconds(spent[1]);
  const double hits = static_cast<double>(after.cache_hits() - before.cache_hits());
  const double misses = static_cast<double>(after.cache_misses() - before.cache_misses());
  const double disk_per_row = static_cast<double>(after.disk_bytes()) / static_cast<double>(n);
  std::printf(
      "zipf %.2f: push+pull %.0f keys/s tiered, %.0f in memory (%.2fx); cache hit rate %.3f; "
      "%llu rows in memory, %llu on disk, %.1f disk bytes a row\n",
      exponent, rate_tiered, rate_memory, rate_tiered / rate_memory, hits / (hits + misses),
      static_cast<unsigned long long>(after.rows()),
      static_cast<unsigned long long>(after.disk_rows()), disk_per_row);
  std::printf(
      "RESULT path=%s%s exponent=%.2f rows=%llu cache_mb=%llu tiered_keys_per_second=%.0f "
      "memory_keys_per_second=%.0f ratio=%.3f hit_rate=%.4f disk_bytes_per_row=%.1f\n",
      absl::GetFlag(FLAGS_rpc) ? "rpc" : "store", cold ? "_cold" : "", exponent,
      static_cast<unsigned long long>(n), static_cast<unsigned long long>(cache_mb), rate_tiered,
      rate_memory, rate_tiered / rate_memory, hits / (hits + misses), disk_per_row);
  std::fflush(stdout);
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  ps::TuneProcessForDataPath();  // as ps_server does
  for (absl::string_view e : absl::StrSplit(absl::GetFlag(FLAGS_exponents), ',')) {
    double exponent = 0;
    if (!absl::SimpleAtod(e, &exponent) || !(exponent > 0)) {
      std::fprintf(stderr, "tier_bench: --exponents: '%s' is not a positive number\n",
                   std::string(e).c_str());
      return 2;
    }
    ps::Run(exponent);
  }
  std::filesystem::remove_all(absl::GetFlag(FLAGS_dir));
  return 0;
}
