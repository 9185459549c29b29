// Row store snapshots in checkpoints (row_snapshots.h): described as the
// manifest lists them, read back as records of every bucket, opened without
// changing them, and refused, saying what is wrong, when damaged.
#include "server/checkpoint/row_snapshots.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_records.h"
#include "server/store/log_row_store.h"
#include "tests/test_util/temp_dir.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kFloats = 3, kWidth = 2;
constexpr size_t kRowBytes = (kFloats + 1) * sizeof(float);  // floats and a change tag

// The row of `key`: floats from the key, the tag 7.
std::vector<char> RowOf(uint64_t key) {
  std::vector<char> row(kRowBytes);
  for (uint32_t f = 0; f < kFloats; ++f) {
    const float v = static_cast<float>(key) + 0.25f * static_cast<float>(f);
    std::memcpy(row.data() + f * sizeof(float), &v, sizeof v);
  }
  const uint32_t tag = 7;
  std::memcpy(row.data() + kFloats * sizeof(float), &tag, sizeof tag);
  return row;
}

class RowSnapshotsTest : public testing::Test {
 protected:
  // A store with rows in buckets 0 (keys 1..100), 1 (key 1000, erased
  // later) and 2 (keys 200..210, then 200..209 overwritten and 210
  // erased), its snapshot in the checkpoint directory dir_, described, and
  // a row written after it.
  void SetUp() override {
    RowStoreOptions options;
    options.dir = MakeTestDir("store");
    options.row_bytes = kRowBytes;
    LogRowStoreOptions log;
    log.segment_bytes = 64 * (LogRowStore::kHeaderBytes + kRowBytes);  // several segments
    absl::StatusOr<std::unique_ptr<LogRowStore>> store = LogRowStore::Open(options, log);
    ASSERT_TRUE(store.ok()) << store.status();
    std::vector<std::vector<char>> rows;
    // Key `key` with the row of `of`.
    const auto put = [&](RowStore::Batch* batch, uint32_t slice, uint64_t key, uint64_t of) {
      rows.push_back(RowOf(of));
      batch->puts.push_back({slice, key, nullptr});
    };
    RowStore::Batch first, second;
    for (uint64_t key = 1; key <= 100; ++key) put(&first, 0, key, key);
    put(&first, 1, 1000, 1000);
    for (uint64_t key = 200; key <= 210; ++key) put(&first, 2, key, 3 * key);  // replaced below
    for (size_t i = 0; i < first.puts.size(); ++i) first.puts[i].row = rows[i].data();
    ASSERT_TRUE((*store)->Write(first).ok());
    rows.clear();
    for (uint64_t key = 200; key < 210; ++key) put(&second, 2, key, key);
    for (size_t i = 0; i < second.puts.size(); ++i) second.puts[i].row = rows[i].data();
    second.erases.push_back({2, 210});
    second.erases.push_back({1, 1000});
    ASSERT_TRUE((*store)->Write(second).ok());
    // Rows changed since are not in it.
    dir_ = MakeTestDir("ckpt");
    snapshot_.set_dir(dir_ + "/server-0-rows-0");
    ASSERT_TRUE((*store)->Snapshot(snapshot_.dir()).ok());
    rows.clear();
    RowStore::Batch later;
    put(&later, 0, 5000, 5000);
    later.puts[0].row = rows[0].data();
    ASSERT_TRUE((*store)->Write(later).ok());
    ASSERT_TRUE(DescribeRowSnapshot(dir_, &snapshot_).ok());
    snapshot_.set_table("emb");
    snapshot_.set_floats_per_row(kFloats);
    snapshot_.set_width(kWidth);
    snapshot_.set_row_bytes(kRowBytes);
    for (uint64_t b : {0, 1, 2, 5}) snapshot_.add_buckets(b);
  }

  std::string path() const { return absl::StrCat(dir_, "/", snapshot_.dir()); }

  std::string dir_;
  proto::RowStoreSnapshot snapshot_;
};

