// LogRowStore: the RowStore conformance suite, then what is particular to a
// log: torn writes, damage, compaction (disk per row, no erased row coming
// back), memory per row, the budget, a failing disk, snapshots, concurrency.
#include "server/store/log_row_store.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/row_store_conformance.h"
#include "tests/test_util/temp_dir.h"

namespace ps {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

// The suite on production-size segments, and on segments of 4 KiB (68 of
// its rows), where its batches span segments and its overwrites compact.
template <uint64_t kSegmentBytes>
absl::StatusOr<std::unique_ptr<RowStore>> OpenLog(const RowStoreOptions& options) {
  LogRowStoreOptions log;
  if (kSegmentBytes > 0) log.segment_bytes = kSegmentBytes;
  absl::StatusOr<std::unique_ptr<LogRowStore>> store = LogRowStore::Open(options, log);
  if (!store.ok()) return store.status();
  return std::unique_ptr<RowStore>(*std::move(store));
}
INSTANTIATE_TEST_SUITE_P(Log, RowStoreConformanceTest,
                         ::testing::Values(&OpenLog<0>, &OpenLog<4096>));

constexpr size_t kRow = 136;
constexpr size_t kUnit = LogRowStore::kHeaderBytes + kRow;

// The row of (key, version): the version in its first 4 bytes, then bytes
// of both.
std::string RowOf(uint64_t key, uint32_t version, size_t bytes = kRow) {
  std::string row(bytes, '\0');
  for (size_t i = 0; i < bytes; ++i) {
    row[i] = static_cast<char>((key * 0x9E3779B97F4A7C15ull + version * 131 + i * 7) >> 13);
  }
  std::memcpy(row.data(), &version, std::min<size_t>(4, bytes));
  return row;
}
uint32_t VersionOf(const char* row) {
  uint32_t version;
  std::memcpy(&version, row, 4);
  return version;
}

// Bytes this process has written so far (/proc/self/io), 0 when unknown.
uint64_t BytesWritten() {
  std::ifstream io("/proc/self/io");
  std::string name;
  uint64_t rchar = 0, wchar = 0;
  io >> name >> rchar >> name >> wchar;
  return wchar;
}

std::vector<fs::path> SegmentFiles(const std::string& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".log") files.push_back(entry.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}
uint64_t FileBytes(const std::string& dir) {
  uint64_t bytes = 0;
  for (const fs::path& file : SegmentFiles(dir)) bytes += fs::file_size(file);
  return bytes;
}
std::vector<uint64_t> Keys(uint64_t from, uint64_t to) {
  std::vector<uint64_t> keys(to - from);
  std::iota(keys.begin(), keys.end(), from);
  return keys;
}
// Overwrites `bytes` at `off` of `file` (past its end: appends).
void Scribble(const fs::path& file, uint64_t off, const std::string& bytes) {
  std::fstream f(file, std::ios::in | std::ios::out | std::ios::binary);
  f.seekp(static_cast<std::streamoff>(off));
  ASSERT_TRUE(f.write(bytes.data(), static_cast<std::streamsize>(bytes.size())).flush()) << file;
}

// A store in a fresh directory and what it should hold.
class LogRowStoreTest : public ::testing::Test {
 protected:
  void SetUp() override { dir_ = TestRoot("log_row_store"); }

  absl::StatusOr<std::unique_ptr<LogRowStore>> Open(uint64_t segment_bytes, uint64_t budget = 0,
                                                    std::string dir = "") {
    RowStoreOptions options;
    options.dir = dir.empty() ? dir_ : dir;
    options.row_bytes = kRow;
    options.disk_budget_bytes = budget;
    options.name = "table t/e on server 3";
    LogRowStoreOptions log;
    log.segment_bytes = segment_bytes;
    return LogRowStore::Open(options, log);
  }
  std::unique_ptr<LogRowStore> MustOpen(uint64_t segment_bytes, uint64_t budget = 0) {
    absl::StatusOr<std::unique_ptr<LogRowStore>> store = Open(segment_bytes, budget);
    EXPECT_TRUE(store.ok()) << store.status();
    return store.ok() ? *std::move(store) : nullptr;
  }

