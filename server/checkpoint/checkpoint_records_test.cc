#include "server/checkpoint/checkpoint_records.h"

#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_test_records.h"
#include "tests/test_util/table_defs.h"
#include "tests/test_util/temp_dir.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::ElementsAreArray;
using ::testing::HasSubstr;

proto::SliceHeader Header(bool sparse, uint64_t rows, uint32_t floats_per_row, uint32_t width) {
  proto::SliceHeader h;
  h.set_table("t");
  h.set_slice(5);
  h.set_sparse(sparse);
  h.set_num_rows(rows);
  h.set_floats_per_row(floats_per_row);
  h.set_width(width);
  return h;
}

// The records of `bytes`, copied out (payloads as strings).
struct Parsed {
  proto::SliceHeader header;
  std::string payload;
};
absl::Status Parse(const std::string& bytes, std::vector<Parsed>* out) {
  return ForEachSliceRecord(bytes, "dir/file", [&](const SliceRecord& r) {
    out->push_back({r.header, std::string(r.payload)});
    return absl::OkStatus();
  });
}

TEST(SliceRecordTest, DenseSparseAndDeltaRecordsRoundTrip) {
  const std::vector<float> values = {1, 2, 3, 4, 5, 6};       // 3 keys, width 2
  const std::vector<float> state = {-1, -2, -3, -4, -5, -6};  // 2 per key
  const std::vector<uint64_t> keys = {42, uint64_t{1} << 63, 7};
  const std::vector<float> rows = {0.5f, 1.5f, 9, 2.5f, 3.5f, 9, 4.5f, 5.5f, 9};  // width 2 of 3
  const std::vector<uint64_t> erased = {11, ~uint64_t{0}};
  std::string bytes = DenseRecord("dense", 2, 8, 2, values, 2, state);
  bytes += SparseRecord("sparse", 3, 2, 3, false, keys, rows, {});
  bytes += SparseRecord("sparse", 3, 2, 3, true, {keys[1]}, {7, 8, 9}, erased);

  std::vector<int> seen;
  absl::Status s = ForEachSliceRecord(bytes, "f", [&](const SliceRecord& r) {
    seen.push_back(static_cast<int>(seen.size()));
    switch (seen.back()) {
      case 0: {
        EXPECT_EQ(r.header.table(), "dense");
        EXPECT_EQ(r.header.slice(), 2u);
        EXPECT_FALSE(r.header.sparse());
        EXPECT_EQ(r.header.first_key(), 8u);
        EXPECT_EQ(r.header.num_rows(), 3u);
        EXPECT_EQ(r.header.floats_per_row(), 4u);
        EXPECT_EQ(r.header.width(), 2u);
        EXPECT_EQ(r.payload.size(), 48u);
        std::vector<float> got(6);
        r.CopyFloats(0, 6, got.data());
        EXPECT_EQ(got, values);
        r.CopyFloats(6, 6, got.data());
        EXPECT_EQ(got, state);
        r.CopyFloats(3, 2, got.data());
        EXPECT_THAT(std::vector<float>(got.begin(), got.begin() + 2), ElementsAre(4, 5));
        break;
      }
      case 1: {
        EXPECT_TRUE(r.header.sparse());
        EXPECT_FALSE(r.header.delta());
        EXPECT_EQ(r.header.num_rows(), 3u);
        EXPECT_EQ(r.payload.size(), 3 * 8 + 9 * 4u);
        std::vector<float> row(3);
        for (uint64_t i = 0; i < 3; ++i) {
          EXPECT_EQ(r.Key(i), keys[i]);
          r.CopyRow(i, row.data());
          EXPECT_THAT(row, ElementsAreArray(rows.data() + 3 * i, 3)) << i;
        }
        break;
      }
      case 2: {
        EXPECT_TRUE(r.header.delta());
        EXPECT_EQ(r.header.num_erased(), 2u);
        EXPECT_EQ(r.payload.size(), 8 + 3 * 4 + 2 * 8u);
        EXPECT_EQ(r.Key(0), uint64_t{1} << 63);
        std::vector<float> row(3);
        r.CopyRow(0, row.data());
        EXPECT_THAT(row, ElementsAre(7, 8, 9));
        EXPECT_EQ(r.ErasedKey(0), 11u);
        EXPECT_EQ(r.ErasedKey(1), ~uint64_t{0});
        break;
      }
    }
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(seen, ElementsAre(0, 1, 2));
}

TEST(SliceRecordTest, TheCallbacksErrorStopsTheWalk) {
  const std::string bytes =
      DenseRecord("a", 0, 0, 1, {1}, 0, {}) + DenseRecord("b", 1, 1, 1, {2}, 0, {});
  int calls = 0;
  absl::Status s = ForEachSliceRecord(bytes, "f", [&](const SliceRecord&) {
    ++calls;
    return absl::AbortedError("stop here");
  });
  EXPECT_EQ(s, absl::AbortedError("stop here"));
  EXPECT_EQ(calls, 1);
  // No bytes: no records, no error.
  EXPECT_TRUE(ForEachSliceRecord("", "f", [](const SliceRecord&) {
                return absl::InternalError("called");
              }).ok());
}

TEST(SlicePayloadBytesTest, SizesAndRefusals) {
  EXPECT_EQ(*SlicePayloadBytes(Header(false, 3, 4, 2)), 48u);
  proto::SliceHeader sparse = Header(true, 3, 4, 2);
  sparse.set_num_erased(5);
  EXPECT_EQ(*SlicePayloadBytes(sparse), 3 * (8 + 16) + 40u);
  EXPECT_EQ(*SlicePayloadBytes(Header(false, 0, 1, 1)), 0u);

  struct Case {
    proto::SliceHeader header;
    std::string message;
  };
  std::vector<Case> cases;
  cases.push_back({Header(false, 3, 4, 0), "width 0 with floats_per_row 4"});
  cases.push_back({Header(true, 3, 4, 5), "width 5 with floats_per_row 4"});
  proto::SliceHeader dense_erased = Header(false, 3, 4, 2);
  dense_erased.set_num_erased(1);
  cases.push_back({dense_erased, "a dense slice with erased keys"});
  proto::SliceHeader dense_delta = Header(false, 3, 4, 2);
  dense_delta.set_delta(true);
  cases.push_back({dense_delta, "delta set"});
  cases.push_back({Header(false, uint64_t{1} << 61, 4, 2), "overflow"});
  cases.push_back({Header(true, uint64_t{1} << 61, 1, 1), "overflow"});
  proto::SliceHeader erased_overflow = Header(true, 1, 1, 1);
  erased_overflow.set_num_erased(~uint64_t{0} / 8);
  cases.push_back({erased_overflow, "overflow"});
  for (const Case& c : cases) {
    absl::StatusOr<uint64_t> bytes = SlicePayloadBytes(c.header);
    EXPECT_EQ(bytes.status().code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(std::string(bytes.status().message()), HasSubstr("table 't' slice 5"));
    EXPECT_THAT(std::string(bytes.status().message()), HasSubstr(c.message));
  }
}

TEST(SliceRecordTest, DamageIsDataLossNamingTheFileAndOffset) {
  const std::string good = DenseRecord("t", 0, 0, 2, {1, 2, 3, 4}, 1, {5, 6});
  const std::string at = absl::StrCat("dir/file at byte ", good.size(), ": ");
  proto::SliceHeader width0 = Header(false, 1, 1, 0);
  std::string inconsistent;
  AppendSliceHeader(width0, &inconsistent);
  inconsistent += std::string(4, '\0');
  const struct {
    std::string tail;
    std::string message;
  } cases[] = {
      {std::string("\x01\x00", 2), "a record length needs 4 bytes, 2 are left"},
      {std::string("\x64\x00\x00\x00", 4) + "0123456789",
       "a header of 100 bytes runs past the end (10 bytes left)"},
      {std::string("\x03\x00\x00\x00\xff\xff\xff", 7), "a slice header of 3 bytes does not parse"},
      {inconsistent, "table 't' slice 5: width 0 with floats_per_row 1"},
      {good.substr(0, good.size() - 4),
       "table 't' slice 0: a payload of 24 bytes runs past the end (20 bytes left)"},
  };
  for (const auto& c : cases) {
    std::vector<Parsed> records;
    absl::Status s = Parse(good + c.tail, &records);
    EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss) << c.message;
    EXPECT_THAT(std::string(s.message()), HasSubstr(at + c.message));
    ASSERT_EQ(records.size(), 1u) << "the good record before the damage is passed on";
    EXPECT_EQ(records[0].payload.size(), 24u);
  }
}

// Checkpoint `sequence` holding one record: table t, slice = sequence.
absl::Status WriteOne(const std::string& root, uint64_t sequence, uint64_t base) {
  return WriteTestCheckpoint(
      root, sequence, base, {DenseTableDef("t", 4, 1)},
      {{"data", DenseRecord("t", sequence, 0, 1, {static_cast<float>(sequence)}, 0, {})}});
}

TEST(CheckpointChainTest, AFullCheckpointIsItsOwnChain) {
  const std::string root = TestRoot("full");
  ASSERT_TRUE(WriteOne(root, 1, 0).ok());
  absl::StatusOr<std::vector<FoundCheckpoint>> chain =
      CheckpointChain(root + "/" + CheckpointDirName(1) + "/");
  ASSERT_TRUE(chain.ok()) << chain.status();
  ASSERT_EQ(chain->size(), 1u);
  EXPECT_EQ((*chain)[0].path, root + "/ckpt-0000000001");
  EXPECT_EQ((*chain)[0].manifest.sequence(), 1u);
}

TEST(CheckpointChainTest, AnIncrementalChainIsOldestFirstAndItsRecordsComeInThatOrder) {
  const std::string root = TestRoot("chain");
  ASSERT_TRUE(WriteOne(root, 1, 0).ok());
  ASSERT_TRUE(WriteOne(root, 2, 1).ok());
  ASSERT_TRUE(WriteOne(root, 4, 2).ok());
  ASSERT_TRUE(WriteOne(root, 5, 0).ok());  // a newer full one, not in the chain
  absl::StatusOr<std::vector<FoundCheckpoint>> chain =
      CheckpointChain(root + "/" + CheckpointDirName(4));
  ASSERT_TRUE(chain.ok()) << chain.status();
  std::vector<std::string> paths;
  for (const FoundCheckpoint& c : *chain) paths.push_back(c.path);
  EXPECT_THAT(paths, ElementsAre(root + "/ckpt-0000000001", root + "/ckpt-0000000002",
                                 root + "/ckpt-0000000004"));

  std::vector<uint64_t> slices;
  absl::Status s = ForEachChainRecord(*chain, [&](const FoundCheckpoint& c, const SliceRecord& r) {
    EXPECT_EQ(c.manifest.sequence(), r.header.slice());
    float v = 0;
    r.CopyFloats(0, 1, &v);
    EXPECT_EQ(v, static_cast<float>(r.header.slice()));
    slices.push_back(r.header.slice());
    return absl::OkStatus();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_THAT(slices, ElementsAre(1, 2, 4));
}

TEST(CheckpointChainTest, AMissingOrDamagedBaseIsNamedWithTheCheckpointThatNeedsIt) {
  const std::string root = TestRoot("broken");
  ASSERT_TRUE(WriteOne(root, 2, 1).ok());  // base 1 was never written
  const std::string two = root + "/ckpt-0000000002";
  absl::StatusOr<std::vector<FoundCheckpoint>> chain = CheckpointChain(two);
  EXPECT_EQ(chain.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(
      std::string(chain.status().message()),
      HasSubstr(two + " is incremental on " + root + "/ckpt-0000000001, which cannot be used"));

  ASSERT_TRUE(WriteOne(root, 1, 0).ok());
  ASSERT_TRUE(WriteOne(root, 3, 2).ok());
  {
    std::fstream f(two + "/MANIFEST", std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(20);
    f.put('\x5a');
  }
  chain = CheckpointChain(root + "/ckpt-0000000003");
  EXPECT_EQ(chain.status().code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(
      std::string(chain.status().message()),
      HasSubstr(root + "/ckpt-0000000003 is incremental on " + two + ", which cannot be used"));
  // The checkpoint itself missing is its own NOT_FOUND.
  EXPECT_EQ(CheckpointChain(root + "/ckpt-0000000009").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(CheckpointChainTest, ADamagedRecordInAChainIsNamedByItsFile) {
  const std::string root = TestRoot("record");
  const std::string record = DenseRecord("t", 0, 0, 1, {1, 2}, 0, {});
  ASSERT_TRUE(WriteTestCheckpoint(root, 1, 0, {DenseTableDef("t", 4, 1)},
                                  {{"a", record}, {"b", record + record.substr(0, 7)}})
                  .ok());
  absl::StatusOr<std::vector<FoundCheckpoint>> chain = CheckpointChain(root + "/ckpt-0000000001");
  ASSERT_TRUE(chain.ok());
  int records = 0;
  absl::Status s = ForEachChainRecord(*chain, [&](const FoundCheckpoint&, const SliceRecord&) {
    ++records;
    return absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(std::string(s.message()),
              HasSubstr(absl::StrCat(root, "/ckpt-0000000001/b at byte ", record.size(), ": ")));
  EXPECT_EQ(records, 2);
}

}  // namespace
}  // namespace ps
