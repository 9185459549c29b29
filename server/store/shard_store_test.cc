#include "server/store/shard_store.h"

#include <cmath>
#include <limits>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/test_util/store_pull.h"
#include "tests/test_util/table_defs.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// Uniform in [-1, 1) (seed 7), SGD at learning rate 1.
proto::TableDef Def(const std::string& name, uint64_t keys, uint32_t width = 1) {
  return WithSgd(WithUniformInit(DenseTableDef(name, keys, width), -1, 1, /*seed=*/7), 1.0f);
}

// A store charges its tables to the process's budget too; dropped, it gives
// every byte back (dense tables are charged whole at creation).
TEST(ShardStoreTest, ADroppedStoreGivesItsTablesBytesBackToTheProcess) {
  MemoryBudget process(uint64_t{1} << 30);
  StoreLimits limits;
  limits.process_budget = &process;
  {
    ShardStore store(0, Placement(1), limits);
    ASSERT_TRUE(store.CreateTable(Def("w", 1000, 4)).ok());
    ASSERT_TRUE(store.CreateTable(SparseSumTable("s", 2)).ok());
    const std::vector<uint64_t> keys = {1, 2, 3};
    const std::vector<float> grads(6, -1.0f);
    ASSERT_TRUE(
        store.Push("s", KeySpec::List(keys), grads, 0, [] { return absl::StatusOr<bool>(true); })
            .ok());
    EXPECT_GE(process.used(), 1000u * 4 * sizeof(float));
    EXPECT_EQ(process.used(), store.bytes_used());
  }
  EXPECT_EQ(process.used(), 0u);
}