  // Writes one batch: puts of `keys` of `slice` at `version`, erases,
  // dropped slices; the model follows when it is acknowledged.
  absl::Status Write(RowStore& store, uint32_t slice, const std::vector<uint64_t>& keys,
                     uint32_t version, const std::vector<uint64_t>& erases = {},
                     const std::vector<uint32_t>& drops = {}, const std::string& meta = "") {
    std::vector<std::string> rows;
    rows.reserve(keys.size());
    RowStore::Batch batch;
    for (uint64_t key : keys) {
      rows.push_back(RowOf(key, version));
      batch.puts.push_back({slice, key, rows.back().data()});
    }
    for (uint64_t key : erases) batch.erases.push_back({slice, key});
    batch.dropped_slices = drops, batch.meta = meta, batch.readers_may_see_parts = parts_;
    absl::Status s = store.Write(batch);
    if (!s.ok()) return s;
    for (uint32_t dropped : drops) {
      for (auto it = model_.begin(); it != model_.end();) {
        if (it->first.first == dropped) gone_.insert(it->first);
        it = it->first.first == dropped ? model_.erase(it) : std::next(it);
      }
    }
    for (uint64_t key : keys) model_[{slice, key}] = version, gone_.erase({slice, key});
    for (uint64_t key : erases) model_.erase({slice, key}), gone_.insert({slice, key});
    return s;
  }

  // The store holds the model's rows exactly, and none of the gone ones.
  void ExpectModel(const RowStore& store) {
    std::map<uint32_t, std::vector<uint64_t>> held, gone;
    for (const auto& [id, version] : model_) held[id.first].push_back(id.second);
    for (const auto& id : gone_) gone[id.first].push_back(id.second);
    for (const auto* slices : {&held, &gone}) {
      for (const auto& [slice, keys] : *slices) {
        std::vector<char> dst(keys.size() * kRow);
        std::unique_ptr<bool[]> found(new bool[keys.size()]);
        ASSERT_TRUE(store.Read(slice, keys, dst.data(), found.get()).ok());
        for (size_t i = 0; i < keys.size(); ++i) {
          const auto it = model_.find({slice, keys[i]});
          ASSERT_EQ(found[i], it != model_.end()) << "slice " << slice << " key " << keys[i];
          if (!found[i]) continue;
          ASSERT_EQ(std::string(&dst[i * kRow], kRow), RowOf(keys[i], it->second))
              << "slice " << slice << " key " << keys[i];
        }
      }
    }
    for (const auto& entry : held) {  // ForEach lists the same rows
      const uint32_t slice = entry.first;
      size_t listed = 0;
      auto check = [&](uint64_t key, const char* row) {
        ++listed;
        const auto it = model_.find({slice, key});
        EXPECT_TRUE(it != model_.end() && std::string(row, kRow) == RowOf(key, it->second))
            << "slice " << slice << " key " << key;
        return absl::OkStatus();
      };
      ASSERT_TRUE(store.ForEach(slice, check).ok());
      EXPECT_EQ(listed, entry.second.size()) << "slice " << slice;
    }
    EXPECT_EQ(store.stats().rows, model_.size());
  }

