// The disk tier's two candidate stores side by side (issue 32): RocksDB
// (RocksDbRowStore) and the project's own log (LogRowStore), on the same
// rows, in one run. For each store: loading --rows rows of --row_bytes
// bytes in batches (the write-back), overwriting a fifth of them at random
// (steady-state write-back), then reading requests of --read_batch keys
// (each request's keys slice by slice, one store read a slice) drawn
// uniformly and from Zipf laws (exponents 1.05 and 1.2, as in CTR
// data), first with the files in the page cache and then, when the process
// may drop the page cache (root), from the disk. Prints rows/s for each,
// disk bytes and memory bytes per row, and a snapshot's time; one RESULT
// line per store and phase. deploy/bench/row_store.sh runs it beside fio's
// figures for the same disk.
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <memory>
#include <random>
#include <string>
#include <utility>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "server/store/log_row_store.h"
#include "server/store/rocksdb_row_store.h"
#include "worker/train/libsvm_generator.h"

ABSL_FLAG(std::string, dir, "/tmp/row_store_bench", "directory for the stores (emptied first)");
ABSL_FLAG(std::string, stores, "rocksdb,log", "stores to measure, in this order");
ABSL_FLAG(int64_t, rows, 2000000, "rows loaded");
ABSL_FLAG(int64_t, row_bytes, 132,
          "bytes a row (132: width 16 with AdaGrad's accumulators and the change tag)");
ABSL_FLAG(int64_t, write_batch, 4096, "rows a write batch");
ABSL_FLAG(int64_t, read_batch, 512, "keys a read batch (one request's cold rows)");
ABSL_FLAG(int64_t, reads, 400000, "keys read in each read phase");
ABSL_FLAG(int64_t, slices, 1024, "slices the rows spread over");