TEST(ShardStoreTest, CreateIsIdempotentAndConflictsAreErrors) {
  ShardStore store(0, Placement(1));
  EXPECT_TRUE(*store.CreateTable(Def("w", 10)));
  EXPECT_FALSE(*store.CreateTable(Def("w", 10)));
  auto conflict = store.CreateTable(Def("w", 11));
  EXPECT_EQ(conflict.status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(conflict.status().message(), HasSubstr("keys=10"));
  EXPECT_THAT(conflict.status().message(), HasSubstr("keys=11"));
  proto::TableDef bad = Def("v", 10);
  bad.set_width(0);
  EXPECT_EQ(store.CreateTable(bad).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ShardStoreTest, SgdPushAppliesToRangeAndKeyList) {
  ShardStore store(0, Placement(1, {/*slice_size=*/4, 16}));
  proto::TableDef def = Def("w", 10, /*width=*/2);
  def.set_initializer(proto::INIT_ZEROS);
  ASSERT_TRUE(store.CreateTable(def).ok());
  // Range [3, 6) spans slices 0 and 1.
  std::vector<float> g(6);
  for (int i = 0; i < 6; ++i) g[i] = i + 1;
  auto r = store.Push("w", KeySpec::Single(3, 6), g);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->version, 1u);
  const std::vector<uint64_t> keys = {9, 3};
  ASSERT_TRUE(store.Push("w", KeySpec::List(keys), {1, 1, 10, 10}).ok());
  const auto all = PullAll(store, "w", KeySpec::Single(0, 10));
  const std::vector<float> expected = {0,  0,  0, 0, 0, 0, -11, -12, -3, -4,
                                       -5, -6, 0, 0, 0, 0, 0,   0,   -1, -1};
  EXPECT_EQ(all, expected);
  EXPECT_EQ(PullAll(store, "w", KeySpec::List(keys)), (std::vector<float>{-1, -1, -11, -12}));
}

TEST(ShardStoreTest, InvalidPushesAreRejectedAndChangeNothing) {
  ShardStore store(0, Placement(1));
  ASSERT_TRUE(store.CreateTable(Def("w", 8)).ok());
  const auto before = PullAll(store, "w", KeySpec::Single(0, 8));

  auto unknown = store.Push("nope", KeySpec::Single(0, 1), {1});
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(unknown.status().message(), HasSubstr("'nope'"));

  auto short_values = store.Push("w", KeySpec::Single(0, 4), {1, 2, 3});
  EXPECT_EQ(short_values.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_values.status().message(), HasSubstr("3 values for 4 keys"));

  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  auto has_nan = store.Push("w", KeySpec::Single(0, 4), {1, 2, nan, 4});
  EXPECT_EQ(has_nan.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(has_nan.status().message(), HasSubstr("key 2"));
  EXPECT_EQ(store.Push("w", KeySpec::Single(0, 1), {inf}).status().code(),
            absl::StatusCode::kInvalidArgument);

  auto out_of_range = store.Push("w", KeySpec::Single(6, 9), {1, 2, 3});
  EXPECT_EQ(out_of_range.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(out_of_range.status().message(), HasSubstr("num_keys 8"));
  const std::vector<uint64_t> bad_key = {1, 100};
  EXPECT_EQ(store.Push("w", KeySpec::List(bad_key), {1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(store.Push("w", KeySpec::Single(5, 2), {}).status().code(),
            absl::StatusCode::kInvalidArgument);

  EXPECT_EQ(PullAll(store, "w", KeySpec::Single(0, 8)), before);
}

// Long pushes go through the finiteness check's vectorized lanes (16
// floats at a time, blocks of 4096) as well as its scalar tail: a NaN or Inf
// anywhere is found and named by its key, and every finite value, the
// extremes included, passes.
TEST(ShardStoreTest, TheFiniteCheckFindsEveryBadValueOfALongPush) {
  constexpr uint64_t kKeys = 4096 * 2 + 37;  // two blocks and a tail of lanes and floats
  ShardStore store(0, Placement(1, {/*slice_size=*/1024, 64}));
  ASSERT_TRUE(store.CreateTable(Def("w", kKeys)).ok());
  const float kExtremes[] = {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max(),
                             std::numeric_limits<float>::denorm_min(), -0.0f,
                             std::numeric_limits<float>::min()};
  std::vector<float> grads(kKeys, 0.0f);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = kExtremes[i % 5] * 1e-30f;
  grads[0] = std::numeric_limits<float>::max();
  grads[kKeys - 1] = -std::numeric_limits<float>::max();
  const std::vector<float> before = PullAll(store, "w", KeySpec::Single(0, kKeys));
  const float kBad[] = {
      std::numeric_limits<float>::quiet_NaN(), std::numeric_limits<float>::infinity(),
      -std::numeric_limits<float>::infinity(), -std::numeric_limits<float>::quiet_NaN()};
  // In the first lane, a middle lane, the last lane of a block, the second
  // block, and the scalar tail.
  for (const size_t at : {size_t{0}, size_t{21}, size_t{4095}, size_t{4096 + 300},
                          size_t{kKeys - 30}, size_t{kKeys - 1}}) {
    for (const float bad : kBad) {
      std::vector<float> with_bad = grads;
      with_bad[at] = bad;
      auto pushed = store.Push("w", KeySpec::Single(0, kKeys), with_bad);
      ASSERT_EQ(pushed.status().code(), absl::StatusCode::kInvalidArgument) << at << " " << bad;
      EXPECT_THAT(pushed.status().message(), HasSubstr("key " + std::to_string(at) + " "));
    }
  }
  EXPECT_EQ(PullAll(store, "w", KeySpec::Single(0, kKeys)), before);
  EXPECT_TRUE(store.Push("w", KeySpec::Single(0, kKeys), grads).ok());
}

TEST(ShardStoreTest, KeysOfOtherServersAreRefusedNamingTheOwner) {
  Placement placement(3, {/*slice_size=*/2, 64});
  ShardStore store(0, placement);
  ASSERT_TRUE(store.CreateTable(Def("w", 100)).ok());
  uint64_t foreign = 0;
  while (placement.OwnerOfKey("w", foreign) == 0) ++foreign;
  const int owner = placement.OwnerOfKey("w", foreign);
  auto pushed = store.Push("w", KeySpec::Single(foreign, foreign + 1), {1});
  EXPECT_EQ(pushed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(pushed.status().message(), HasSubstr("key " + std::to_string(foreign)));
  EXPECT_THAT(pushed.status().message(), HasSubstr("owned by server " + std::to_string(owner)));
  std::string out;
  EXPECT_EQ(store.Pull("w", KeySpec::Single(0, 100), &out).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(ShardStoreTest, InitialValuesDoNotDependOnClusterSize) {
  const proto::TableDef def = Def("emb", 300, 3);
  ShardStore single(0, Placement(1));
  ASSERT_TRUE(single.CreateTable(def).ok());
  const auto expected = PullAll(single, "emb", KeySpec::Single(0, 300));
  for (float v : expected) {
    EXPECT_GE(v, -1.0f);
    EXPECT_LT(v, 1.0f);
  }
  Placement three(3, {/*slice_size=*/16, 64});
  std::vector<std::unique_ptr<ShardStore>> stores;
  for (int i = 0; i < 3; ++i) {
    stores.push_back(std::make_unique<ShardStore>(i, three));
    ASSERT_TRUE(stores.back()->CreateTable(def).ok());
  }
  for (const RangePart& part : three.SplitRange("emb", 0, 300)) {
    const auto got = PullAll(*stores[part.owner], "emb", KeySpec::Single(part.begin, part.end));
    ASSERT_EQ(got.size(), (part.end - part.begin) * 3);
    for (size_t i = 0; i < got.size(); ++i) {
      ASSERT_EQ(got[i], expected[part.begin * 3 + i]) << "value " << part.begin * 3 + i;
    }
  }
}

TEST(ShardStoreTest, NormalInitializerHasRequestedMoments) {
  proto::TableDef def = Def("n", 20000);
  def.set_initializer(proto::INIT_NORMAL);
  def.set_init_mean(0.5f);
  def.set_init_stddev(2.0f);
  ShardStore store(0, Placement(1));
  ASSERT_TRUE(store.CreateTable(def).ok());
  const auto v = PullAll(store, "n", KeySpec::Single(0, 20000));
  double sum = 0, sq = 0;
  for (float x : v) sum += x;
  const double mean = sum / v.size();
  for (float x : v) sq += (x - mean) * (x - mean);
  EXPECT_NEAR(mean, 0.5, 0.05);
  EXPECT_NEAR(std::sqrt(sq / v.size()), 2.0, 0.05);
}

TEST(ShardStoreTest, PushIsAppliedOnlyWhenAdmitted) {
  ShardStore store(0, Placement(1));
  proto::TableDef def = Def("w", 4);
  def.set_initializer(proto::INIT_ZEROS);
  ASSERT_TRUE(store.CreateTable(def).ok());
  auto first =
      store.Push("w", KeySpec::Single(0, 1), {-1}, 0, [] { return absl::StatusOr<bool>(true); });
  auto retry =
      store.Push("w", KeySpec::Single(0, 1), {-1}, 0, [] { return absl::StatusOr<bool>(false); });
  ASSERT_TRUE(first.ok() && retry.ok());
  EXPECT_FALSE(first->duplicate);
  EXPECT_TRUE(retry->duplicate);
  int admitted = 0;
  auto invalid = store.Push("w", KeySpec::Single(0, 9), {-1}, 0, [&admitted] {
    ++admitted;
    return absl::StatusOr<bool>(true);
  });
  EXPECT_FALSE(invalid.ok());
  EXPECT_EQ(admitted, 0) << "an invalid push must not be recorded as applied";
  EXPECT_EQ(PullAll(store, "w", KeySpec::Single(0, 1)), std::vector<float>{1});
}

TEST(ShardStoreTest, TablesOverTheMemoryBudgetAreRefusedBeforeAllocating) {
  // 1 server owns everything: 1000 keys x width 4 x (value + AdaGrad state).
  ShardStore store(0, Placement(1), StoreLimits{/*memory_budget_bytes=*/64 << 10, 8});
  proto::TableDef small = Def("small", 1000, 4);
  small.set_optimizer(proto::OPT_ADAGRAD);
  small.set_initial_accumulator(0.1f);
  ASSERT_EQ(*store.TableBytes(small), 1000u * 4 * 2 * sizeof(float) + 128 + sizeof(void*));
  ASSERT_TRUE(store.CreateTable(small).ok());
  proto::TableDef huge = Def("huge", uint64_t{1} << 30, 16);
  auto refused = store.CreateTable(huge);
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(refused.status().message(), HasSubstr("table 'huge' needs"));
  EXPECT_THAT(refused.status().message(), HasSubstr("--memory_budget_mb"));
  EXPECT_THAT(refused.status().message(),
              HasSubstr(absl::StrCat((64 << 10) - *store.TableBytes(small), " of the memory")));
  EXPECT_EQ(store.bytes_used(), *store.TableBytes(small)) << "a refused table charges nothing";
  EXPECT_EQ(store.GetTableDef("huge").status().code(), absl::StatusCode::kNotFound);
}

TEST(ShardStoreTest, TableCapIsEnforced) {
  ShardStore store(0, Placement(1), StoreLimits{~uint64_t{0}, /*max_tables=*/2});
  ASSERT_TRUE(store.CreateTable(Def("a", 10)).ok());
  ASSERT_TRUE(store.CreateTable(Def("b", 10)).ok());
  EXPECT_FALSE(*store.CreateTable(Def("b", 10))) << "an identical table is not a new one";
  auto third = store.CreateTable(Def("c", 10));
  EXPECT_EQ(third.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(third.status().message(), HasSubstr("--max_tables"));
}

}  // namespace
}  // namespace ps
