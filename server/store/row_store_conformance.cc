#include "server/store/row_store_conformance.h"

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"

namespace ps {
namespace {

constexpr size_t kRowBytes = RowStoreConformanceTest::kRowBytes;

// The row of (key, version): different bytes for every pair.
std::string RowOf(uint64_t key, uint32_t version) {
  std::string row(kRowBytes, '\0');
  for (size_t i = 0; i < row.size(); ++i) {
    row[i] = static_cast<char>((key * 131 + version * 31 + i * 7 + (key >> 8)) & 0xff);
  }
  return row;
}

// What a store should hold: (slice, key) -> version.
using Model = std::map<std::pair<uint32_t, uint64_t>, uint32_t>;

// Puts every (slice, key) of `rows` at its version, in one batch.
absl::Status PutAll(RowStore& store, const Model& rows, const std::string& meta = "",
                    bool sync = true) {
  std::vector<std::string> bytes;
  bytes.reserve(rows.size());
  RowStore::Batch batch;
  for (const auto& [id, version] : rows) {
    bytes.push_back(RowOf(id.second, version));
    batch.puts.push_back({id.first, id.second, bytes.back().data()});
  }
  batch.meta = meta;
  batch.sync = sync;
  return store.Write(batch);
}

// Checks that the store holds exactly `want` for the slices it names, and
// that `absent` keys of slice 0 have no row.
void ExpectHolds(const RowStore& store, const Model& want, const std::vector<uint64_t>& absent) {
  std::map<uint32_t, std::vector<uint64_t>> by_slice;
  for (const auto& [id, version] : want) by_slice[id.first].push_back(id.second);
  for (const auto& entry : by_slice) {
    const uint32_t slice = entry.first;  // a lambda below uses it
    const std::vector<uint64_t>& keys = entry.second;
    std::vector<char> dst(keys.size() * kRowBytes);
    std::unique_ptr<bool[]> found(new bool[keys.size()]);
    ASSERT_TRUE(store.Read(slice, keys, dst.data(), found.get()).ok());
    for (size_t i = 0; i < keys.size(); ++i) {
      ASSERT_TRUE(found[i]) << "slice " << slice << " key " << keys[i];
      EXPECT_EQ(std::string(dst.data() + i * kRowBytes, kRowBytes),
                RowOf(keys[i], want.at({slice, keys[i]})))
          << "slice " << slice << " key " << keys[i];
    }
    // ForEach lists the same rows, no more.
    size_t listed = 0;
    ASSERT_TRUE(store
                    .ForEach(slice,
                             [&](uint64_t key, const char* row) {
                               ++listed;
                               auto it = want.find({slice, key});
                               EXPECT_TRUE(it != want.end()) << "slice " << slice << " key " << key;
                               if (it != want.end()) {
                                 EXPECT_EQ(std::string(row, kRowBytes), RowOf(key, it->second));
                               }
                               return absl::OkStatus();
                             })
                    .ok());
    EXPECT_EQ(listed, keys.size()) << "slice " << slice;
  }
  if (!absent.empty()) {
    std::vector<char> dst(absent.size() * kRowBytes, 'x');
    std::unique_ptr<bool[]> found(new bool[absent.size()]);
    ASSERT_TRUE(store.Read(0, absent, dst.data(), found.get()).ok());
    for (size_t i = 0; i < absent.size(); ++i) EXPECT_FALSE(found[i]) << "key " << absent[i];
  }
}

TEST_P(RowStoreConformanceTest, RowsComeBackAsWritten) {
  std::unique_ptr<RowStore> store = Open();
  ASSERT_NE(store, nullptr);
  Model rows;
  for (uint64_t key = 1; key <= 200; ++key) rows[{static_cast<uint32_t>(key % 4), key}] = 1;
  ASSERT_TRUE(PutAll(*store, rows).ok());
  ExpectHolds(*store, rows, {4000, 4001});
  // Slices are separate: key 1 of slice 1 is no row of slice 0.
  ExpectHolds(*store, {}, {1, 5, 9});
}

// ReadMany: rows of several slices in one call, in runs and interleaved,
// with keys of no row among them; each found row where its ref is.
TEST_P(RowStoreConformanceTest, ReadManyReadsAnySlicesRows) {
  std::unique_ptr<RowStore> store = Open();
  ASSERT_NE(store, nullptr);
  Model rows;
  for (uint64_t key = 1; key <= 120; ++key) rows[{static_cast<uint32_t>(key % 3), key}] = 2;
  ASSERT_TRUE(PutAll(*store, rows).ok());
  std::vector<RowStore::RowRef> refs;
  for (uint64_t key = 1; key <= 120; key += 7)
    refs.push_back({static_cast<uint32_t>(key % 3), key});
  refs.push_back({0, 5000});  // no row
  refs.push_back({1, 3});     // key 3 is slice 0's
  for (uint64_t key = 3; key <= 120; key += 3) refs.push_back({0, key});
  std::vector<char> dst(refs.size() * kRowBytes, 'x');
  std::unique_ptr<bool[]> found(new bool[refs.size()]);
  ASSERT_TRUE(store->ReadMany(refs, dst.data(), found.get()).ok());
  for (size_t i = 0; i < refs.size(); ++i) {
    const auto it = rows.find({refs[i].slice, refs[i].key});
    ASSERT_EQ(found[i], it != rows.end()) << "slice " << refs[i].slice << " key " << refs[i].key;
    if (it == rows.end()) continue;
    EXPECT_EQ(std::string(dst.data() + i * kRowBytes, kRowBytes), RowOf(refs[i].key, 2))
        << "slice " << refs[i].slice << " key " << refs[i].key;
  }
}

// ForEachSince(position): every row put since Position(), at its value now,
// and no row that is gone; rows of before may come too (all of them for a
// store that cannot tell).
TEST_P(RowStoreConformanceTest, ForEachSinceListsTheRowsWrittenSince) {
  std::unique_ptr<RowStore> store = Open();
  ASSERT_NE(store, nullptr);
  Model before, since;
  for (uint64_t key = 1; key <= 300; ++key) before[{0, key}] = 1;
  ASSERT_TRUE(PutAll(*store, before).ok());
  const uint64_t position = store->Position();
  for (uint64_t key = 250; key <= 320; key += 2) since[{0, key}] = 2;
  ASSERT_TRUE(PutAll(*store, since).ok());
  RowStore::Batch erase;
  erase.erases.push_back({0, 260});
  ASSERT_TRUE(store->Write(erase).ok());
  since.erase({0, 260});
  std::map<uint64_t, std::string> listed;
  ASSERT_TRUE(store
                  ->ForEachSince(0, position,
                                 [&](uint64_t key, const char* row) {
                                   listed[key] = std::string(row, kRowBytes);
                                   return absl::OkStatus();
                                 })
                  .ok());
  for (const auto& [id, version] : since) {
    ASSERT_TRUE(listed.count(id.second)) << "key " << id.second << ", put since, is not listed";
    EXPECT_EQ(listed[id.second], RowOf(id.second, version)) << "key " << id.second;
  }
  EXPECT_FALSE(listed.count(260)) << "an erased key is listed";
  for (const auto& [key, row] : listed) {
    const uint32_t version = since.count({0, key}) ? 2 : 1;
    EXPECT_EQ(row, RowOf(key, version)) << "key " << key;
  }
  // A store that knows its position lists those, and few others (rows
  // compaction moved since, in the log).
  if (position != 0) {
    EXPECT_LT(listed.size(), before.size() / 2);
  }
}

TEST_P(RowStoreConformanceTest, OverwritesErasesAndDroppedSlices) {
  std::unique_ptr<RowStore> store = Open();
  ASSERT_NE(store, nullptr);
  Model rows;
  for (uint64_t key = 0; key < 300; ++key) rows[{static_cast<uint32_t>(key % 3), key}] = 1;
  ASSERT_TRUE(PutAll(*store, rows).ok());
  RowStore::Batch batch;
  std::vector<std::string> bytes;
  bytes.reserve(300);
  for (uint64_t key = 0; key < 300; key += 2) {
    if (key % 3 == 2) continue;  // slice 2 is dropped below
    bytes.push_back(RowOf(key, 2));
    batch.puts.push_back({static_cast<uint32_t>(key % 3), key, bytes.back().data()});
    rows[{static_cast<uint32_t>(key % 3), key}] = 2;
  }
  for (uint64_t key = 1; key < 300; key += 10) {
    if (key % 3 == 2) continue;
    batch.erases.push_back({static_cast<uint32_t>(key % 3), key});
    rows.erase({static_cast<uint32_t>(key % 3), key});
  }
  // Slice 2 dropped, then one row of it put in the same batch.
  batch.dropped_slices.push_back(2);
  for (auto it = rows.begin(); it != rows.end();) {
    it = it->first.first == 2 ? rows.erase(it) : std::next(it);
  }
  bytes.push_back(RowOf(1000, 3));
  batch.puts.push_back({2, 1000, bytes.back().data()});
  rows[{2, 1000}] = 3;
  ASSERT_TRUE(store->Write(batch).ok());
  ExpectHolds(*store, rows, {1, 11, 21});
  size_t in_two = 0;
  ASSERT_TRUE(store
                  ->ForEach(2,
                            [&](uint64_t, const char*) {
                              ++in_two;
                              return absl::OkStatus();
                            })
                  .ok());
  EXPECT_EQ(in_two, 1u);
}

TEST_P(RowStoreConformanceTest, ReopenedStoreHasItsRowsAndLastMeta) {
  Model rows;
  {
    std::unique_ptr<RowStore> store = Open();
    ASSERT_NE(store, nullptr);
    EXPECT_EQ(store->meta(), "");
    for (uint64_t key = 0; key < 5000; ++key) rows[{static_cast<uint32_t>(key % 64), key}] = 1;
    ASSERT_TRUE(PutAll(*store, rows, "epoch 1 seq 10").ok());
    for (uint64_t key = 0; key < 5000; key += 7) rows[{static_cast<uint32_t>(key % 64), key}] = 2;
    Model again;
    for (uint64_t key = 0; key < 5000; key += 7) again[{static_cast<uint32_t>(key % 64), key}] = 2;
    ASSERT_TRUE(PutAll(*store, again, "epoch 1 seq 11").ok());
    // A batch without meta keeps the last one.
    ASSERT_TRUE(PutAll(*store, {{{0, 0}, rows[{0, 0}]}}).ok());
  }
  std::unique_ptr<RowStore> store = Open();
  ASSERT_NE(store, nullptr);
  EXPECT_EQ(store->meta(), "epoch 1 seq 11");
  ExpectHolds(*store, rows, {5000, 5001});
}

TEST_P(RowStoreConformanceTest, SnapshotKeepsTheRowsOfItsTime) {
  std::unique_ptr<RowStore> store = Open();
  ASSERT_NE(store, nullptr);
  Model before;
  for (uint64_t key = 0; key < 1000; ++key) before[{static_cast<uint32_t>(key % 8), key}] = 1;
  ASSERT_TRUE(PutAll(*store, before, "before").ok());
  const std::string snap = dir_ + ".snapshot";
  std::filesystem::remove_all(snap);
  ASSERT_TRUE(store->Snapshot(snap).ok());
  Model after = before;
  for (auto& [id, version] : after) version = 2;
  ASSERT_TRUE(PutAll(*store, after, "after").ok());
  RowStore::Batch erase;
  erase.erases.push_back({0, 0});
  erase.dropped_slices.push_back(7);
  ASSERT_TRUE(store->Write(erase).ok());
  after.erase({0, 0});
  for (auto it = after.begin(); it != after.end();) {
    it = it->first.first == 7 ? after.erase(it) : std::next(it);
  }
  ExpectHolds(*store, after, {0});
  std::unique_ptr<RowStore> old = OpenAt(snap);
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(old->meta(), "before");
  ExpectHolds(*old, before, {});
}

// Batches written without sync are read at once, and a snapshot and the
// store reopened after a clean close hold them.
TEST_P(RowStoreConformanceTest, UnsyncedBatchesAreReadAtOnceAndKept) {
  Model rows;
  for (uint64_t key = 0; key < 2000; ++key) rows[{static_cast<uint32_t>(key % 8), key}] = 3;
  const std::string snap = dir_ + ".unsynced";
  std::filesystem::remove_all(snap);
  Model first;  // the snapshot's
  {
    std::unique_ptr<RowStore> store = Open();
    ASSERT_NE(store, nullptr);
    ASSERT_TRUE(PutAll(*store, rows, "unsynced", /*sync=*/false).ok());
    ExpectHolds(*store, rows, {2000});
    ASSERT_TRUE(store->Snapshot(snap).ok());
    first = rows;
    Model more;
    for (uint64_t key = 2000; key < 2100; ++key) more[{0, key}] = 4;
    ASSERT_TRUE(PutAll(*store, more, "", /*sync=*/false).ok());
    rows.insert(more.begin(), more.end());
  }
  std::unique_ptr<RowStore> reopened = Open();
  ASSERT_NE(reopened, nullptr);
  EXPECT_EQ(reopened->meta(), "unsynced");
  ExpectHolds(*reopened, rows, {});
  std::unique_ptr<RowStore> old = OpenAt(snap);
  ASSERT_NE(old, nullptr);
  EXPECT_EQ(old->meta(), "unsynced");
  ExpectHolds(*old, first, {});
}

TEST_P(RowStoreConformanceTest, ABatchPastTheDiskBudgetIsRefusedWhole) {
  constexpr uint64_t kBudget = 256 << 10;
  std::unique_ptr<RowStore> store = Open(kBudget);
  ASSERT_NE(store, nullptr);
  Model held;
  absl::Status refused;
  for (uint64_t b = 0; b < 200 && refused.ok(); ++b) {
    Model batch;
    for (uint64_t key = b * 100; key < (b + 1) * 100; ++key) batch[{0, key}] = 1;
    refused = PutAll(*store, batch, absl::StrCat("batch ", b));
    if (refused.ok()) held.insert(batch.begin(), batch.end());
  }
  ASSERT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr("test table"));
  EXPECT_THAT(std::string(refused.message()), ::testing::HasSubstr(dir_));
  EXPECT_LE(store->stats().disk_bytes, kBudget);
  // Every acknowledged row is there, none of the refused batch.
  const uint64_t first_refused = held.size();
  ExpectHolds(*store, held, {first_refused, first_refused + 99});
  EXPECT_EQ(store->meta(), absl::StrCat("batch ", held.size() / 100 - 1));
}

}  // namespace

void RowStoreConformanceTest::SetUp() {
  const char* tmp = std::getenv("TEST_TMPDIR");
  const ::testing::TestInfo* info = ::testing::UnitTest::GetInstance()->current_test_info();
  std::string name = absl::StrCat(info->test_suite_name(), "_", info->name());
  for (char& c : name) {
    if (c == '/') c = '_';
  }
  dir_ = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/", name);
  std::filesystem::remove_all(dir_);
}

std::unique_ptr<RowStore> RowStoreConformanceTest::Open(uint64_t budget) {
  RowStoreOptions options;
  options.dir = dir_;
  options.row_bytes = kRowBytes;
  options.disk_budget_bytes = budget;
  options.name = "test table";
  absl::StatusOr<std::unique_ptr<RowStore>> store = GetParam()(options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

std::unique_ptr<RowStore> RowStoreConformanceTest::OpenAt(const std::string& dir) {
  RowStoreOptions options;
  options.dir = dir;
  options.row_bytes = kRowBytes;
  options.name = "test snapshot";
  absl::StatusOr<std::unique_ptr<RowStore>> store = GetParam()(options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? *std::move(store) : nullptr;
}

}  // namespace ps
