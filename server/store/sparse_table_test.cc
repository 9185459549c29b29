#include "server/store/sparse_table.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <memory>
#include <vector>

#include "common/optimizer/optimizer.h"
#include "common/placement.h"
#include "common/table_layout.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/memory_budget.h"
#include "tests/test_util/table_defs.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

proto::TableDef SparseDef(const std::string& name, uint32_t width, proto::OptimizerKind opt,
                          proto::Initializer init = proto::INIT_ZEROS) {
  proto::TableDef def = SparseTableDef(name, width, /*num_buckets=*/64);
  def.set_initializer(init);
  def.set_init_low(-1.0f);
  def.set_init_high(1.0f);
  def.set_seed(99);
  def.set_optimizer(opt);
  def.set_learning_rate(1.0f);
  def.set_initial_accumulator(0.1f);
  def.set_epsilon(1e-8f);
  def.set_beta1(0.9f);
  def.set_beta2(0.999f);
  return def;
}

std::unique_ptr<SparseTable> Make(const proto::TableDef& def, MemoryBudget* budget, int server = 0,
                                  int servers = 1, Clock* clock = Clock::Real()) {
  auto optimizer = MakeOptimizer(def);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  return std::make_unique<SparseTable>(def, *std::move(optimizer), server, Placement(servers),
                                       budget, clock);
}

absl::StatusOr<bool> Admitted() { return true; }

std::vector<float> Read(const SparseTable& t, const std::vector<uint64_t>& keys) {
  std::vector<float> out(keys.size() * t.def().width());
  EXPECT_TRUE(t.Read(keys, reinterpret_cast<char*>(out.data())).ok());
  return out;
}

TEST(SparseTableTest, RowsAreCreatedByPushesAndSumExactlyWithSgdAtRateOne) {
  MemoryBudget budget(~uint64_t{0});
  auto table = Make(SparseDef("s", 2, proto::OPT_SGD), &budget);
  // Any uint64, a key listed twice in one push, keys beyond 2^63.
  const std::vector<uint64_t> keys = {0,  ~uint64_t{0}, (uint64_t{1} << 63) + 5,
                                      42, 42,           123456789012345ULL};
  const std::vector<float> minus_one(keys.size() * 2, -1.0f);
  for (int k = 0; k < 10; ++k) {
    ASSERT_TRUE(table->CheckOwned(keys).ok());
    auto pushed = table->Push(keys, minus_one, k, Admitted, nullptr);
    ASSERT_TRUE(pushed.ok()) << pushed.status();
    EXPECT_TRUE(*pushed);
  }
  EXPECT_EQ(table->rows(), 5u);
  const std::vector<float> values = Read(*table, keys);
  for (size_t i = 0; i < keys.size(); ++i) {
    const float expected = keys[i] == 42 ? 20.0f : 10.0f;
    EXPECT_EQ(values[2 * i], expected) << "key " << keys[i];
    EXPECT_EQ(values[2 * i + 1], expected) << "key " << keys[i];
  }
  EXPECT_EQ(table->version().load(), 10u);
}

TEST(SparseTableTest, ReadsOfMissingKeysGiveTheInitialValuesWithoutCreatingRows) {
  MemoryBudget budget(~uint64_t{0});
  const proto::TableDef def = SparseDef("u", 3, proto::OPT_SGD, proto::INIT_UNIFORM);
  auto one = Make(def, &budget);
  const std::vector<uint64_t> keys = {7, 1ULL << 40, 99999};
  const std::vector<float> before = Read(*one, keys);
  EXPECT_EQ(one->rows(), 0u);
  EXPECT_EQ(one->bytes(), 0u);
  for (float v : before) {
    EXPECT_GE(v, -1.0f);
    EXPECT_LT(v, 1.0f);
  }
  EXPECT_NE(before[0], before[3]);  // keys differ
  // A push of zeros creates the rows with the same values, and another
  // server of a larger cluster creates a key it owns with the same values.
  const std::vector<float> zeros(keys.size() * 3, 0.0f);
  ASSERT_TRUE(one->Push(keys, zeros, 0, Admitted, nullptr).ok());
  EXPECT_EQ(one->rows(), 3u);
  EXPECT_EQ(Read(*one, keys), before);
  for (int server = 0; server < 3; ++server) {
    auto part = Make(def, &budget, server, 3);
    for (size_t i = 0; i < keys.size(); ++i) {
      if (!part->CheckOwned({&keys[i], 1}).ok()) continue;
      ASSERT_TRUE(part->Push({&keys[i], 1}, {zeros.data(), 3}, 0, Admitted, nullptr).ok());
      const std::vector<float> v = Read(*part, {keys[i]});
      EXPECT_EQ(v, std::vector<float>(before.begin() + 3 * i, before.begin() + 3 * i + 3));
    }
  }
}

