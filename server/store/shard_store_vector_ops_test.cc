// Sandblaster L-BFGS on the store: pushes to an OPT_LBFGS table accumulate
// into its gradient vector, vector ops combine the named vectors of every
// value held (dense slices and sparse rows) with dot products summed in
// double, writes respect a checkpoint cut, and the vectors travel in
// checkpoints.
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_records.h"
#include "server/store/shard_store.h"
#include "tests/test_util/store_pull.h"
#include "tests/test_util/table_defs.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// Vectors of a table with lbfgs_memory 2: 0 values, 1 X, 2 G, ... 8.
constexpr uint32_t kW = 0, kX = 1, kG = 2;

proto::TableDef LbfgsTable(bool sparse) {
  proto::TableDef def = sparse ? SparseTableDef("w", 1, 4) : DenseTableDef("w", 10, 1);
  def.set_optimizer(proto::OPT_LBFGS);
  def.set_lbfgs_memory(2);
  return def;
}

const Placement kOne(1, {/*slice_size=*/4, 16});

std::vector<uint64_t> Keys(bool sparse) {
  std::vector<uint64_t> keys(10);
  for (uint64_t i = 0; i < 10; ++i) keys[i] = sparse ? i * 0x9e3779b97f4a7c15ULL + 7 : i;
  return keys;
}

proto::VectorOp Op(proto::VectorOp::Kind kind, uint32_t dst, uint32_t src, double alpha = 0) {
  proto::VectorOp op;
  op.set_kind(kind);
  op.set_dst(dst);
  op.set_src(src);
  op.set_alpha(alpha);
  return op;
}
proto::VectorOp Dot(uint32_t a, uint32_t b) { return Op(proto::VectorOp::DOT, a, b); }

std::vector<double> Ops(ShardStore& store, const std::vector<proto::VectorOp>& ops,
                        uint64_t clock = 1) {
  absl::StatusOr<ShardStore::VectorOpsResult> r = store.RunVectorOps("w", ops, clock);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? r->partials : std::vector<double>();
}

// Pushes gradient k + 1 to key k, `times` times.
void PushGradients(ShardStore& store, const std::vector<uint64_t>& keys, int times) {
  std::vector<float> g(keys.size());
  for (size_t k = 0; k < keys.size(); ++k) g[k] = static_cast<float>(k + 1);
  for (int t = 0; t < times; ++t) {
    ASSERT_TRUE(
        store.Push("w", KeySpec::List(keys), g, 1, [] { return absl::StatusOr<bool>(true); }).ok());
  }
}

// sum over k of (k + 1)^2 for 10 keys.
constexpr double kSumSquares = 385;

class VectorOpsTest : public ::testing::TestWithParam<bool> {};

TEST_P(VectorOpsTest, PushesAccumulateAndOpsCombineTheVectors) {
  const bool sparse = GetParam();
  ShardStore store(0, kOne);
  ASSERT_TRUE(store.CreateTable(LbfgsTable(sparse)).ok());
  const std::vector<uint64_t> keys = Keys(sparse);
  PushGradients(store, keys, 2);  // G = 2 (k + 1); the values stay 0
  EXPECT_THAT(PullAll(store, "w", KeySpec::List(keys)), ::testing::Each(0.0f));
  EXPECT_EQ(Ops(store, {Dot(kG, kG)}), std::vector<double>{4 * kSumSquares});

  // X = G / 2 = k + 1; W += 2 X; then W.G and W.W (both 4 * 385), X.X.
  const std::vector<double> dots =
      Ops(store, {Op(proto::VectorOp::COPY, kX, kG), Op(proto::VectorOp::SCALE, kX, 0, 0.5),
                  Op(proto::VectorOp::AXPY, kW, kX, 2.0), Dot(kW, kG), Dot(kW, kW), Dot(kX, kX)});
  EXPECT_EQ(dots, (std::vector<double>{4 * kSumSquares, 4 * kSumSquares, kSumSquares}));
  std::vector<float> w = PullAll(store, "w", KeySpec::List(keys));
  for (size_t k = 0; k < keys.size(); ++k) EXPECT_EQ(w[k], 2.0f * (k + 1)) << k;
  // SCALE by 0 clears exactly; the ops ran over every value.
  absl::StatusOr<ShardStore::VectorOpsResult> cleared =
      store.RunVectorOps("w", {Op(proto::VectorOp::SCALE, kG, 0, 0.0), Dot(kG, kG)}, 1);
  ASSERT_TRUE(cleared.ok());
  EXPECT_EQ(cleared->partials, std::vector<double>{0.0});
  EXPECT_EQ(cleared->values, 10u);
}