  std::string dir_;
  bool parts_ = false;  // Write's batches: readers may see them in parts
  std::map<std::pair<uint32_t, uint64_t>, uint32_t> model_;
  std::set<std::pair<uint32_t, uint64_t>> gone_;
};

TEST_F(LogRowStoreTest, WritesReadsOverwritesAndErases) {
  std::unique_ptr<LogRowStore> store = MustOpen(64 << 10);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(Write(*store, 1, Keys(0, 100), 1).ok());
  // A missing key: found false, its bytes left as they were.
  std::vector<char> dst(2 * kRow, 'x');
  bool found[2];
  const std::vector<uint64_t> two = {7, 1000};
  ASSERT_TRUE(store->Read(1, two, dst.data(), found).ok());
  EXPECT_TRUE(found[0] && !found[1]);
  EXPECT_EQ(std::string(&dst[kRow], kRow), std::string(kRow, 'x'));
  // Overwrites, erases (one of a key without a row), and a put erased in
  // its own batch.
  ASSERT_TRUE(Write(*store, 1, Keys(50, 150), 2, {3, 5, 999}).ok());
  ASSERT_TRUE(Write(*store, 1, {500}, 3, {500}).ok());
  ExpectModel(*store);
  // ForEach stops at fn's first error.
  int calls = 0;
  const absl::Status stop = store->ForEach(1, [&](uint64_t, const char*) {
    return ++calls == 3 ? absl::CancelledError("enough") : absl::OkStatus();
  });
  EXPECT_EQ(stop.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(calls, 3);
  store.reset();
  store = MustOpen(64 << 10);
  ASSERT_NE(store, nullptr);
  ExpectModel(*store);
  // Another row size, or a second store on the directory, is refused.
  absl::StatusOr<std::unique_ptr<LogRowStore>> again = Open(64 << 10);
  EXPECT_EQ(again.status().code(), absl::StatusCode::kFailedPrecondition) << again.status();
  store.reset();
  RowStoreOptions options{dir_, kRow + 4, 0, "wide"};
  EXPECT_EQ(LogRowStore::Open(options).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST_F(LogRowStoreTest, MetaIsTheLastBatchsAndSurvivesCompactionAndReopen) {
  std::unique_ptr<LogRowStore> store = MustOpen(8 << 10);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->meta(), "");
  ASSERT_TRUE(Write(*store, 0, Keys(0, 200), 1, {}, {}, "epoch 2 seq 7").ok());
  // Overwrites without meta, enough for compaction to delete the segment
  // that had the meta's batch.
  for (uint32_t v = 2; v < 12; ++v) ASSERT_TRUE(Write(*store, 0, Keys(0, 200), v).ok());
  EXPECT_EQ(store->meta(), "epoch 2 seq 7");
  store.reset();
  store = MustOpen(8 << 10);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->meta(), "epoch 2 seq 7");
  ExpectModel(*store);
}

TEST_F(LogRowStoreTest, DroppedSlicesAndErasedKeysStayGoneThroughCompaction) {
  // Segments of 52 rows: tombstones and dropped slices get copied on by
  // compaction, or left behind once no older segment has their rows.
  std::unique_ptr<LogRowStore> store = MustOpen(52 * kUnit);
  ASSERT_NE(store, nullptr);
  std::mt19937_64 rng(7);
  for (uint32_t slice = 0; slice < 4; ++slice)
    ASSERT_TRUE(Write(*store, slice, Keys(0, 500), 1).ok());
  for (uint32_t round = 2; round < 60; ++round) {
    const uint32_t slice = round % 4;
    std::vector<uint64_t> puts, erases;
    for (int i = 0; i < 80; ++i) puts.push_back(rng() % 600);
    for (int i = 0; i < 30; ++i) erases.push_back(rng() % 600);
    std::vector<uint32_t> drops;
    if (round % 9 == 0) drops.push_back((slice + 1) % 4);
    ASSERT_TRUE(Write(*store, slice, puts, round, erases, drops).ok());
    if (round % 20 == 0) {
      store.reset();
      store = MustOpen(52 * kUnit);
      ASSERT_NE(store, nullptr);
    }
  }
  ExpectModel(*store);
  const RowStoreStats stats = store->stats();
  EXPECT_EQ(stats.disk_bytes, FileBytes(dir_));
  EXPECT_LE(stats.disk_bytes, 3 * stats.rows * kUnit) << "tombstones pile up";
  store.reset();
  store = MustOpen(52 * kUnit);
  ASSERT_NE(store, nullptr);
  ExpectModel(*store);
}

TEST_F(LogRowStoreTest, TombstonesOutliveTheSegmentsTheyWereWrittenIn) {
  std::unique_ptr<LogRowStore> store = MustOpen(52 * kUnit);
  ASSERT_NE(store, nullptr);
  // Cold rows in 40 segments, 1 in 40 of slice 2: all stay > 90% live.
  RowStore::Batch cold;
  std::vector<std::string> rows;
  rows.reserve(2000);
  for (uint64_t key = 0; key < 2000; ++key) {
    const uint32_t slice = key % 40 == 0 ? 2 : 0;
    rows.push_back(RowOf(key, 1));
    cold.puts.push_back({slice, key, rows.back().data()});
    model_[{slice, key}] = 1;
  }
  ASSERT_TRUE(store->Write(cold).ok());
  ASSERT_TRUE(store->Snapshot(dir_ + ".snap").ok());  // seals the head
  // In a segment of their own that hot rows fill: 1 in 40 cold keys
  // erased, slice 2 dropped, then a few rows of it put again.
  std::vector<uint64_t> erased;
  for (uint64_t key = 1; key < 2000; key += 40) erased.push_back(key);
  ASSERT_TRUE(Write(*store, 0, {}, 2, erased, {2}).ok());
  ASSERT_TRUE(Write(*store, 2, Keys(5000, 5010), 3).ok());
  for (uint32_t v = 4; v < 40; ++v) ASSERT_TRUE(Write(*store, 1, Keys(0, 100), v).ok());
  store.reset();
  store = MustOpen(52 * kUnit);
  ASSERT_NE(store, nullptr);
  ExpectModel(*store);
}

TEST_F(LogRowStoreTest, ATornBatchIsCutOnOpen) {
  std::unique_ptr<LogRowStore> store = MustOpen(16 * kUnit);  // 15 rows a segment
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(Write(*store, 0, Keys(0, 40), 1, {}, {}, "one").ok());
  ASSERT_TRUE(Write(*store, 0, Keys(20, 60), 2, {}, {}, "two").ok());
  const auto model = model_;
  const auto gone = gone_;
  // A batch of 50 rows over 4 segments, its commit record lost.
  ASSERT_TRUE(Write(*store, 0, Keys(30, 80), 3, {}, {}, "three").ok());
  store.reset();
  model_ = model, gone_ = gone;
  for (uint64_t key = 60; key < 80; ++key) gone_.insert({0, key});
  const std::vector<fs::path> files = SegmentFiles(dir_);
  fs::resize_file(files.back(), fs::file_size(files.back()) - kUnit);
  store = MustOpen(16 * kUnit);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->meta(), "two");
  ExpectModel(*store);
  EXPECT_LT(SegmentFiles(dir_).size(), files.size()) << "the batch's segments are deleted";
  EXPECT_EQ(store->stats().disk_bytes, FileBytes(dir_));
  // Garbage after the last batch: cut, the batches before intact.
  ASSERT_TRUE(Write(*store, 0, Keys(100, 110), 4, {}, {}, "four").ok());
  store.reset();
  const fs::path last = SegmentFiles(dir_).back();
  const uint64_t size = fs::file_size(last);
  std::string garbage(kUnit + 37, '\0');
  for (char& c : garbage) c = static_cast<char>(std::rand());
  Scribble(last, size, garbage);
  store = MustOpen(16 * kUnit);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(fs::file_size(last), size);
  EXPECT_EQ(store->meta(), "four");
  ExpectModel(*store);
}

TEST_F(LogRowStoreTest, DamagedRecordsAreDataLoss) {
  std::unique_ptr<LogRowStore> store = MustOpen(16 * kUnit);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(Write(*store, 5, Keys(0, 60), 1).ok());
  // Key 0's row is the first record after the first segment's header.
  const fs::path first = SegmentFiles(dir_).front();
  Scribble(first, kUnit + LogRowStore::kHeaderBytes + 9, "?");
  std::vector<char> dst(kRow);
  bool found;
  const absl::Status read = store->Read(5, std::vector<uint64_t>{0}, dst.data(), &found);
  EXPECT_EQ(read.code(), absl::StatusCode::kDataLoss) << read;
  EXPECT_THAT(std::string(read.message()), HasSubstr(first.string()));
  EXPECT_THAT(std::string(read.message()), HasSubstr(absl::StrCat("offset ", kUnit)));
  EXPECT_THAT(std::string(read.message()), HasSubstr("table t/e on server 3"));
  store.reset();
  // Damage with later segments after it is no torn write.
  const absl::Status open = Open(16 * kUnit).status();
  EXPECT_EQ(open.code(), absl::StatusCode::kDataLoss) << open;
  EXPECT_THAT(std::string(open.message()), HasSubstr(first.string()));
}

TEST_F(LogRowStoreTest, CompactionKeepsDiskPerRowUnderOneAndAHalfRows) {
  std::unique_ptr<LogRowStore> store = MustOpen(64 << 10);
  ASSERT_NE(store, nullptr);
  constexpr uint64_t kKeys = 10000;
  for (uint64_t k = 0; k < kKeys; k += 1000)
    ASSERT_TRUE(Write(*store, 0, Keys(k, k + 1000), 1).ok());
  std::mt19937_64 rng(11);
  double worst = 0;
  const uint64_t written = BytesWritten();
  for (uint32_t round = 2; round < 102; ++round) {  // 10x the rows overwritten
    std::vector<uint64_t> keys(1000);
    for (uint64_t& key : keys) key = rng() % kKeys;
    ASSERT_TRUE(Write(*store, 0, keys, round).ok());
    if (round > 30) {
      const RowStoreStats stats = store->stats();
      worst = std::max(worst, static_cast<double>(stats.disk_bytes) / stats.rows);
    }
  }
  const RowStoreStats stats = store->stats();
  std::printf(
      "disk bytes per row after 10x overwrites: %.1f (%.2fx row_bytes; worst %.1f); "
      "bytes written per byte of rows put: %.2f\n",
      static_cast<double>(stats.disk_bytes) / stats.rows,
      static_cast<double>(stats.disk_bytes) / stats.rows / kRow, worst,
      static_cast<double>(BytesWritten() - written) / (100 * 1000 * kRow));
  EXPECT_LE(worst, 1.5 * kRow);
  EXPECT_EQ(stats.disk_bytes, FileBytes(dir_));
  ExpectModel(*store);
  store.reset();
  store = MustOpen(64 << 10);
  ASSERT_NE(store, nullptr);
  ExpectModel(*store);
  EXPECT_EQ(store->stats().disk_bytes, stats.disk_bytes);
}

TEST_F(LogRowStoreTest, MemoryPerRowIsAtMostSixteenBytes) {
  std::unique_ptr<LogRowStore> store = MustOpen(4 << 20);
  ASSERT_NE(store, nullptr);
  std::vector<std::string> rows(20000, std::string(kRow, 'r'));
  for (uint64_t k = 0; k < 200000; k += rows.size()) {
    RowStore::Batch batch;
    for (uint64_t i = 0; i < rows.size(); ++i)
      batch.puts.push_back({static_cast<uint32_t>((k + i) % 8), k + i, rows[i].data()});
    ASSERT_TRUE(store->Write(batch).ok());
  }
  const RowStoreStats stats = store->stats();
  ASSERT_EQ(stats.rows, 200000u);
  EXPECT_LE(static_cast<double>(stats.memory_bytes) / stats.rows, 16.0);
}

// Bytes per row at every 10^4 rows from 10^5 to 10^6, 8 slices (rows of 8
// bytes to keep the files small: the index does not depend on them).
TEST_F(LogRowStoreTest, MemorySweep) {
  RowStoreOptions options{dir_, 8, 0, "sweep"};
  LogRowStoreOptions log;
  log.segment_bytes = 16 << 20;
  absl::StatusOr<std::unique_ptr<LogRowStore>> store = LogRowStore::Open(options, log);
  ASSERT_TRUE(store.ok()) << store.status();
  const std::string row(8, 'r');
  double worst = 0, sum = 0;
  int samples = 0;
  for (uint64_t k = 0; k < 1000000; k += 10000) {
    RowStore::Batch batch;
    for (uint64_t key = k; key < k + 10000; ++key)
      batch.puts.push_back({static_cast<uint32_t>(key % 8), key * 7919, row.data()});
    ASSERT_TRUE((*store)->Write(batch).ok());
    const RowStoreStats stats = (*store)->stats();
    if (stats.rows < 100000) continue;
    const double per_row = static_cast<double>(stats.memory_bytes) / stats.rows;
    worst = std::max(worst, per_row), sum += per_row, ++samples;
  }
  std::printf("memory bytes per row, 1e5..1e6 rows: worst %.2f, mean %.2f\n", worst, sum / samples);
  EXPECT_LE(worst, 16.0);
}

TEST_F(LogRowStoreTest, ABatchPastTheBudgetIsRefusedAndOverwritesStillFit) {
  constexpr uint64_t kBudget = 256 << 10;
  std::unique_ptr<LogRowStore> store = MustOpen(16 << 10, kBudget);
  ASSERT_NE(store, nullptr);
  ASSERT_TRUE(Write(*store, 0, Keys(0, 1000), 1, {}, {}, "full").ok());  // 60% of the budget
  const RowStoreStats before = store->stats();
  const absl::Status refused = Write(*store, 0, Keys(1000, 2000), 2, {}, {}, "more");
  ASSERT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("table t/e on server 3"));
  EXPECT_THAT(std::string(refused.message()), HasSubstr(dir_));
  EXPECT_THAT(std::string(refused.message()), HasSubstr(absl::StrCat(kBudget)));
  for (uint64_t key = 1000; key < 2000; ++key) gone_.insert({0, key});
  EXPECT_EQ(store->stats().rows, before.rows);
  EXPECT_EQ(store->stats().disk_bytes, before.disk_bytes);
  EXPECT_EQ(store->meta(), "full");
  ExpectModel(*store);
  // Overwrites fit: compaction makes room.
  std::mt19937_64 rng(3);
  for (uint32_t round = 3; round < 60; ++round) {
    std::vector<uint64_t> keys(100);
    for (uint64_t& key : keys) key = rng() % 1000;
    const absl::Status s = Write(*store, 0, keys, round);
    ASSERT_TRUE(s.ok()) << "round " << round << ": " << s;
    ASSERT_LE(store->stats().disk_bytes, kBudget);
  }
  store.reset();
  store = MustOpen(16 << 10, kBudget);
  ASSERT_NE(store, nullptr);
  ExpectModel(*store);
}