TEST(SparseTableTest, KeysOfOtherServersAreRefusedNamingTheOwner) {
  MemoryBudget budget(~uint64_t{0});
  auto table = Make(SparseDef("t", 1, proto::OPT_SGD), &budget, 1, 2);
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 100; ++k) keys.push_back(k);
  const absl::Status s = table->CheckOwned(keys);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("is owned by server 0, not server 1"));
  EXPECT_THAT(s.message(), HasSubstr("table 't'"));
}

TEST(SparseTableTest, APlanGroupsKeysIntoMaximalRunsOfOneSlice) {
  MemoryBudget budget(~uint64_t{0});
  auto table = Make(SparseDef("t", 1, proto::OPT_SGD), &budget);
  EXPECT_TRUE(table->Plan({}).value().groups.empty());
  // Keys in no order: a slice recurs in separate runs, some runs are long
  // (a key repeated), the list ends with a run of one.
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 300; ++k) keys.push_back(k * 2654435761u);
  for (int i = 0; i < 20; ++i) keys.push_back(keys[7]);
  for (uint64_t k = 0; k < 50; ++k) keys.push_back(k * 2654435761u);
  keys.push_back(123456789);
  const absl::StatusOr<SparseTable::KeyPlan> plan = table->Plan(keys);
  ASSERT_TRUE(plan.ok()) << plan.status();
  size_t next = 0, longest = 0;
  for (size_t k = 0; k < plan->groups.size(); ++k) {
    const SparseTable::Group& g = plan->groups[k];
    ASSERT_EQ(g.begin, next) << "group " << k;
    ASSERT_LT(g.begin, g.end) << "group " << k;
    for (size_t i = g.begin; i < g.end; ++i) {
      EXPECT_EQ(table->SliceOf(keys[i]), g.slice) << "key " << i;
      EXPECT_EQ(plan->hashes[i], SparseRows::Hash(keys[i])) << "key " << i;
    }
    if (k > 0) {
      EXPECT_NE(plan->groups[k - 1].slice, g.slice) << "group " << k;
    }
    longest = std::max(longest, g.end - g.begin);
    next = g.end;
  }
  EXPECT_EQ(next, keys.size());
  EXPECT_EQ(plan->max_group, longest);
  EXPECT_GE(longest, 20u);  // the 20 repeats of key 7 at least
}

TEST(SparseTableTest, APushOverTheBudgetAppliesNothingAndTheBytesReturnAtTheEnd) {
  MemoryBudget budget(200 << 10);  // room for about three 64 KiB chunks
  {
    auto table = Make(SparseDef("b", 16, proto::OPT_ADAGRAD), &budget);
    std::vector<uint64_t> keys;
    for (uint64_t k = 0; k < 5000; ++k) keys.push_back(k * 7919);  // ~640 KB of rows
    const std::vector<float> ones(keys.size() * 16, 1.0f);
    bool admitted = false;
    auto pushed = table->Push(
        keys, ones, 0,
        [&]() -> absl::StatusOr<bool> {
          admitted = true;
          return true;
        },
        nullptr);
    ASSERT_EQ(pushed.status().code(), absl::StatusCode::kResourceExhausted) << pushed.status();
    EXPECT_THAT(pushed.status().message(), HasSubstr("memory_budget_mb"));
    EXPECT_FALSE(admitted);  // not recorded as applied: a retry may succeed
    EXPECT_EQ(Read(*table, keys), std::vector<float>(ones.size(), 0.0f));
    EXPECT_LE(budget.used(), budget.limit());
    EXPECT_EQ(budget.used(), table->bytes());
    // A smaller push still fits.
    const std::vector<uint64_t> first = {keys[0]};
    ASSERT_TRUE(table->Push(first, {ones.data(), 16}, 0, Admitted, nullptr).ok());
    EXPECT_NE(Read(*table, first)[0], 0.0f);
    EXPECT_EQ(budget.used(), table->bytes());
  }
  EXPECT_EQ(budget.used(), 0u);
}

