#include "server/checkpoint/checkpoint_export.h"

#include <unistd.h>

#include <cstring>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/placement.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_test_records.h"
#include "tests/test_util/table_defs.h"
#include "tests/test_util/temp_dir.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

constexpr uint64_t kBuckets = 4;

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

uint64_t Get(const std::string& b, size_t at, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<uint8_t>(b[at + i])} << (8 * i);
  return v;
}

// The data of an .npy file's bytes (after its header).
std::string NpyData(const std::string& npy) { return npy.substr(10 + Get(npy, 8, 2)); }

template <typename T>
std::vector<T> As(const std::string& bytes) {
  std::vector<T> v(bytes.size() / sizeof(T));
  std::memcpy(v.data(), bytes.data(), v.size() * sizeof(T));
  return v;
}

// The members of a stored .npz, by name, read through the local headers.
std::map<std::string, std::string> ReadNpz(const std::string& path) {
  const std::string zip = ReadAll(path);
  std::map<std::string, std::string> members;
  size_t at = 0;
  while (at + 30 <= zip.size() && Get(zip, at, 4) == 0x04034b50) {
    const size_t name = Get(zip, at + 26, 2), extra = Get(zip, at + 28, 2);
    const size_t bytes = Get(zip, at + 18, 4);
    members[zip.substr(at + 30, name)] = NpyData(zip.substr(at + 30 + name + extra, bytes));
    at += 30 + name + extra + bytes;
  }
  return members;
}

uint64_t Bucket(uint64_t key) { return Placement::SparseSliceOf(key, kBuckets); }

// Dense slice of keys [first, first + n) of a width-2 table: key k holds
// (base + k, base + k + 0.5), then 2 state floats of -1.
std::string DenseSlice(const std::string& table, uint64_t slice, uint64_t first, uint64_t n,
                       float base) {
  std::vector<float> values;
  for (uint64_t k = first; k < first + n; ++k) {
    values.push_back(base + k);
    values.push_back(base + k + 0.5f);
  }
  return DenseRecord(table, slice, first, 2, values, 2, std::vector<float>(2 * n, -1.0f));
}

// A sparse width-2 record (one state float per row, 9): key k holds v(k).
template <typename V>
std::string SparseSlice(uint64_t slice, bool delta, const std::vector<uint64_t>& keys, V v,
                        const std::vector<uint64_t>& erased = {}) {
  std::vector<float> rows;
  for (uint64_t k : keys) {
    const std::pair<float, float> r = v(k);
    rows.insert(rows.end(), {r.first, r.second, 9.0f});
  }
  return SparseRecord("s", slice, 2, 3, delta, keys, rows, erased);
}