TEST_F(LogRowStoreTest, AFailingDiskLeavesTheStoreAsBeforeTheBatch) {
  // In a child (EXPECT_EXIT forks) with a file size limit, so that writes
  // fail with EFBIG for real; it exits 0 when the store behaved.
  auto fail_writes = [&] {
    auto fail = [](const std::string& what) {
      std::fprintf(stderr, "FAILED: %s\n", what.c_str());
      std::_Exit(1);
    };
    signal(SIGXFSZ, SIG_IGN);
    std::unique_ptr<LogRowStore> store = MustOpen(64 << 10);
    if (store == nullptr || !Write(*store, 0, Keys(0, 100), 1, {}, {}, "v1").ok()) fail("put");
    struct rlimit limit;
    if (getrlimit(RLIMIT_FSIZE, &limit) != 0) fail("getrlimit");
    const rlim_t unlimited = limit.rlim_cur;
    for (uint64_t key = 1000; key < 1300; ++key) gone_.insert({0, key});
    // 24 KiB: the batch fails in the head segment; then, the head sealed,
    // 4 KiB: it fails in the segment it starts.
    for (const rlim_t most : {rlim_t{24} << 10, rlim_t{4} << 10}) {
      const RowStoreStats before = store->stats();
      const size_t files = SegmentFiles(dir_).size();
      limit.rlim_cur = most;
      if (setrlimit(RLIMIT_FSIZE, &limit) != 0) fail("setrlimit");
      const absl::Status s = Write(*store, 0, Keys(1000, 1300), 2, {}, {}, "v2");  // 46 KiB
      for (const std::string& part :
           {std::string("table t/e on server 3"), dir_, std::string(std::strerror(EFBIG))}) {
        if (s.ok() || std::string(s.message()).find(part) == std::string::npos) fail(s.ToString());
      }
      if (store->stats().rows != before.rows || store->stats().disk_bytes != before.disk_bytes ||
          store->meta() != "v1" || FileBytes(dir_) != before.disk_bytes ||
          SegmentFiles(dir_).size() != files) {
        fail(absl::StrCat("not rolled back: ", s.ToString()));
      }
      ExpectModel(*store);
      if (most == (24 << 10) && !store->Snapshot(dir_ + ".snap").ok()) fail("snapshot");
    }
    limit.rlim_cur = unlimited;
    if (setrlimit(RLIMIT_FSIZE, &limit) != 0) fail("setrlimit");
    if (!Write(*store, 0, Keys(100, 110), 1).ok()) fail("a write after the failures");
    ExpectModel(*store);
    std::_Exit(HasFailure() ? 1 : 0);
  };
  EXPECT_EXIT(fail_writes(), ::testing::ExitedWithCode(0), "");
  std::unique_ptr<LogRowStore> store = MustOpen(64 << 10);
  ASSERT_NE(store, nullptr);
  for (uint64_t key = 0; key < 110; ++key) model_[{0, key}] = 1;
  for (uint64_t key = 1000; key < 1300; ++key) gone_.insert({0, key});
  ExpectModel(*store);
}