TEST(SparseTableTest, ARetryIsNotAppliedButReadsBack) {
  MemoryBudget budget(~uint64_t{0});
  auto table = Make(SparseDef("r", 1, proto::OPT_SGD), &budget);
  const std::vector<uint64_t> keys = {5, 6};
  const std::vector<float> minus_one = {-1.0f, -1.0f};
  std::vector<float> out(2, -7.0f);
  ASSERT_TRUE(table->Push(keys, minus_one, 0, Admitted, reinterpret_cast<char*>(out.data())).ok());
  EXPECT_EQ(out, (std::vector<float>{1.0f, 1.0f}));
  auto retry = table->Push(
      keys, minus_one, 0, []() -> absl::StatusOr<bool> { return false; },
      reinterpret_cast<char*>(out.data()));
  ASSERT_TRUE(retry.ok());
  EXPECT_FALSE(*retry);
  EXPECT_EQ(out, (std::vector<float>{1.0f, 1.0f}));
}

// Pushes -1 to each key once at `clock` (SGD at rate 1: +1 per applied push).
void PushOnce(SparseTable& table, const std::vector<uint64_t>& keys, uint64_t clock) {
  const std::vector<float> minus_one(keys.size() * table.def().width(), -1.0f);
  auto pushed = table.Push(keys, minus_one, clock, Admitted, nullptr);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
}

TEST(SparseTableTest, AKeyIsAdmittedOnlyAfterItsNthPush) {
  MemoryBudget budget(~uint64_t{0});
  proto::TableDef def = SparseDef("a", 1, proto::OPT_SGD);
  def.set_admit_after_pushes(3);
  auto table = Make(def, &budget);
  const std::vector<uint64_t> key = {77};
  for (int k = 0; k < 2; ++k) PushOnce(*table, key, k);
  EXPECT_EQ(table->rows(), 0u);
  EXPECT_EQ(table->refused(), 2u);
  EXPECT_EQ(Read(*table, key)[0], 0.0f);  // the initial value: nothing applied
  PushOnce(*table, key, 2);               // the third push creates the row and is applied
  EXPECT_EQ(table->rows(), 1u);
  EXPECT_EQ(table->admitted(), 1u);
  EXPECT_EQ(Read(*table, key)[0], 1.0f);
  PushOnce(*table, key, 3);
  EXPECT_EQ(Read(*table, key)[0], 2.0f);
  EXPECT_EQ(table->refused(), 2u);
}

TEST(SparseTableTest, ARefusedKeyReadsBackItsInitialValues) {
  MemoryBudget budget(~uint64_t{0});
  proto::TableDef def = SparseDef("r", 3, proto::OPT_SGD, proto::INIT_UNIFORM);
  def.set_admit_after_pushes(2);
  auto table = Make(def, &budget);
  const std::vector<uint64_t> keys = {11, 12};
  const std::vector<float> initial = Read(*table, keys);
  const std::vector<float> minus_one(6, -1.0f);
  // Read back into an unaligned buffer, as a gRPC reply may be.
  std::vector<char> out(6 * sizeof(float) + 1);
  ASSERT_TRUE(table->Push(keys, minus_one, 0, Admitted, out.data() + 1).ok());
  std::vector<float> back(6);
  std::memcpy(back.data(), out.data() + 1, back.size() * sizeof(float));
  EXPECT_EQ(back, initial);
  EXPECT_EQ(table->refused(), 2u);
}

TEST(SparseTableTest, KeysAreAdmittedWithTheGivenProbability) {
  MemoryBudget budget(~uint64_t{0});
  proto::TableDef def = SparseDef("p", 1, proto::OPT_SGD);
  def.set_admit_probability(0.25f);
  auto table = Make(def, &budget);
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 20000; ++k) keys.push_back(k * 0x9e3779b97f4a7c15ULL);
  PushOnce(*table, keys, 0);
  // Binomial(20000, 0.25): mean 5000, standard deviation 61.
  EXPECT_NEAR(static_cast<double>(table->admitted()), 5000, 5 * 61);
  EXPECT_EQ(table->admitted() + table->refused(), keys.size());
  EXPECT_EQ(table->rows(), table->admitted());
  // Admitted keys got their push; refused ones read as initial values.
  const std::vector<float> values = Read(*table, keys);
  uint64_t ones = 0;
  for (float v : values) ones += v == 1.0f;
  EXPECT_EQ(ones, table->admitted());
}