namespace ps {
namespace {

// A 64-bit mixer (SplitMix64's finalizer).
uint64_t Mix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Row r's key and slice: spread like hashed feature ids.
uint64_t KeyOf(uint64_t r) { return Mix64(r + 1); }
uint32_t SliceOf(uint64_t key, uint64_t slices) { return static_cast<uint32_t>(key % slices); }

void FillRow(uint64_t key, uint32_t version, char* row, size_t bytes) {
  for (size_t i = 0; i + 8 <= bytes; i += 8) {
    const uint64_t v = Mix64(key ^ (uint64_t{version} << 40) ^ i);
    std::memcpy(row + i, &v, 8);
  }
}

bool DropPageCache() {
  sync();
  std::ofstream f("/proc/sys/vm/drop_caches");
  if (!f) return false;
  f << "1\n";
  return static_cast<bool>(f.flush());
}

void Die(const absl::Status& s) {
  std::fprintf(stderr, "row_store_bench: %s\n", s.ToString().c_str());
  std::exit(1);
}

absl::StatusOr<std::unique_ptr<RowStore>> OpenStore(const std::string& kind,
                                                    const RowStoreOptions& options) {
  if (kind == "rocksdb") {
    auto s = RocksDbRowStore::Open(options);
    if (!s.ok()) return s.status();
    return std::unique_ptr<RowStore>(std::move(*s));
  }
  if (kind == "log") {
    auto s = LogRowStore::Open(options);
    if (!s.ok()) return s.status();
    return std::unique_ptr<RowStore>(std::move(*s));
  }
  return absl::InvalidArgumentError(absl::StrCat("--stores: unknown store '", kind, "'"));
}

// Writes rows [0, n) of `order` (row numbers) at `version`, in batches.
double WriteRows(RowStore& store, const std::vector<uint64_t>& order, uint32_t version) {
  const size_t bytes = store.row_bytes();
  const size_t batch_rows = static_cast<size_t>(absl::GetFlag(FLAGS_write_batch));
  const uint64_t slices = static_cast<uint64_t>(absl::GetFlag(FLAGS_slices));
  std::vector<char> rows(batch_rows * bytes);
  const absl::Time start = absl::Now();
  for (size_t b = 0; b < order.size(); b += batch_rows) {
    RowStore::Batch batch;
    const size_t n = std::min(batch_rows, order.size() - b);
    for (size_t i = 0; i < n; ++i) {
      const uint64_t key = KeyOf(order[b + i]);
      FillRow(key, version, rows.data() + i * bytes, bytes);
      batch.puts.push_back({SliceOf(key, slices), key, rows.data() + i * bytes});
    }
    batch.meta = absl::StrCat("version ", version, " batch ", b);
    if (absl::Status s = store.Write(batch); !s.ok()) Die(s);
  }
  return static_cast<double>(order.size()) / absl::ToDoubleSeconds(absl::Now() - start);
}

// Reads `reads` keys in batches drawn by `draw` (a row number), checking
// every row read against `versions`. Returns rows/s.
template <typename Draw>
double ReadRows(const RowStore& store, int64_t reads, const std::vector<uint32_t>& versions,
                Draw draw) {
  const size_t bytes = store.row_bytes();
  const size_t batch = static_cast<size_t>(absl::GetFlag(FLAGS_read_batch));
  const uint64_t slices = static_cast<uint64_t>(absl::GetFlag(FLAGS_slices));
  std::vector<char> dst(batch * bytes), want(bytes);
  std::vector<uint64_t> rows, keys;
  std::unique_ptr<bool[]> found(new bool[batch]);
  int64_t done = 0;
  absl::Duration spent;
  std::vector<std::pair<uint32_t, uint64_t>> drawn;  // (slice, row)
  while (done < reads) {
    // One request's keys, read slice by slice (the store's batches).
    drawn.clear();
    for (size_t i = 0; i < batch; ++i) {
      const uint64_t r = draw();
      drawn.push_back({SliceOf(KeyOf(r), slices), r});
    }
    std::sort(drawn.begin(), drawn.end());
    for (size_t b = 0; b < drawn.size();) {
      size_t e = b;
      rows.clear();
      keys.clear();
      while (e < drawn.size() && drawn[e].first == drawn[b].first) {
        rows.push_back(drawn[e].second);
        keys.push_back(KeyOf(drawn[e].second));
        ++e;
      }
      const absl::Time start = absl::Now();
      if (absl::Status s = store.Read(drawn[b].first, keys, dst.data(), found.get()); !s.ok()) {
        Die(s);
      }
      spent += absl::Now() - start;
      for (size_t i = 0; i < keys.size(); ++i) {
        FillRow(keys[i], versions[rows[i]], want.data(), bytes);
        if (!found[i] || std::memcmp(dst.data() + i * bytes, want.data(), bytes) != 0) {
          Die(absl::DataLossError(absl::StrCat("row ", rows[i], " read back wrong")));
        }
      }
      b = e;
    }
    done += static_cast<int64_t>(drawn.size());
  }
  return static_cast<double>(done) / absl::ToDoubleSeconds(spent);
}

void Run(const std::string& kind) {
  const std::string dir = absl::StrCat(absl::GetFlag(FLAGS_dir), "/", kind);
  std::filesystem::remove_all(dir);
  RowStoreOptions options;
  options.dir = dir;
  options.row_bytes = static_cast<size_t>(absl::GetFlag(FLAGS_row_bytes));
  options.name = kind;
  auto opened = OpenStore(kind, options);
  if (!opened.ok()) Die(opened.status());
  RowStore& store = **opened;
  const uint64_t n = static_cast<uint64_t>(absl::GetFlag(FLAGS_rows));
  std::vector<uint64_t> order(n);
  for (uint64_t r = 0; r < n; ++r) order[r] = r;
  SplitMix64 rng(7);
  for (uint64_t r = n - 1; r > 0; --r) std::swap(order[r], order[rng.Next() % (r + 1)]);
  std::vector<uint32_t> versions(n, 1);
  const double load = WriteRows(store, order, 1);
  // A fifth rewritten at random: the cache's steady write-back.
  std::vector<uint64_t> again(order.begin(), order.begin() + n / 5);
  std::shuffle(again.begin(), again.end(), std::mt19937_64(11));
  for (uint64_t r : again) versions[r] = 2;
  const double overwrite = WriteRows(store, again, 2);
  const RowStoreStats stats = store.stats();
  const double disk_per_row = static_cast<double>(stats.disk_bytes) / static_cast<double>(n);
  const double memory_per_row = static_cast<double>(stats.memory_bytes) / static_cast<double>(n);
  std::printf(
      "%s: load %.0f rows/s, overwrite %.0f rows/s, %.1f disk bytes/row (%.2fx the row), "
      "%.1f memory bytes/row\n",
      kind.c_str(), load, overwrite, disk_per_row,
      disk_per_row / static_cast<double>(options.row_bytes), memory_per_row);
  std::printf(
      "RESULT store=%s phase=write load_rows_per_second=%.0f overwrite_rows_per_second=%.0f "
      "disk_bytes_per_row=%.1f memory_bytes_per_row=%.2f\n",
      kind.c_str(), load, overwrite, disk_per_row, memory_per_row);
  const int64_t reads = absl::GetFlag(FLAGS_reads);
  const ZipfSampler zipf105(n, 1.05), zipf12(n, 1.2);
  // Zipf rank k is row order[k - 1]: the popular rows lie anywhere.
  struct Law {
    const char* name;
    std::function<uint64_t()> draw;
  };
  std::vector<Law> laws = {
      {"uniform", [&] { return rng.Next() % n; }},
      {"zipf1.05", [&] { return order[zipf105.Sample(rng) - 1]; }},
      {"zipf1.2", [&] { return order[zipf12.Sample(rng) - 1]; }},
  };
  for (const bool cold : {false, true}) {
    if (cold && !DropPageCache()) {
      std::printf("%s: cannot drop the page cache (not root): no cold reads\n", kind.c_str());
      break;
    }
    for (const Law& law : laws) {
      if (cold && !DropPageCache()) break;
      const double rate = ReadRows(store, reads, versions, law.draw);
      std::printf("%s: read %s, %s page cache: %.0f rows/s\n", kind.c_str(), law.name,
                  cold ? "after dropping the" : "warm", rate);
      std::printf("RESULT store=%s phase=read keys=%s cache=%s rows_per_second=%.0f\n",
                  kind.c_str(), law.name, cold ? "cold" : "warm", rate);
    }
  }
  const absl::Time start = absl::Now();
  if (absl::Status s = store.Snapshot(dir + ".snapshot"); !s.ok()) Die(s);
  std::printf("RESULT store=%s phase=snapshot seconds=%.3f\n", kind.c_str(),
              absl::ToDoubleSeconds(absl::Now() - start));
  std::filesystem::remove_all(dir + ".snapshot");
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  for (absl::string_view kind : absl::StrSplit(absl::GetFlag(FLAGS_stores), ',')) {
    ps::Run(std::string(kind));
  }
  std::filesystem::remove_all(absl::GetFlag(FLAGS_dir));
  return 0;
}
