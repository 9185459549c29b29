// The store's consistent cut (copy-on-write per slice) and restore from its
// records, onto the same and other placements.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_records.h"
#include "server/store/shard_store.h"
#include "tests/test_util/store_pull.h"
#include "tests/test_util/table_defs.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// SGD with learning rate 1 from zeros: a push of -1 adds 1.
proto::TableDef Counter(const std::string& name, bool sparse, uint64_t keys = 40) {
  return sparse ? SparseSumTable(name, /*width=*/2, /*num_buckets=*/8)
                : SumTable(name, keys, /*width=*/2);
}

// An AdaGrad table: state next to the values.
proto::TableDef WithState(const std::string& name, bool sparse) {
  return WithAdagrad(Counter(name, sparse), /*learning_rate=*/0.5f, /*initial_accumulator=*/0.1f);
}

const Placement kOne(1, {/*slice_size=*/8, 16});

// Keys of `store`'s part of the table (all keys of a one-server store).
std::vector<uint64_t> Keys(uint64_t n, bool sparse) {
  std::vector<uint64_t> keys(n);
  for (uint64_t i = 0; i < n; ++i) keys[i] = sparse ? i * 0x9e3779b97f4a7c15ULL + 1 : i;
  return keys;
}

absl::Status PushAll(ShardStore& store, const std::string& table, absl::Span<const uint64_t> keys,
                     uint64_t clock, float grad = -1.0f) {
  std::vector<float> g(keys.size() * 2, grad);
  return store.Push(table, KeySpec::List(keys), g, clock, [] { return absl::StatusOr<bool>(true); })
      .status();
}

std::vector<float> PullAll(ShardStore& store, const std::string& table,
                           absl::Span<const uint64_t> keys) {
  return PullAll(store, table, KeySpec::List(keys));
}

// Writes the store's cut into one string of records.
std::string WriteAll(ShardStore& store) {
  std::string file;
  absl::Status s = store.WriteCut([&](const proto::TableDef&, std::string record) {
    file += record;
    return absl::OkStatus();
  });
  EXPECT_TRUE(s.ok()) << s;
  return file;
}

absl::Status LoadAll(ShardStore& store, const std::string& file) {
  return ForEachSliceRecord(file, "test",
                            [&](const SliceRecord& r) { return store.LoadRecord(r).status(); });
}

class CutTest : public ::testing::TestWithParam<bool> {};

TEST_P(CutTest, HoldsExactlyThePushesBelowTheCut) {
  const bool sparse = GetParam();
  ShardStore store(0, kOne);
  ASSERT_TRUE(store.CreateTable(Counter("c", sparse)).ok());
  const std::vector<uint64_t> keys = Keys(40, sparse);
  const auto first = absl::MakeSpan(keys).subspan(0, 20);
  const auto second = absl::MakeSpan(keys).subspan(20);
  for (uint64_t clock = 0; clock < 3; ++clock) ASSERT_TRUE(PushAll(store, "c", keys, clock).ok());
  // Refused while a push at clock >= the cut was applied.
  absl::Status refused = store.MarkCut(2);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(refused.message(), HasSubstr("already applied a push at clock 2"));

  ASSERT_TRUE(store.MarkCut(5).ok());
  EXPECT_EQ(store.MarkCut(6).code(), absl::StatusCode::kFailedPrecondition);  // one at a time
  // Outside the cut: copies the first half's slices, then changes them.
  ASSERT_TRUE(PushAll(store, "c", first, 5).ok());
  // Inside: applied to both the copies and the slices.
  ASSERT_TRUE(PushAll(store, "c", keys, 4).ok());
  ASSERT_TRUE(PushAll(store, "c", keys, 3).ok());
  store.CompleteCut();
  // Complete: even an old clock is outside now.
  ASSERT_TRUE(PushAll(store, "c", second, 1).ok());
  // Live: 5 pushes below the cut, +1 outside.
  for (float v : PullAll(store, "c", keys)) EXPECT_EQ(v, 6.0f);

  const std::string file = WriteAll(store);
  ShardStore restored(0, kOne);
  ASSERT_TRUE(restored.CreateTable(Counter("c", sparse)).ok());
  ASSERT_TRUE(LoadAll(restored, file).ok());
  for (float v : PullAll(restored, "c", keys)) EXPECT_EQ(v, 5.0f);
  // The cut ended with the write: pushes touch the slices alone again, and a
  // new cut can be marked.
  ASSERT_TRUE(PushAll(store, "c", keys, 7).ok());
  EXPECT_TRUE(store.MarkCut(8).ok());
  store.EndCut();
}