TEST(SparseTableTest, RowsNotUpdatedForTClocksAreEvictedBySweeps) {
  MemoryBudget budget(~uint64_t{0});
  proto::TableDef def = SparseDef("c", 1, proto::OPT_SGD);
  def.set_evict_after_clocks(5);
  auto table = Make(def, &budget);
  PushOnce(*table, {1}, 0);
  PushOnce(*table, {2}, 4);
  EXPECT_EQ(table->Sweep(), 0u);  // clock 4: nothing 5 clocks old
  PushOnce(*table, {3}, 10);
  EXPECT_EQ(table->Sweep(), 2u);  // keys 1 (clock 0) and 2 (clock 4) are older than 10 - 5
  EXPECT_EQ(table->evicted(), 2u);
  EXPECT_EQ(table->rows(), 1u);
  EXPECT_EQ(Read(*table, {1, 2, 3}), (std::vector<float>{0.0f, 0.0f, 1.0f}));
  // An evicted key comes back fresh, on the free row.
  const uint64_t bytes = table->bytes();
  PushOnce(*table, {1}, 11);
  EXPECT_EQ(Read(*table, {1})[0], 1.0f);
  EXPECT_EQ(table->bytes(), bytes);
}

TEST(SparseTableTest, RowsNotUpdatedForTSecondsAreEvictedOnTheClock) {
  MemoryBudget budget(~uint64_t{0});
  FakeClock clock;
  proto::TableDef def = SparseDef("s", 1, proto::OPT_SGD);
  def.set_evict_after_seconds(10);
  auto table = Make(def, &budget, 0, 1, &clock);
  PushOnce(*table, {1}, 0);
  clock.Advance(absl::Seconds(8));
  PushOnce(*table, {2}, 0);
  clock.Advance(absl::Seconds(5));  // key 1: 13 s old, key 2: 5 s
  EXPECT_EQ(table->Sweep(), 1u);
  EXPECT_EQ(Read(*table, {1, 2}), (std::vector<float>{0.0f, 1.0f}));
}

TEST(SparseTableTest, TheRowCapEvictsTheLeastRecentlyOrLeastOftenUpdated) {
  for (proto::EvictionPolicy policy : {proto::EVICT_LRU, proto::EVICT_LFU}) {
    SCOPED_TRACE(proto::EvictionPolicy_Name(policy));
    MemoryBudget budget(~uint64_t{0});
    proto::TableDef def = SparseDef("cap", 1, proto::OPT_SGD);
    def.set_num_buckets(1);
    def.set_max_rows(100);
    def.set_eviction(policy);
    auto table = Make(def, &budget);
    // 20 hot keys pushed at every clock, 1000 cold keys once each.
    std::vector<uint64_t> hot;
    for (uint64_t k = 0; k < 20; ++k) hot.push_back(1000000 + k);
    for (uint64_t c = 0; c < 1000; ++c) {
      PushOnce(*table, {c}, c);
      PushOnce(*table, hot, c);
    }
    EXPECT_EQ(table->rows(), 100u);
    EXPECT_EQ(table->evicted(), 1020u - 100u);
    // The hot keys were updated at every clock (LRU: recently; LFU: often):
    // sampled eviction keeps nearly all of them.
    int kept = 0;
    for (float v : Read(*table, hot)) kept += v > 0;
    EXPECT_GE(kept, 18);
  }
}

// Bytes per row, printed for the README, and the target for width 16 with
// AdaGrad: at most 1.25x the row's raw floats.
TEST(SparseTableTest, BytesPerRow) {
  for (proto::OptimizerKind opt : {proto::OPT_SGD, proto::OPT_ADAGRAD, proto::OPT_ADAM}) {
    for (uint32_t width : {1u, 16u, 64u}) {
      MemoryBudget budget(~uint64_t{0});
      auto table = Make(SparseDef("m", width, opt), &budget);
      constexpr uint64_t kRows = 200000;
      std::vector<uint64_t> keys(kRows);
      for (uint64_t k = 0; k < kRows; ++k) keys[k] = k * 0x9e3779b97f4a7c15ULL;
      const std::vector<float> grads(keys.size() * width, 0.5f);
      ASSERT_TRUE(table->Push(keys, grads, 0, Admitted, nullptr).ok());
      ASSERT_EQ(table->rows(), kRows);
      const int spv = (*MakeOptimizer(SparseDef("x", width, opt)))->state_per_value();
      const double raw = width * (1.0 + spv) * sizeof(float);
      const double per_row = static_cast<double>(table->bytes()) / kRows;
      std::printf("BYTES_PER_ROW optimizer=%s width=%u raw=%.0f bytes=%.1f ratio=%.3f\n",
                  proto::OptimizerKind_Name(opt).c_str(), width, raw, per_row, per_row / raw);
      EXPECT_EQ(budget.used(), table->bytes());
      if (opt == proto::OPT_ADAGRAD && width == 16) {
        EXPECT_LE(per_row, 1.25 * raw);
      }
    }
  }
}

}  // namespace
}  // namespace ps
