#include "server/store/dense_table.h"

#include <cstring>
#include <deque>
#include <memory>
#include <string>
#include <vector>

#include "common/key_spec.h"
#include "common/optimizer/optimizer.h"
#include "common/placement.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_records.h"
#include "server/store/cut_state.h"
#include "server/store/memory_budget.h"
#include "tests/test_util/table_defs.h"

namespace ps {
namespace {

using ::testing::FloatNear;
using ::testing::HasSubstr;
using ::testing::Pointwise;

// Width 2, 20 keys, SGD at rate 1 from zeros: a push of g subtracts g.
proto::TableDef Counter(const std::string& name, uint64_t keys = 20) {
  return SumTable(name, keys, /*width=*/2);
}

// AdaGrad: optimizer state next to the values.
proto::TableDef WithState(const std::string& name) {
  return WithAdagrad(Counter(name), /*learning_rate=*/0.5f, /*initial_accumulator=*/0.1f);
}

// Slices of 8 keys: 20 keys are slices [0, 8), [8, 16), [16, 20).
const Placement kOne(1, {/*slice_size=*/8, 16});

// A table given no cut state gets one of its own, kept for the test
// binary's life (a table must not outlive its cut state).
CutState* OwnCutState() {
  static auto* states = new std::deque<CutState>();
  return &states->emplace_back();
}

std::unique_ptr<DenseTable> Make(const proto::TableDef& def, MemoryBudget* budget,
                                 const Placement& placement = kOne, int server = 0,
                                 CutState* cut_state = nullptr) {
  if (cut_state == nullptr) cut_state = OwnCutState();
  auto optimizer = MakeOptimizer(def);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  return std::make_unique<DenseTable>(def, *std::move(optimizer), server, placement, budget,
                                      cut_state);
}

absl::StatusOr<bool> Admitted() { return true; }

// Pushes `grads` (checked keys), returning the values read back.
std::vector<float> Push(DenseTable& t, const KeySpec& keys, const std::vector<float>& grads,
                        uint64_t clock = 0) {
  EXPECT_TRUE(t.CheckKeys(keys).ok());
  std::vector<float> back(grads.size());
  uint64_t version = 0;
  absl::StatusOr<bool> applied =
      t.Push(keys, grads, clock, 1.0f, Admitted, reinterpret_cast<char*>(back.data()), &version);
  EXPECT_TRUE(applied.ok()) << applied.status();
  EXPECT_TRUE(applied.ok() && *applied);
  return back;
}

std::vector<float> Read(const DenseTable& t, const KeySpec& keys) {
  EXPECT_TRUE(t.CheckKeys(keys).ok());
  std::vector<float> out(keys.size() * t.def().width());
  t.Read(keys, reinterpret_cast<char*>(out.data()));
  return out;
}

std::vector<float> ReadAll(const DenseTable& t) {
  return Read(t, KeySpec::Single(0, t.def().num_keys()));
}

// Every record WriteCut gives, parsed.
struct Written {
  std::string file;
  int records = 0;
};
Written WriteAll(DenseTable& t, uint64_t since = 0, size_t max_record_bytes = 0) {
  Written w;
  absl::Status s = t.WriteCut(
      [&](std::string record) {
        w.file += record;
        ++w.records;
        return absl::OkStatus();
      },
      since, max_record_bytes);
  EXPECT_TRUE(s.ok()) << s;
  return w;
}

absl::Status LoadAll(DenseTable& t, const std::string& file, uint64_t* loaded = nullptr) {
  return ForEachSliceRecord(file, "test", [&](const SliceRecord& r) -> absl::Status {
    absl::StatusOr<uint64_t> n = t.LoadRecord(r);
    if (!n.ok()) return n.status();
    if (loaded != nullptr) *loaded += *n;
    return absl::OkStatus();
  });
}

TEST(DenseTableTest, PushesRangesAcrossSlicesAndKeyListsAndReadsBackUnderTheSameLock) {
  MemoryBudget budget(~uint64_t{0});
  auto table = Make(Counter("t"), &budget);
  // Keys 3..12 cross the first slice boundary (8); each key gets -(key + 1).
  std::vector<float> grads;
  for (uint64_t k = 3; k < 13; ++k) grads.insert(grads.end(), 2, -(k + 1.0f));
  std::vector<float> back = Push(*table, KeySpec::Single(3, 13), grads);
  for (size_t i = 0; i < grads.size(); ++i) EXPECT_EQ(back[i], -grads[i]) << "value " << i;
  // A key list out of order, across the three slices, a key listed twice.
  const std::vector<uint64_t> list = {19, 0, 5, 5, 12};
  back = Push(*table, KeySpec::List(list), std::vector<float>(list.size() * 2, -1.0f));
  const std::vector<float> expected_back = {1, 1, 1, 1, 7, 7, 8, 8, 14, 14};
  EXPECT_EQ(back, expected_back);
  const std::vector<float> all = ReadAll(*table);
  for (uint64_t k = 0; k < 20; ++k) {
    float v = (k >= 3 && k < 13) ? k + 1.0f : 0.0f;
    for (uint64_t l : list) v += l == k ? 1.0f : 0.0f;
    EXPECT_EQ(all[2 * k], v) << "key " << k;
    EXPECT_EQ(all[2 * k + 1], v) << "key " << k;
  }
  EXPECT_EQ(table->version().load(), 2u);
}

TEST(DenseTableTest, SeveralRangesTakeTheirValuesInOrder) {
  MemoryBudget budget(~uint64_t{0});
  auto table = Make(Counter("t"), &budget);
  const KeySpec keys = KeySpec::Ranges({{18, 20}, {1, 2}, {7, 9}});
  Push(*table, keys, {-1, -2, -3, -4, -5, -6, -7, -8, -9, -10});
  EXPECT_EQ(Read(*table, KeySpec::List(std::vector<uint64_t>{18, 19, 1, 7, 8})),
            std::vector<float>({1, 2, 3, 4, 5, 6, 7, 8, 9, 10}));
  EXPECT_EQ(Read(*table, KeySpec::Single(2, 7)), std::vector<float>(10, 0.0f));
}

TEST(DenseTableTest, InvalidKeysAreRefusedNamingTheTableAndKey) {
  MemoryBudget budget(~uint64_t{0});
  auto table = Make(Counter("t"), &budget);
  absl::Status reversed = table->CheckKeys(KeySpec::Single(5, 4));
  EXPECT_EQ(reversed.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(reversed.message(), HasSubstr("table 't': range [5, 4) is reversed"));
  absl::Status past = table->CheckKeys(KeySpec::Ranges({{0, 2}, {10, 21}}));
  EXPECT_EQ(past.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(past.message(), HasSubstr("range [10, 21) exceeds num_keys 20"));
  const std::vector<uint64_t> list = {1, 2, 25, 3};
  absl::Status key = table->CheckKeys(KeySpec::List(list));
  EXPECT_EQ(key.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(key.message(), HasSubstr("table 't': key 25 >= num_keys 20"));
  EXPECT_TRUE(table->CheckKeys(KeySpec::Single(0, 20)).ok());
}

TEST(DenseTableTest, KeysOfAnotherServerAreRefusedNamingKeySliceAndOwner) {
  MemoryBudget budget(~uint64_t{0});
  const Placement two(2, {/*slice_size=*/8, 16});
  const proto::TableDef def = Counter("t", 800);
  auto table = Make(def, &budget, two, /*server=*/0);
  uint64_t foreign_slice = 0;
  while (two.OwnerOfSlice("t", foreign_slice) == 0) ++foreign_slice;
  const uint64_t key = foreign_slice * 8 + 3;
  const std::vector<uint64_t> list = {key};
  absl::Status s = table->CheckKeys(KeySpec::List(list));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("key " + std::to_string(key) + " (slice " +
                                     std::to_string(foreign_slice) + ") is owned by server 1"));
  // Server 1's table holds the slice.
  auto other = Make(def, &budget, two, /*server=*/1);
  EXPECT_TRUE(other->CheckKeys(KeySpec::List(list)).ok());
}

TEST(DenseTableTest, ARetryIsNotAppliedButReadsBackAndAnAdmitErrorChangesNothing) {
  MemoryBudget budget(~uint64_t{0});
  auto table = Make(Counter("t"), &budget);
  Push(*table, KeySpec::Single(0, 2), {-1, -1, -2, -2});
  std::vector<float> back(4, -9.0f);
  uint64_t version = 7;
  absl::StatusOr<bool> retry = table->Push(
      KeySpec::Single(0, 2), std::vector<float>(4, -5.0f), 0, 1.0f,
      [] { return absl::StatusOr<bool>(false); }, reinterpret_cast<char*>(back.data()), &version);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_FALSE(*retry);
  EXPECT_EQ(version, 1u);
  EXPECT_EQ(back, std::vector<float>({1, 1, 2, 2}));
  absl::StatusOr<bool> refused = table->Push(
      KeySpec::Single(0, 2), std::vector<float>(4, -5.0f), 0, 1.0f,
      [] { return absl::StatusOr<bool>(absl::AbortedError("no lease")); }, nullptr, &version);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kAborted);
  EXPECT_EQ(Read(*table, KeySpec::Single(0, 2)), std::vector<float>({1, 1, 2, 2}));
  EXPECT_EQ(table->version().load(), 1u);
}

TEST(DenseTableTest, BytesToCreateCountsTheOwnedSlicesOfEachServer) {
  const proto::TableDef sgd = Counter("t");
  // 20 keys x 2 floats, three slices of 128 bytes of bookkeeping, three
  // slice pointers.
  const uint64_t pointers = 3 * sizeof(void*);
  EXPECT_EQ(DenseTable::BytesToCreate(sgd, 0, kOne, 0), 20 * 2 * 4 + 3 * 128 + pointers);
  // AdaGrad doubles the floats.
  EXPECT_EQ(DenseTable::BytesToCreate(sgd, 1, kOne, 0), 20 * 2 * 2 * 4 + 3 * 128 + pointers);
  // Over servers the slices add up to the table's.
  const Placement three(3, {/*slice_size=*/8, 16});
  const proto::TableDef big = Counter("big", 1000);  // 125 slices
  uint64_t sum = 0;
  for (int s = 0; s < 3; ++s) {
    sum += DenseTable::BytesToCreate(big, 0, three, s) - 125 * sizeof(void*);
  }
  EXPECT_EQ(sum, 1000 * 2 * 4 + 125 * 128);
}

// What the store does to mark a cut (ShardStore::MarkCut).
void MarkCut(CutState& cut_state, DenseTable& table, uint64_t cut) {
  cut_state.set_complete(false);
  cut_state.ClearError();
  cut_state.RaiseLastMarked(cut);
  table.SetCut(cut);
}

TEST(DenseTableTest, ACutHoldsThePushesBelowItAndLoadsBackOntoOtherSliceSizes) {
  MemoryBudget budget(~uint64_t{0});
  CutState cut_state;
  const proto::TableDef def = WithState("t");
  auto table = Make(def, &budget, kOne, 0, &cut_state);
  auto reference = Make(def, &budget);  // gets only the pushes inside the cut
  const std::vector<float> g1(40, 0.25f), g2(40, -0.5f), g3(8, 1.0f);
  Push(*table, KeySpec::Single(0, 20), g1, 1);
  Push(*reference, KeySpec::Single(0, 20), g1, 1);
  MarkCut(cut_state, *table, 10);
  Push(*table, KeySpec::Single(0, 20), g2, 12);  // outside: copies every slice first
  EXPECT_GT(budget.used(), 0u) << "the copies are charged";
  Push(*table, KeySpec::Single(6, 10), g3, 5);  // inside: to the copies as well
  Push(*reference, KeySpec::Single(6, 10), g3, 5);
  cut_state.set_complete(true);
  const Written whole = WriteAll(*table);
  EXPECT_EQ(whole.records, 3);
  EXPECT_EQ(budget.used(), 0u) << "the copies are given back";
  EXPECT_TRUE(cut_state.error().ok());

  // Records of at most 3 rows (of 2 values and 2 state floats) each.
  MarkCut(cut_state, *table, 20);
  cut_state.set_complete(true);
  EXPECT_NE(ReadAll(*table), ReadAll(*reference)) << "the table moved on past the cut";
  const Written split = WriteAll(*table, 0, 3 * 4 * sizeof(float));
  EXPECT_EQ(split.records, 3 + 3 + 2);

  for (const Placement& placement : {kOne, Placement(1, {/*slice_size=*/3, 16})}) {
    auto restored = Make(def, &budget, placement);
    uint64_t loaded = 0;
    ASSERT_TRUE(LoadAll(*restored, whole.file, &loaded).ok());
    EXPECT_EQ(loaded, 20u);
    EXPECT_EQ(ReadAll(*restored), ReadAll(*reference));
    // The optimizer state came along: the same push gives the same values
    // (to rounding: the kernel's vectorized and scalar paths may differ in
    // the last bit, and the runs here have another length).
    Push(*restored, KeySpec::Single(0, 20), g2, 30);
    Push(*reference, KeySpec::Single(0, 20), g2, 30);
    EXPECT_THAT(ReadAll(*restored), Pointwise(FloatNear(1e-6f), ReadAll(*reference)));
    // Split records load back the same as whole ones.
    auto from_split = Make(def, &budget, placement);
    ASSERT_TRUE(LoadAll(*from_split, split.file).ok());
    EXPECT_EQ(ReadAll(*from_split), ReadAll(*table));
    auto undo = Make(def, &budget);  // reference back to the cut's state
    ASSERT_TRUE(LoadAll(*undo, whole.file).ok());
    reference = std::move(undo);
  }
}

TEST(DenseTableTest, AnIncrementalWriteHoldsOnlyTheSlicesChangedSinceTheBase) {
  MemoryBudget budget(~uint64_t{0});
  CutState cut_state;
  auto table = Make(Counter("t"), &budget, kOne, 0, &cut_state);
  Push(*table, KeySpec::Single(0, 20), std::vector<float>(40, -1.0f), 1);
  MarkCut(cut_state, *table, 10);
  EXPECT_EQ(WriteAll(*table, 0).records, 3);
  // Only key 9 (slice 1) changes after the cut at 10.
  Push(*table, KeySpec::Single(9, 10), {-1, -1}, 15);
  MarkCut(cut_state, *table, 20);
  const Written delta = WriteAll(*table, /*since=*/10);
  ASSERT_EQ(delta.records, 1);
  auto restored = Make(Counter("t"), &budget);
  ASSERT_TRUE(ForEachSliceRecord(delta.file, "test", [&](const SliceRecord& r) {
                EXPECT_EQ(r.header.slice(), 1u);
                EXPECT_EQ(r.header.first_key(), 8u);
                return restored->LoadRecord(r).status();
              }).ok());
  EXPECT_EQ(Read(*restored, KeySpec::Single(8, 10)), std::vector<float>({1, 1, 2, 2}));
  // Nothing changed since 20: nothing written.
  MarkCut(cut_state, *table, 30);
  EXPECT_EQ(WriteAll(*table, /*since=*/20).records, 0);
}

TEST(DenseTableTest, ACopyOverTheBudgetFailsTheCutNamingTheTableNotThePush) {
  // Room for nothing: the first push outside the cut cannot copy its slice.
  MemoryBudget budget(0);
  CutState cut_state;
  auto table = Make(Counter("c"), &budget, kOne, 0, &cut_state);
  MarkCut(cut_state, *table, 10);
  Push(*table, KeySpec::Single(0, 1), {-1, -1}, 11);
  EXPECT_EQ(Read(*table, KeySpec::Single(0, 1)), std::vector<float>({1, 1}))
      << "the push is applied";
  const absl::Status error = cut_state.error();
  EXPECT_EQ(error.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(error.message(), HasSubstr("table 'c'"));
  EXPECT_THAT(error.message(), HasSubstr("memory budget on server 0"));
  EXPECT_EQ(budget.used(), 0u);
  // The failed slice left the cut: the other two are still written.
  EXPECT_EQ(WriteAll(*table).records, 2);
}

TEST(DenseTableTest, RecordsOfAnotherLayoutOrPastTheTableAreRefused) {
  MemoryBudget budget(~uint64_t{0});
  auto adagrad = Make(WithState("t"), &budget);
  const Written w = WriteAll(*adagrad);  // not in a cut: nothing
  EXPECT_EQ(w.records, 0);
  CutState cut_state;
  auto sgd = Make(Counter("t"), &budget, kOne, 0, &cut_state);
  MarkCut(cut_state, *sgd, 5);
  const Written records = WriteAll(*sgd);
  absl::Status s = LoadAll(*adagrad, records.file);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("table 't' slice 0"));
  auto small = Make(Counter("t", 10), &budget);
  s = LoadAll(*small, records.file);
  EXPECT_EQ(s.code(), absl::StatusCode::kDataLoss);
  EXPECT_THAT(s.message(), HasSubstr("keys [8, 16) exceeds num_keys 10"));
}

}  // namespace
}  // namespace ps