// A cut written in records of at most 100 bytes of rows (a replication
// snapshot's, split to fit a message): 40 keys of 2 values and 2 AdaGrad
// state floats (16 bytes a dense key, 24 with a sparse key's id and its
// row) in several records, each within the bound; loaded into a fresh
// store (which held other rows before: the first record of a bucket
// replaces them), bit for bit the same.
TEST_P(CutTest, RecordsSplitToABoundLoadBackTheSame) {
  const bool sparse = GetParam();
  ShardStore store(0, kOne);
  ASSERT_TRUE(store.CreateTable(WithState("w", sparse)).ok());
  const std::vector<uint64_t> keys = Keys(40, sparse);
  for (uint64_t clock = 0; clock < 3; ++clock) {
    ASSERT_TRUE(PushAll(store, "w", keys, clock, 0.25f * (clock + 1)).ok());
  }
  ASSERT_TRUE(store.MarkCut(3).ok());
  store.CompleteCut();
  std::vector<std::string> records;
  ASSERT_TRUE(store
                  .WriteCut(
                      [&](const proto::TableDef&, std::string record) {
                        records.push_back(std::move(record));
                        return absl::OkStatus();
                      },
                      /*since=*/0, /*max_record_bytes=*/100)
                  .ok());
  size_t rows = 0;
  for (const std::string& record : records) {
    ASSERT_TRUE(ForEachSliceRecord(record, "test", [&](const SliceRecord& r) {
                  const size_t row_bytes =
                      r.header.floats_per_row() * sizeof(float) + (sparse ? 8 : 0);
                  EXPECT_LE(r.header.num_rows() * row_bytes, 100u);
                  rows += r.header.num_rows();
                  return absl::OkStatus();
                }).ok());
  }
  EXPECT_EQ(rows, 40u);
  EXPECT_GT(records.size(), sparse ? 8u : 5u) << "more records than buckets or slices";

  ShardStore restored(0, kOne);
  ASSERT_TRUE(restored.CreateTable(WithState("w", sparse)).ok());
  const std::vector<uint64_t> others = Keys(60, sparse);
  if (sparse) {
    ASSERT_TRUE(PushAll(restored, "w", others, 0, 9.0f).ok());
  }
  std::string file;
  for (const std::string& record : records) file += record;
  ASSERT_TRUE(LoadAll(restored, file).ok());
  EXPECT_EQ(PullAll(restored, "w", keys), PullAll(store, "w", keys));
  if (sparse) {
    // Rows only the fresh store had are gone: each bucket was replaced.
    const std::vector<uint64_t> extra(others.begin() + 40, others.end());
    for (float v : PullAll(restored, "w", extra)) EXPECT_EQ(v, 0.0f);
  }
}

// A table created after the cut was marked joins it: its pushes below the
// cut are in the checkpoint, those at or above it are not.
TEST_P(CutTest, TableCreatedDuringTheCutJoinsIt) {
  const bool sparse = GetParam();
  ShardStore store(0, kOne);
  ASSERT_TRUE(store.CreateTable(Counter("old", sparse)).ok());
  ASSERT_TRUE(store.MarkCut(5).ok());
  ASSERT_TRUE(store.CreateTable(Counter("new", sparse)).ok());
  const std::vector<uint64_t> keys = Keys(40, sparse);
  ASSERT_TRUE(PushAll(store, "new", keys, 3).ok());  // inside
  ASSERT_TRUE(PushAll(store, "new", keys, 5).ok());  // outside
  store.CompleteCut();
  const std::string file = WriteAll(store);
  ShardStore restored(0, kOne);
  ASSERT_TRUE(restored.CreateTable(Counter("old", sparse)).ok());
  ASSERT_TRUE(restored.CreateTable(Counter("new", sparse)).ok());
  ASSERT_TRUE(LoadAll(restored, file).ok());
  for (float v : PullAll(restored, "new", keys)) EXPECT_EQ(v, 1.0f);
  for (float v : PullAll(store, "new", keys)) EXPECT_EQ(v, 2.0f);
}

// The store of `p` that owns key k of table "w" (8 buckets or keys per slice).
ShardStore& Owner(const Placement& p, std::vector<std::unique_ptr<ShardStore>>& stores, uint64_t k,
                  bool sparse) {
  const uint64_t slice = sparse ? Placement::SparseSliceOf(k, 8) : k / 8;
  return *stores[p.OwnerOfSlice("w", slice)];
}

std::vector<std::unique_ptr<ShardStore>> Stores(const Placement& p, bool sparse) {
  std::vector<std::unique_ptr<ShardStore>> stores;
  for (int i = 0; i < p.num_servers(); ++i) {
    stores.push_back(std::make_unique<ShardStore>(i, p));
    EXPECT_TRUE(stores.back()->CreateTable(WithState("w", sparse)).ok());
  }
  return stores;
}

// Pushes one AdaGrad step to every key (gradients varying by key), then
// returns every key's values.
std::vector<float> Step(const Placement& p, std::vector<std::unique_ptr<ShardStore>>& stores,
                        const std::vector<uint64_t>& keys, bool sparse, uint64_t clock) {
  std::vector<float> values;
  for (uint64_t k : keys) {
    const uint64_t one[] = {k};
    ShardStore& owner = Owner(p, stores, k, sparse);
    EXPECT_TRUE(PushAll(owner, "w", one, clock, 0.1f * static_cast<float>(k % 7) - 0.3f).ok());
    for (float v : PullAll(owner, "w", one)) values.push_back(v);
  }
  return values;
}