TEST_F(LogRowStoreTest, ASnapshotKeepsItsRowsWhileBothStoresGoOn) {
  std::unique_ptr<LogRowStore> store = MustOpen(8 << 10);
  ASSERT_NE(store, nullptr);
  for (uint32_t slice = 0; slice < 3; ++slice)
    ASSERT_TRUE(Write(*store, slice, Keys(0, 100), 1).ok());
  ASSERT_TRUE(Write(*store, 0, {}, 1, {}, {}, "v1").ok());
  const auto v1 = model_;
  const std::string snap = dir_ + ".snap";
  ASSERT_TRUE(store->Snapshot(snap).ok());
  EXPECT_EQ(store->Snapshot(snap).code(), absl::StatusCode::kAlreadyExists);
  struct stat st;
  ASSERT_EQ(stat(SegmentFiles(snap).front().c_str(), &st), 0);
  EXPECT_EQ(st.st_nlink, 2u) << "a hard link";
  // The original overwrites (enough to compact), erases and drops.
  for (uint32_t v = 2; v < 10; ++v) ASSERT_TRUE(Write(*store, 0, Keys(0, 100), v).ok());
  ASSERT_TRUE(Write(*store, 1, {}, 10, {1, 2, 3}, {2}, "v2").ok());
  ExpectModel(*store);
  const auto v2 = model_;
  const auto v2_gone = gone_;
  // The snapshot has the rows of its time, and writing to it changes
  // nothing of the original.
  model_ = v1, gone_.clear();
  absl::StatusOr<std::unique_ptr<LogRowStore>> old = Open(8 << 10, 0, snap);
  ASSERT_TRUE(old.ok()) << old.status();
  EXPECT_EQ((*old)->meta(), "v1");
  ExpectModel(**old);
  for (uint32_t v = 20; v < 25; ++v) ASSERT_TRUE(Write(**old, 1, Keys(0, 100), v).ok());
  ExpectModel(**old);
  old->reset();
  store.reset();
  model_ = v2, gone_ = v2_gone;
  store = MustOpen(8 << 10);
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->meta(), "v2");
  ExpectModel(*store);
}