TEST_P(VectorOpsTest, VectorsTravelInCheckpointsAndWritesRespectTheCut) {
  const bool sparse = GetParam();
  ShardStore store(0, kOne);
  ASSERT_TRUE(store.CreateTable(LbfgsTable(sparse)).ok());
  const std::vector<uint64_t> keys = Keys(sparse);
  PushGradients(store, keys, 1);  // G = k + 1
  Ops(store, {Op(proto::VectorOp::COPY, kX, kG), Op(proto::VectorOp::AXPY, kW, kG, 3.0)}, 1);
  ASSERT_TRUE(store.MarkCut(5).ok());
  // A change outside the cut (clock 9) after it was marked: not in the checkpoint.
  Ops(store, {Op(proto::VectorOp::SCALE, kW, 0, 0.0), Op(proto::VectorOp::SCALE, kX, 0, 0.0)}, 9);
  std::string file;
  ASSERT_TRUE(store
                  .WriteCut([&](const proto::TableDef&, std::string record) {
                    file += record;
                    return absl::OkStatus();
                  })
                  .ok());
  EXPECT_EQ(Ops(store, {Dot(kW, kW), Dot(kX, kX)}), (std::vector<double>{0, 0}));

  ShardStore restored(0, kOne);
  ASSERT_TRUE(restored.CreateTable(LbfgsTable(sparse)).ok());
  ASSERT_TRUE(ForEachSliceRecord(file, "test", [&](const SliceRecord& r) {
                return restored.LoadRecord(r).status();
              }).ok());
  EXPECT_EQ(Ops(restored, {Dot(kW, kW), Dot(kX, kX), Dot(kG, kG), Dot(kW, kX)}),
            (std::vector<double>{9 * kSumSquares, kSumSquares, kSumSquares, 3 * kSumSquares}));
  std::vector<float> w = PullAll(restored, "w", KeySpec::List(keys));
  for (size_t k = 0; k < keys.size(); ++k) EXPECT_EQ(w[k], 3.0f * (k + 1)) << k;
}

TEST_P(VectorOpsTest, RefusesVectorsPastTheTableAndOtherOptimizers) {
  const bool sparse = GetParam();
  ShardStore store(0, kOne);
  ASSERT_TRUE(store.CreateTable(LbfgsTable(sparse)).ok());
  PushGradients(store, Keys(sparse), 1);
  // Memory 2: 4 + 2 * 2 = 8 state slots, vectors 0 .. 8.
  absl::StatusOr<ShardStore::VectorOpsResult> past =
      store.RunVectorOps("w", {Op(proto::VectorOp::COPY, kX, kG), Dot(9, kG)}, 1);
  EXPECT_EQ(past.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(past.status().message(), HasSubstr("table 'w': vector op 1 names vector 9"));
  EXPECT_EQ(Ops(store, {Dot(kX, kX)}), std::vector<double>{0.0});  // nothing applied
  EXPECT_EQ(Ops(store, {Dot(8, 8)}), std::vector<double>{0.0});    // the last is fine

  ASSERT_TRUE(store.CreateTable(WithSgd(DenseTableDef("sgd", 4, 1), 0.1f)).ok());
  absl::StatusOr<ShardStore::VectorOpsResult> sgd = store.RunVectorOps("sgd", {Dot(0, 0)}, 1);
  EXPECT_EQ(sgd.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(sgd.status().message(), HasSubstr("vector ops are for OPT_LBFGS tables"));
  EXPECT_EQ(store.RunVectorOps("none", {Dot(0, 0)}, 1).status().code(),
            absl::StatusCode::kNotFound);
}

INSTANTIATE_TEST_SUITE_P(DenseAndSparse, VectorOpsTest, ::testing::Bool(),
                         [](const ::testing::TestParamInfo<bool>& info) {
                           return info.param ? "Sparse" : "Dense";
                         });

}  // namespace
}  // namespace ps
