// The log's format on disk, seen through LogRowStore: records carry the
// CRC-32C of their bytes, and a store written in format 1 (zlib's crc32)
// is refused as such, untouched, rather than read as a torn batch and cut;
// segments are read in parts (compaction, replay) with records across and
// longer than a part.
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/crc32c.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/log_row_store.h"
#include "tests/test_util/temp_dir.h"

namespace ps {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

constexpr size_t kRow = 40;
constexpr size_t kUnit = LogRowStore::kHeaderBytes + kRow;

absl::StatusOr<std::unique_ptr<LogRowStore>> Open(const std::string& dir) {
  RowStoreOptions options;
  options.dir = dir;
  options.row_bytes = kRow;
  options.name = "table f/e on server 0";
  return LogRowStore::Open(options, LogRowStoreOptions{});
}

std::string Contents(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

fs::path OnlySegment(const std::string& dir) {
  std::vector<fs::path> files;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().extension() == ".log") files.push_back(entry.path());
  }
  EXPECT_EQ(files.size(), 1u);
  return files.empty() ? fs::path() : files[0];
}

// A store in dir holding one row of kRow bytes `fill`.
void WriteOneRow(const std::string& dir, uint32_t slice, uint64_t key, char fill) {
  absl::StatusOr<std::unique_ptr<LogRowStore>> store = Open(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  const std::string row(kRow, fill);
  RowStore::Batch batch;
  batch.puts.push_back({slice, key, row.data()});
  ASSERT_TRUE((*store)->Write(batch).ok());
}

// A store in dir with segments of 8 MiB (records longer than a read fit).
absl::StatusOr<std::unique_ptr<LogRowStore>> OpenLarge(const std::string& dir) {
  RowStoreOptions options;
  options.dir = dir;
  options.row_bytes = kRow;
  LogRowStoreOptions log;
  log.segment_bytes = 8 << 20;
  return LogRowStore::Open(options, log);
}

// One batch: rows of kRow bytes `fill` for keys [from, to) of slice 0, with meta.
void WriteRows(LogRowStore& store, uint64_t from, uint64_t to, char fill, const std::string& meta) {
  const std::string row(kRow, fill);
  RowStore::Batch batch;
  for (uint64_t key = from; key < to; ++key) batch.puts.push_back({0, key, row.data()});
  batch.meta = meta;
  ASSERT_TRUE(store.Write(batch).ok());
}

// Keys [from, to) of slice 0 read back, each kRow bytes `fill`.
void ExpectRows(const LogRowStore& store, uint64_t from, uint64_t to, char fill) {
  std::vector<uint64_t> keys;
  for (uint64_t key = from; key < to; ++key) keys.push_back(key);
  std::vector<char> dst(keys.size() * kRow);
  std::unique_ptr<bool[]> found(new bool[keys.size()]);
  ASSERT_TRUE(store.Read(0, keys, dst.data(), found.get()).ok());
  for (size_t i = 0; i < keys.size(); ++i) {
    ASSERT_TRUE(found[i]) << "key " << keys[i];
    ASSERT_EQ(std::string(&dst[i * kRow], kRow), std::string(kRow, fill)) << "key " << keys[i];
  }
}

// One row written: the segment header and the row's record each start with
// the CRC-32C of the rest of their unit.
TEST(LogFormatTest, RecordsCarryTheCrc32cOfTheirBytes) {
  const std::string dir = TestRoot("log_format_crc");
  WriteOneRow(dir, 3, 77, 'v');
  const std::string bytes = Contents(OnlySegment(dir));
  ASSERT_GE(bytes.size(), 2 * kUnit);
  for (size_t unit = 0; unit < 2; ++unit) {
    const char* p = bytes.data() + unit * kUnit;
    uint32_t crc;
    std::memcpy(&crc, p, sizeof crc);
    EXPECT_EQ(crc, Crc32c(p + 4, kUnit - 4)) << "unit " << unit;
  }
  EXPECT_NE(bytes.find(std::string(kRow, 'v')), std::string::npos);
}

TEST(LogFormatTest, AStoreInFormatOneIsRefusedAndLeftAsItWas) {
  const std::string dir = TestRoot("log_format_v1");
  WriteOneRow(dir, 0, 5, 'w');
  // The segment header's magic (after crc, kind and row_bytes) made format
  // 1's, as an earlier build wrote it.
  const fs::path segment = OnlySegment(dir);
  std::string bytes = Contents(segment);
  const uint64_t v1 = 0x3153524c474f4c50;  // "PLOGLRS1"
  std::memcpy(&bytes[12], &v1, sizeof v1);
  std::ofstream(segment, std::ios::binary | std::ios::trunc) << bytes;
  const absl::Status open = Open(dir).status();
  EXPECT_EQ(open.code(), absl::StatusCode::kFailedPrecondition) << open;
  EXPECT_THAT(std::string(open.message()), HasSubstr(segment.string()));
  EXPECT_THAT(std::string(open.message()), HasSubstr("format 1"));
  EXPECT_THAT(std::string(open.message()), HasSubstr("table f/e on server 0"));
  EXPECT_EQ(Contents(segment), bytes) << "the segment was changed";
}

// Compaction reads a segment a MiB at a time: a commit whose meta is longer
// than that, in a segment compacted, is read whole all the same, and the
// rows after it are kept.
TEST(LogFormatTest, ARecordLongerThanACompactionReadIsCompacted) {
  const std::string dir = TestRoot("log_format_long");
  absl::StatusOr<std::unique_ptr<LogRowStore>> store = OpenLarge(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  // The first segment: rows, a 1.5 MiB meta, rows kept to the end.
  WriteRows(**store, 0, 20000, 'a', std::string(3 << 19, 'm'));
  WriteRows(**store, 20000, 20100, 'k', "after");
  const fs::path first = OnlySegment(dir);
  // Overwrites of the first rows until the first segment is compacted.
  for (int round = 0; round < 12 && fs::exists(first); ++round) {
    WriteRows(**store, 0, 20000, static_cast<char>('b' + round), "round");
  }
  EXPECT_FALSE(fs::exists(first)) << "the first segment was not compacted";
  ExpectRows(**store, 20000, 20100, 'k');
  EXPECT_EQ((*store)->meta(), "round");
}

// Replay reads a segment about a MiB at a time: rows across the reads, a
// commit longer than one, and a batch torn past the first MiB are each
// read as they were written (a record misread at a read's end would be
// taken for a torn write and cut, with every batch after it).
TEST(LogFormatTest, ReplayReadsRecordsAcrossAndLongerThanItsReads) {
  const std::string dir = TestRoot("log_format_replay");
  const std::string long_meta(3 << 19, 'm');  // 1.5 MiB
  uint64_t second_batch_end = 0;
  {
    absl::StatusOr<std::unique_ptr<LogRowStore>> store = OpenLarge(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    WriteRows(**store, 0, 30000, 'a', "first");  // ~1.9 MiB of rows
    WriteRows(**store, 30000, 30100, 'b', long_meta);
    second_batch_end = fs::file_size(OnlySegment(dir));
    WriteRows(**store, 30100, 40000, 'c', "third");
  }
  ASSERT_GT(second_batch_end, 3u << 20) << "the batches do not cross a read";
  {
    absl::StatusOr<std::unique_ptr<LogRowStore>> store = OpenLarge(dir);
    ASSERT_TRUE(store.ok()) << store.status();
    ExpectRows(**store, 0, 30000, 'a');
    ExpectRows(**store, 30000, 30100, 'b');
    ExpectRows(**store, 30100, 40000, 'c');
    EXPECT_EQ((*store)->meta(), "third");
  }
  // The third batch torn half way: it alone is cut.
  const fs::path segment = OnlySegment(dir);
  fs::resize_file(segment, (second_batch_end + fs::file_size(segment)) / 2);
  absl::StatusOr<std::unique_ptr<LogRowStore>> store = OpenLarge(dir);
  ASSERT_TRUE(store.ok()) << store.status();
  EXPECT_EQ(fs::file_size(segment), second_batch_end);
  ExpectRows(**store, 0, 30000, 'a');
  ExpectRows(**store, 30000, 30100, 'b');
  EXPECT_EQ((*store)->meta(), long_meta);
  std::vector<uint64_t> torn = {30100, 39999};
  std::vector<char> dst(torn.size() * kRow);
  std::unique_ptr<bool[]> found(new bool[torn.size()]);
  ASSERT_TRUE((*store)->Read(0, torn, dst.data(), found.get()).ok());
  EXPECT_FALSE(found[0]);
  EXPECT_FALSE(found[1]);
}

}  // namespace
}  // namespace ps