void ExpectBitIdentical(const std::vector<float>& got, const std::vector<float>& expected,
                        const std::string& what) {
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_EQ(std::memcmp(&got[i], &expected[i], sizeof(float)), 0)
        << what << ": value " << i << " is " << got[i] << ", expected " << expected[i];
  }
}

TEST_P(CutTest, RestoresBitIdenticalStateOntoOtherServerCounts) {
  const bool sparse = GetParam();
  const std::vector<uint64_t> keys = Keys(40, sparse);
  // Taken on 2 servers.
  const Placement two(2, {8, 16});
  std::vector<std::unique_ptr<ShardStore>> taken = Stores(two, sparse);
  std::vector<float> at_cut;
  for (uint64_t clock = 0; clock < 4; ++clock) at_cut = Step(two, taken, keys, sparse, clock);
  std::string file;
  for (auto& s : taken) {
    ASSERT_TRUE(s->MarkCut(10).ok());
    s->CompleteCut();
    file += WriteAll(*s);
  }
  // The next step, on the servers that never stopped: it depends on the
  // optimizer state (AdaGrad's accumulators) as well as on the values.
  const std::vector<float> next = Step(two, taken, keys, sparse, 10);
  // Restored on 1, 2 and 3 servers: each takes its own part of every record.
  for (int n : {1, 2, 3}) {
    const Placement p(n, {8, 16});
    std::vector<std::unique_ptr<ShardStore>> stores = Stores(p, sparse);
    for (auto& s : stores) ASSERT_TRUE(LoadAll(*s, file).ok());
    std::vector<float> got;
    for (uint64_t k : keys) {
      const uint64_t one[] = {k};
      for (float v : PullAll(Owner(p, stores, k, sparse), "w", one)) got.push_back(v);
    }
    ExpectBitIdentical(got, at_cut, absl::StrCat("restored on ", n, " servers"));
    ExpectBitIdentical(Step(p, stores, keys, sparse, 10), next,
                       absl::StrCat("next step on ", n, " servers"));
  }
}

TEST_P(CutTest, ACopyOverTheMemoryBudgetFailsTheCutNotThePush) {
  const bool sparse = GetParam();
  const std::vector<uint64_t> keys = Keys(40, sparse);
  StoreLimits limits;
  {
    // The budget of the table and its rows, and less than a copy of a slice
    // more (dense slices of 8 keys of width 2: 64 bytes; sparse ones hold
    // a map of 16 slots, 192 bytes, and a first chunk of 16 rows).
    ShardStore probe(0, kOne);
    ASSERT_TRUE(probe.CreateTable(Counter("c", sparse)).ok());
    ASSERT_TRUE(PushAll(probe, "c", keys, 0).ok());
    limits.memory_budget_bytes = probe.bytes_used() + (sparse ? 128 : 32);
  }
  ShardStore store(0, kOne, limits);
  ASSERT_TRUE(store.CreateTable(Counter("c", sparse)).ok());
  {
    absl::Status pushed = PushAll(store, "c", keys, 0);
    ASSERT_TRUE(pushed.ok()) << pushed;
  }
  ASSERT_TRUE(store.MarkCut(3).ok());
  ASSERT_TRUE(PushAll(store, "c", keys, 3).ok());  // training goes on
  for (float v : PullAll(store, "c", keys)) EXPECT_EQ(v, 2.0f);
  absl::Status s =
      store.WriteCut([](const proto::TableDef&, std::string) { return absl::OkStatus(); });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(s.message(), HasSubstr("table 'c'"));
  EXPECT_THAT(s.message(), HasSubstr("memory budget"));
  // The copies' bytes all went back.
  ShardStore fresh(0, kOne, limits);
  ASSERT_TRUE(fresh.CreateTable(Counter("c", sparse)).ok());
  ASSERT_TRUE(PushAll(fresh, "c", keys, 0).ok());
  EXPECT_EQ(store.bytes_used(), fresh.bytes_used());
}

TEST(CutRestoreTest, RefusesRecordsOfAnotherLayout) {
  ShardStore store(0, kOne);
  ASSERT_TRUE(store.CreateTable(Counter("c", false)).ok());
  ASSERT_TRUE(store.MarkCut(1).ok());
  store.CompleteCut();
  const std::string file = WriteAll(store);
  ShardStore other(0, kOne);
  ASSERT_TRUE(other.CreateTable(WithState("c", false)).ok());
  absl::Status s = LoadAll(other, file);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("table 'c' slice 0"));
  ShardStore none(0, kOne);
  EXPECT_EQ(LoadAll(none, file).code(), absl::StatusCode::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(DenseAndSparse, CutTest, ::testing::Bool(),
                         [](const auto& info) { return info.param ? "Sparse" : "Dense"; });

}  // namespace
}  // namespace ps