TEST(ExportFileNameTest, SafeNamesMapToFilesAndOthersAreRefused) {
  EXPECT_EQ(*ExportFileName(DenseTableDef("w", 1, 1)), "w.npy");
  EXPECT_EQ(*ExportFileName(DenseTableDef("mlp/fc0/w", 1, 1)), "mlp/fc0/w.npy");
  EXPECT_EQ(*ExportFileName(SparseTableDef("emb.v2", 1, kBuckets)), "emb.v2.npz");
  const std::vector<std::string> bad_names = {
      "../x", "a/../b", ".hidden", "a/.b", "a//b", "/abs", "trail/", "", std::string("a\0b", 3)};
  for (const std::string& bad : bad_names) {
    absl::StatusOr<std::string> name = ExportFileName(DenseTableDef(bad, 1, 1));
    EXPECT_EQ(name.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(std::string(name.status().message()), HasSubstr("table '" + bad + "'"));
  }
}

TEST(ExportTest, DenseSlicesOfTheChainReplaceTheirKeys) {
  const std::string root = TestRoot("dense");
  const std::vector<proto::TableDef> tables = {DenseTableDef("net/w", 10, 2),
                                               SparseTableDef("s", 2, kBuckets)};
  // Slices of 4 keys over two files; checkpoint 2 replaces slice 1, and 3
  // slice 2.
  ASSERT_TRUE(WriteTestCheckpoint(
                  root, 1, 0, tables,
                  {{"server-0", DenseSlice("net/w", 0, 0, 4, 0) + DenseSlice("net/w", 2, 8, 2, 0)},
                   {"server-1", DenseSlice("net/w", 1, 4, 4, 0)}})
                  .ok());
  ASSERT_TRUE(
      WriteTestCheckpoint(root, 2, 1, tables, {{"server-0", DenseSlice("net/w", 1, 4, 4, 100)}})
          .ok());
  ASSERT_TRUE(
      WriteTestCheckpoint(root, 3, 2, tables, {{"server-1", DenseSlice("net/w", 2, 8, 2, 200)}})
          .ok());
  const std::string out = root + "/out";
  absl::StatusOr<std::vector<ExportedTable>> written =
      ExportCheckpoint(root + "/ckpt-0000000003", out, {"net/w"});
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_EQ(written->size(), 1u) << "only the table asked for";
  const ExportedTable& t = (*written)[0];
  EXPECT_EQ(t.table, "net/w");
  EXPECT_FALSE(t.sparse);
  EXPECT_EQ(t.path, out + "/net/w.npy");
  EXPECT_THAT(t.shape, ElementsAre(10, 2));
  EXPECT_EQ(t.bytes, 128u + 80);

  const std::string npy = ReadAll(out + "/net/w.npy");
  EXPECT_EQ(npy.size(), t.bytes);
  EXPECT_THAT(npy, HasSubstr("'descr': '<f4', 'fortran_order': False, 'shape': (10, 2), }"));
  std::vector<float> expected;
  for (int k = 0; k < 10; ++k) {
    const float base = k < 4 ? 0 : k < 8 ? 100 : 200;
    expected.push_back(base + k);
    expected.push_back(base + k + 0.5f);
  }
  EXPECT_THAT(As<float>(NpyData(npy)), ElementsAreArray(expected));
  EXPECT_NE(::access((out + "/s.npz").c_str(), F_OK), 0) << "a table not asked for was written";
}

TEST(ExportTest, SparseDeltasUpsertAndEraseAndPlainRecordsReplaceTheirSlice) {
  // Keys 1..12 in their buckets; a (the bucket of key 1) needs 3 keys and
  // another bucket b 2 keys.
  std::map<uint64_t, std::vector<uint64_t>> by_bucket;
  for (uint64_t k = 1; k <= 12; ++k) by_bucket[Bucket(k)].push_back(k);
  const uint64_t a = Bucket(1);
  ASSERT_GE(by_bucket[a].size(), 3u);
  uint64_t b = a;
  for (const auto& [bucket, keys] : by_bucket) {
    if (bucket != a && keys.size() >= 2) b = bucket;
  }
  ASSERT_NE(b, a);
  const std::vector<uint64_t>& in_a = by_bucket[a];
  const std::vector<uint64_t>& in_b = by_bucket[b];
  std::vector<uint64_t> new_in_a;  // keys past 12, in bucket a (one has the top bit set)
  for (uint64_t k = (uint64_t{1} << 63) + 13; new_in_a.size() < 2; ++k) {
    if (Bucket(k) == a) new_in_a.push_back(k);
  }
  auto initial = [](uint64_t k) { return std::make_pair(float(k), -float(k)); };

  const std::string root = TestRoot("sparse");
  const std::vector<proto::TableDef> tables = {SparseTableDef("s", 2, kBuckets)};
  std::string full;
  for (const auto& [bucket, keys] : by_bucket) full += SparseSlice(bucket, false, keys, initial);
  ASSERT_TRUE(WriteTestCheckpoint(root, 1, 0, tables, {{"data", full}}).ok());
  // 2: in a, key in_a[0] rewritten, new_in_a[0] added, in_a[1] erased; b
  // replaced whole by in_b[0] alone.
  const std::string delta =
      SparseSlice(a, true, {new_in_a[0], in_a[0]},
                  [](uint64_t) { return std::make_pair(100.f, 200.f); }, {in_a[1]}) +
      SparseSlice(b, false, {in_b[0]}, [](uint64_t) { return std::make_pair(7.f, 8.f); });
  ASSERT_TRUE(WriteTestCheckpoint(root, 2, 1, tables, {{"data", delta}}).ok());
  // 3: new_in_a[0] erased again, and new_in_a[1], never written, erased.
  ASSERT_TRUE(
      WriteTestCheckpoint(root, 3, 2, tables,
                          {{"data", SparseSlice(a, true, {}, initial, {new_in_a[1], new_in_a[0]})}})
          .ok());

  absl::StatusOr<std::vector<ExportedTable>> written =
      ExportCheckpoint(root + "/ckpt-0000000003", root + "/out", {});
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_EQ(written->size(), 1u);
  EXPECT_TRUE((*written)[0].sparse);
  EXPECT_EQ((*written)[0].path, root + "/out/s.npz");

  std::map<uint64_t, std::pair<float, float>> expected;
  for (uint64_t k = 1; k <= 12; ++k) expected[k] = initial(k);
  expected[in_a[0]] = {100, 200};
  expected.erase(in_a[1]);
  for (size_t i = 1; i < in_b.size(); ++i) expected.erase(in_b[i]);
  expected[in_b[0]] = {7, 8};
  std::vector<uint64_t> keys;
  std::vector<float> values;
  for (const auto& [k, v] : expected) {
    keys.push_back(k);
    values.insert(values.end(), {v.first, v.second});
  }
  EXPECT_THAT((*written)[0].shape, ElementsAre(keys.size(), 2));
  std::map<std::string, std::string> npz = ReadNpz(root + "/out/s.npz");
  ASSERT_EQ(npz.size(), 2u);
  EXPECT_THAT(As<uint64_t>(npz["keys.npy"]), ElementsAreArray(keys));
  EXPECT_THAT(As<float>(npz["values.npy"]), ElementsAreArray(values));
}

// Exports a full checkpoint of `tables` with one data file holding
// `records`; the status, with no file written on error.
absl::Status ExportOne(const std::string& name, const std::vector<proto::TableDef>& tables,
                       const std::string& records, const std::vector<std::string>& select = {}) {
  const std::string root = TestRoot(name);
  if (absl::Status s = WriteTestCheckpoint(root, 1, 0, tables, {{"data", records}}); !s.ok()) {
    return s;
  }
  absl::Status s = ExportCheckpoint(root + "/ckpt-0000000001", root + "/out", select).status();
  if (!s.ok() && ::access((root + "/out").c_str(), F_OK) == 0) {
    ADD_FAILURE() << name << ": files written despite " << s;
  }
  return s;
}

TEST(ExportTest, InconsistentRecordsAreDataLossNamingTableAndSlice) {
  const std::vector<proto::TableDef> tables = {DenseTableDef("d", 10, 2),
                                               SparseTableDef("s", 2, kBuckets)};
  const std::string good_dense =
      DenseSlice("d", 0, 0, 4, 0) + DenseSlice("d", 1, 4, 4, 0) + DenseSlice("d", 2, 8, 2, 0);
  auto one = [](uint64_t) { return std::make_pair(1.f, 2.f); };
  uint64_t other = 2;  // a key of another bucket than key 1's
  while (Bucket(other) == Bucket(1)) ++other;
  const struct {
    std::string name, records, message;
  } cases[] = {
      {"uncovered", DenseSlice("d", 0, 0, 4, 0) + DenseSlice("d", 2, 8, 2, 0),
       "table 'd': keys [4, 8) of its 10 are in no slice"},
      {"uncovered2", DenseSlice("d", 1, 4, 4, 0), "keys [0, 4) and 2 more of its 10"},
      {"past_end", good_dense + DenseSlice("d", 2, 8, 3, 0),
       "table 'd' slice 2: keys [8, +3) run past the table's 10 keys"},
      {"width", good_dense + DenseRecord("d", 0, 0, 1, {1}, 3, {0, 0, 0}),
       "table 'd' slice 0: width 1, but the table's is 2"},
      {"kind", good_dense + SparseRecord("d", 0, 2, 2, false, {}, {}, {}),
       "table 'd' slice 0: a sparse record, but the table is dense"},
      {"kind2", good_dense + DenseRecord("s", 0, 0, 2, {1, 2}, 0, {}),
       "table 's' slice 0: a dense record, but the table is sparse"},
      {"bucket", good_dense + SparseSlice(Bucket(1), false, {1, other}, one),
       absl::StrCat("slice ", Bucket(1), ": key ", other, " belongs to slice ", Bucket(other),
                    " of 4")},
      {"erased_bucket", good_dense + SparseSlice(Bucket(1), true, {}, one, {other}),
       absl::StrCat("key ", other, " belongs to slice")},
      {"twice", good_dense + SparseSlice(Bucket(1), false, {1, 1}, one),
       "key 1 has two rows in the record"},
      {"written_erased", good_dense + SparseSlice(Bucket(1), true, {1}, one, {1}),
       "key 1 is both written and erased"},
  };
  for (const auto& c : cases) {
    absl::Status s = ExportOne(c.name, tables, c.records);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << c.name << ": " << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("/ckpt-0000000001: ")) << c.name;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.message)) << c.name;
  }
  // Records of tables not exported are not looked at.
  EXPECT_TRUE(ExportOne("unselected", tables, good_dense + DenseSlice("x", 0, 0, 1, 0)).ok());
  EXPECT_TRUE(ExportOne("other_bad", tables, good_dense + DenseSlice("s", 0, 0, 1, 0), {"d"}).ok());
}

TEST(ExportTest, UnknownAndUnsafeTablesAreRefusedBeforeAnythingIsWritten) {
  const std::vector<proto::TableDef> tables = {DenseTableDef("d", 1, 2),
                                               DenseTableDef("../up", 1, 2)};
  const std::string records = DenseSlice("d", 0, 0, 1, 0) + DenseSlice("../up", 0, 0, 1, 0);
  absl::Status s = ExportOne("unknown", tables, records, {"d", "nope"});
  EXPECT_EQ(s.code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(s.message()), HasSubstr("has no table 'nope'; its tables: d, ../up"));
  s = ExportOne("unsafe", tables, records);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("table '../up' cannot be exported"));
  EXPECT_TRUE(ExportOne("safe_only", tables, records, {"d"}).ok());
  // A checkpoint that is not there.
  EXPECT_EQ(
      ExportCheckpoint(TestRoot("none") + "/ckpt-0000000001", "/tmp/unused", {}).status().code(),
      absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ps