TEST_F(RowSnapshotsTest, ItsBucketsReadBackAsRecordsThatReplaceThem) {
  EXPECT_EQ(snapshot_.dir(), "server-0-rows-0");
  ASSERT_GT(snapshot_.files_size(), 1);
  for (const proto::CheckpointFile& f : snapshot_.files()) {
    EXPECT_EQ(f.bytes(), std::filesystem::file_size(path() + "/" + f.name())) << f.name();
  }
  std::map<uint64_t, std::map<uint64_t, std::vector<float>>> buckets;
  std::map<uint64_t, int> replacing;
  absl::Status s = ForEachRowSnapshotRecord(dir_, snapshot_, [&](const SliceRecord& r) {
    EXPECT_EQ(r.header.table(), "emb");
    EXPECT_EQ(r.header.width(), kWidth);
    EXPECT_EQ(r.header.floats_per_row(), kFloats);
    replacing[r.header.slice()] += r.header.delta() ? 0 : 1;
    auto& rows = buckets[r.header.slice()];
    for (uint64_t i = 0; i < r.header.num_rows(); ++i) {
      std::vector<float> row(kFloats);
      r.CopyRow(i, row.data());
      rows[r.Key(i)] = row;
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  // Every bucket listed is replaced once, bucket 5 and the erased one empty.
  EXPECT_EQ(replacing, (std::map<uint64_t, int>{{0, 1}, {1, 1}, {2, 1}, {5, 1}}));
  EXPECT_EQ(buckets[0].size(), 100u);
  EXPECT_TRUE(buckets[1].empty());
  EXPECT_TRUE(buckets[5].empty());
  ASSERT_EQ(buckets[2].size(), 10u);  // the second batch's rows, not the first's
  for (const auto& [bucket, rows] : buckets) {
    for (const auto& [key, row] : rows) {
      for (uint32_t f = 0; f < kFloats; ++f) {
        EXPECT_EQ(row[f], static_cast<float>(key) + 0.25f * static_cast<float>(f))
            << "bucket " << bucket << " key " << key;
      }
    }
  }
  // Opened read-only: nothing was added to it (no LOCK file), and it
  // refuses writes.
  EXPECT_FALSE(std::filesystem::exists(path() + "/LOCK"));
  absl::StatusOr<std::unique_ptr<RowStore>> store = OpenRowSnapshot(dir_, snapshot_);
  ASSERT_TRUE(store.ok()) << store.status();
  RowStore::Batch batch;
  batch.erases.push_back({0, 1});
  EXPECT_THAT((*store)->Write(batch).message(), HasSubstr("read-only"));
}

TEST_F(RowSnapshotsTest, DamageIsNamed) {
  // Opening it and checking it (a verification) refuse it alike.
  const auto error = [&](const proto::RowStoreSnapshot& s) {
    const absl::Status status = OpenRowSnapshot(dir_, s).status();
    EXPECT_EQ(status.code(), absl::StatusCode::kDataLoss) << status;
    const absl::Status checked = CheckRowSnapshot(dir_, s);
    EXPECT_EQ(checked.code(), absl::StatusCode::kDataLoss) << checked;
    EXPECT_EQ(checked.message(), status.message());
    return std::string(status.message());
  };
  EXPECT_TRUE(CheckRowSnapshot(dir_, snapshot_).ok());
  proto::RowStoreSnapshot s = snapshot_;
  s.set_dir("../elsewhere");
  EXPECT_THAT(error(s), HasSubstr("not a plain name"));
  s = snapshot_;
  s.set_row_bytes(kRowBytes + 4);
  EXPECT_THAT(error(s), HasSubstr("do not hold 3 floats of width 2"));
  s = snapshot_;
  s.mutable_files(0)->set_bytes(s.files(0).bytes() + 1);
  EXPECT_THAT(error(s), HasSubstr("(truncated or extended)"));
  s = snapshot_;
  s.mutable_files()->RemoveLast();
  EXPECT_THAT(error(s), HasSubstr("is not in the manifest"));

  // A flipped byte in a row (the size unchanged) fails the store's replay,
  // and the checkpoint that lists the snapshot no longer verifies.
  proto::CheckpointManifest manifest;
  manifest.set_sequence(1);
  *manifest.add_row_snapshots() = snapshot_;
  ASSERT_TRUE(CommitCheckpoint(dir_, manifest).ok());
  ASSERT_TRUE(VerifyCheckpoint(dir_).ok());
  const std::string file = path() + "/" + snapshot_.files(0).name();
  {
    // Unlinked first: the store's own copy of the file stays as it was.
    std::ifstream in(file, std::ios::binary);
    std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    ASSERT_GT(bytes.size(), 200u);
    bytes[150] ^= 0x40;
    ASSERT_EQ(unlink(file.c_str()), 0);
    std::ofstream(file, std::ios::binary) << bytes;
  }
  EXPECT_THAT(error(snapshot_), HasSubstr(snapshot_.files(0).name()));
  EXPECT_EQ(VerifyCheckpoint(dir_).code(), absl::StatusCode::kDataLoss);
}

}  // namespace
}  // namespace ps
