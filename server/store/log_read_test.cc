// How the log's rows are read: when reads ask the kernel for their rows'
// pages first (LogReadAdvice: after a read that found rows on the disk),
// and that advised reads, reads of several rows to a page and reads longer
// than a page (preads, not the mapping) give the rows written; and a store
// opened read-only (a snapshot in a checkpoint) changes none of its files.
#include <cstring>
#include <filesystem>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/store/log_row_store.h"
#include "tests/test_util/temp_dir.h"

namespace ps {
namespace {

TEST(LogReadAdviceTest, OnForItsReadsAfterOneThatFoundRowsOnTheDisk) {
  LogReadAdvice advice;
  EXPECT_FALSE(advice.Take()) << "rows in the page cache cost no system call";
  advice.Saw(0);
  EXPECT_FALSE(advice.Take());
  advice.Saw(3);  // three pages read from the disk
  for (uint32_t i = 0; i < LogReadAdvice::kReads; ++i) ASSERT_TRUE(advice.Take()) << "read " << i;
  EXPECT_FALSE(advice.Take()) << "past kReads reads";
  advice.Saw(1);
  for (uint32_t i = 0; i < LogReadAdvice::kReads / 2; ++i) ASSERT_TRUE(advice.Take());
  advice.Saw(1);  // an advised read still found one: as many again
  for (uint32_t i = 0; i < LogReadAdvice::kReads; ++i) ASSERT_TRUE(advice.Take()) << "read " << i;
  EXPECT_FALSE(advice.Take());
  LogReadAdvice always(/*always=*/true);
  EXPECT_TRUE(always.Take());
  EXPECT_TRUE(always.Take());
}

// Rows of 40 bytes (60-byte records: several to a page, some across two)
// in three segments or more, read back advised and not: scattered (copies
// from the mapping), and a slice whole (runs of records: preads).
TEST(LogReadAdviceTest, AdvisedAndLongReadsGiveTheRowsWritten) {
  constexpr size_t kRow = 40;
  constexpr uint64_t kKeys = 6000;
  auto value = [](uint64_t key, size_t b) { return static_cast<char>((key * 31 + b) % 251); };
  // Runs of 500 keys a slice: adjacent records.
  auto slice_of = [](uint64_t key) { return static_cast<uint32_t>(key / 500 % 3); };
  for (bool every : {false, true}) {
    RowStoreOptions options;
    options.dir = TestRoot(every ? "log_read_advised" : "log_read");
    options.row_bytes = kRow;
    LogRowStoreOptions log;
    log.segment_bytes = 128 << 10;  // ~2,000 records
    log.advise_every_read = every;
    absl::StatusOr<std::unique_ptr<LogRowStore>> store = LogRowStore::Open(options, log);
    ASSERT_TRUE(store.ok()) << store.status();
    std::vector<std::string> rows(kKeys);
    for (uint64_t from = 0; from < kKeys; from += 1000) {
      RowStore::Batch batch;
      for (uint64_t key = from; key < from + 1000; ++key) {
        for (size_t b = 0; b < kRow; ++b) rows[key].push_back(value(key, b));
        batch.puts.push_back({slice_of(key), key, rows[key].data()});
      }
      ASSERT_TRUE((*store)->Write(batch).ok());
    }
    size_t segments = 0;
    for (const auto& entry : std::filesystem::directory_iterator(options.dir)) {
      segments += entry.path().extension() == ".log";
    }
    ASSERT_GE(segments, 3u);
    // Scattered: every 7th key of every slice, in one read.
    std::vector<RowStore::RowRef> refs;
    for (uint64_t key = 0; key < kKeys; key += 7) {
      refs.push_back({slice_of(key), key});
    }
    refs.push_back({0, kKeys + 3});  // none
    std::vector<char> dst(refs.size() * kRow);
    std::unique_ptr<bool[]> found(new bool[refs.size()]);
    ASSERT_TRUE((*store)->ReadMany(refs, dst.data(), found.get()).ok());
    for (size_t i = 0; i + 1 < refs.size(); ++i) {
      ASSERT_TRUE(found[i]) << "key " << refs[i].key;
      ASSERT_EQ(std::string(&dst[i * kRow], kRow), rows[refs[i].key]) << "key " << refs[i].key;
    }
    EXPECT_FALSE(found[refs.size() - 1]);
    // A slice whole: runs of records longer than a page.
    uint64_t seen = 0;
    ASSERT_TRUE((*store)
                    ->ForEach(1,
                              [&](uint64_t key, const char* row) {
                                EXPECT_EQ(slice_of(key), 1u);
                                EXPECT_EQ(std::string(row, kRow), rows[key]) << "key " << key;
                                ++seen;
                                return absl::OkStatus();
                              })
                    .ok());
    EXPECT_EQ(seen, kKeys / 3);
  }
}

TEST(LogReadOnlyTest, OpeningReadOnlyChangesNothing) {
  constexpr size_t kRow = 24;
  RowStoreOptions options;
  options.dir = TestRoot("log_read_only");
  options.row_bytes = kRow;
  LogRowStoreOptions log;
  log.segment_bytes = 64 * (LogRowStore::kHeaderBytes + kRow);
  const std::string row(kRow, 'r');
  {
    absl::StatusOr<std::unique_ptr<LogRowStore>> store = LogRowStore::Open(options, log);
    ASSERT_TRUE(store.ok()) << store.status();
    for (uint64_t from = 0; from < 200; from += 100) {
      RowStore::Batch batch;
      for (uint64_t key = from; key < from + 100; ++key) batch.puts.push_back({0, key, row.data()});
      ASSERT_TRUE((*store)->Write(batch).ok());
    }
  }
  std::filesystem::remove(options.dir + "/LOCK");
  LogRowStoreOptions read_only = log;
  read_only.read_only = true;
  {
    absl::StatusOr<std::unique_ptr<LogRowStore>> store = LogRowStore::Open(options, read_only);
    ASSERT_TRUE(store.ok()) << store.status();
    EXPECT_EQ((*store)->stats().rows, 200u);
    RowStore::Batch batch;
    batch.erases.push_back({0, 1});
    const absl::Status refused = (*store)->Write(batch);
    EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition) << refused;
    EXPECT_NE(refused.message().find("read-only"), std::string::npos) << refused;
  }
  EXPECT_TRUE(LogRowStore::Check(options, log).ok());
  EXPECT_FALSE(std::filesystem::exists(options.dir + "/LOCK"));
  // The second batch torn (its commit cut off): DATA_LOSS, the file as it
  // is; opened for writing, the batch is cut off.
  std::filesystem::path last;
  for (const auto& entry : std::filesystem::directory_iterator(options.dir)) {
    if (entry.path().extension() == ".log" && entry.path() > last) last = entry.path();
  }
  const uint64_t torn = std::filesystem::file_size(last) - (LogRowStore::kHeaderBytes + kRow);
  std::filesystem::resize_file(last, torn);
  const absl::Status status = LogRowStore::Open(options, read_only).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
  EXPECT_NE(status.message().find("cut short"), std::string::npos) << status;
  EXPECT_EQ(LogRowStore::Check(options, log), status);  // the same reading, no store
  EXPECT_EQ(std::filesystem::file_size(last), torn);
  absl::StatusOr<std::unique_ptr<LogRowStore>> store = LogRowStore::Open(options, log);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ((*store)->stats().rows, 100u);
}

}  // namespace
}  // namespace ps