TEST_F(LogRowStoreTest, ReadsRunWithAWriter) {
  std::unique_ptr<LogRowStore> store = MustOpen(16 << 10);
  ASSERT_NE(store, nullptr);
  constexpr uint64_t kKeys = 2000;
  ASSERT_TRUE(Write(*store, 0, Keys(0, kKeys), 1).ok());
  std::atomic<bool> done{false};
  std::atomic<int> bad{0}, reads{0};
  auto reader = [&](uint64_t seed) {
    std::mt19937_64 rng(seed);
    std::vector<uint32_t> seen(kKeys, 0);  // versions only grow
    std::vector<uint64_t> keys(64);
    std::vector<char> dst(keys.size() * kRow);
    std::unique_ptr<bool[]> found(new bool[keys.size()]);
    do {
      for (uint64_t& key : keys) key = rng() % kKeys;
      if (!store->Read(0, keys, dst.data(), found.get()).ok()) ++bad;
      for (size_t i = 0; i < keys.size(); ++i) {
        const char* row = &dst[i * kRow];
        const uint32_t version = VersionOf(row);
        const bool good = found[i] && std::string(row, kRow) == RowOf(keys[i], version);
        bad += !good || version < seen[keys[i]];
        seen[keys[i]] = version;
      }
      ++reads;
    } while (!done);
  };
  std::thread a(reader, 1), b(reader, 2);
  std::mt19937_64 rng(5);
  for (uint32_t v = 2; v < 80; ++v) {
    parts_ = v % 2 == 0;  // applied in parts of 256 (rows whole still)
    std::vector<uint64_t> keys(v < 40 ? 200 : 700);
    for (uint64_t& key : keys) key = rng() % kKeys;
    if (!Write(*store, 0, keys, v).ok()) {
      ADD_FAILURE() << "write " << v;
      break;
    }
  }
  done = true;
  a.join();
  b.join();
  EXPECT_EQ(bad, 0);
  EXPECT_GE(reads, 2);
  ExpectModel(*store);
}

}  // namespace
}  // namespace ps
