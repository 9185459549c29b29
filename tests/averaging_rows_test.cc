// AveragingRows (model averaging and EASGD for rows read and written by key)
// against a real in-process shard holding the center in a sparse table of
// SGD at rate 1, checked against rounds computed by hand: local SGD at rate
// 0.5, rows starting at their initial values (uniform, so nonzero).
#include "worker/train/averaging_rows.h"

#include <map>
#include <memory>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/in_process_cluster.h"
#include "tests/test_util/table_defs.h"
#include "worker/train/averaging_test_util.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

constexpr uint32_t kWidth = 2;
constexpr float kLr = 0.5f;

class AveragingRowsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto cluster = InProcessCluster::Start(1);
    ASSERT_TRUE(cluster.ok()) << cluster.status();
    cluster_ = *std::move(cluster);
    client_ = cluster_->Connect(0);
    proto::TableDef def = WithUniformInit(SparseTableDef("t", kWidth, 8), -1, 1, /*seed=*/5);
    def.MergeFrom(AveragingTableOptimizer());
    ASSERT_TRUE(client_->CreateTable(def).ok());
  }

  static AveragingConfig Config(Algorithm algorithm, int every, double alpha = 0.5) {
    return LocalSgdAveraging(algorithm, every, alpha, kLr);
  }

  // The center's rows of `keys`, by key.
  std::map<uint64_t, std::vector<float>> Center(const std::vector<uint64_t>& keys) {
    std::vector<float> v(keys.size() * kWidth);
    EXPECT_TRUE(client_->PullKeys("t", keys, kWidth, absl::MakeSpan(v)).ok());
    std::map<uint64_t, std::vector<float>> rows;
    for (size_t j = 0; j < keys.size(); ++j) {
      rows[keys[j]] = {v[j * kWidth], v[j * kWidth + 1]};
    }
    return rows;
  }

  // One step through `io`: pulls `keys`, pushes gradient g(key) = (key, -key).
  static void Step(AveragingRows& io, const std::vector<uint64_t>& keys, uint64_t clock) {
    std::vector<float> rows(keys.size() * kWidth), grads;
    ASSERT_TRUE(io.Pull(keys, clock, absl::MakeSpan(rows)).ok());
    for (uint64_t k : keys) {
      grads.push_back(static_cast<float>(k));
      grads.push_back(-static_cast<float>(k));
    }
    ASSERT_TRUE(io.Push(keys, grads, clock).ok());
  }

  std::unique_ptr<InProcessCluster> cluster_;
  std::unique_ptr<PsClient> client_;
};

// Averaging with N = 4: a round's rows move the center by (local - pulled)
// / 4, local being the pulled row after the round's local steps; the
// round forgets its rows, so the next one pulls them again.
TEST_F(AveragingRowsTest, AveragingMovesEachRowByItsLocalDeltaOverN) {
  auto io = AveragingRows::Create(*client_, "t", kWidth, Config(Algorithm::kAverage, 2), 4);
  ASSERT_TRUE(io.ok()) << io.status();
  const std::vector<uint64_t> all = {3, 7, 11};
  std::map<uint64_t, std::vector<float>> c = Center(all);
  // Round 1: key 7 stepped twice, keys 3 and 11 once.
  Step(**io, {3, 7}, 0);
  Step(**io, {7, 11}, 1);
  EXPECT_EQ((*io)->rounds(), 1);
  EXPECT_EQ((*io)->rows_held(), 0u);
  const std::map<uint64_t, int> steps = {{3, 1}, {7, 2}, {11, 1}};
  for (auto& [key, row] : c) {
    // Local SGD: each step subtracts kLr * (key, -key); the center gets a
    // quarter of the total.
    const float moved = kLr * key * steps.at(key) / 4;
    row[0] -= moved;
    row[1] += moved;
  }
  const auto got = Center(all);
  for (uint64_t key : all) {
    EXPECT_NEAR(got.at(key)[0], c.at(key)[0], 1e-6) << key;
    EXPECT_NEAR(got.at(key)[1], c.at(key)[1], 1e-6) << key;
  }
  // A partial round is sent by Flush; a Flush with no step sends nothing.
  Step(**io, {3}, 2);
  ASSERT_TRUE((*io)->Flush(3).ok());
  ASSERT_TRUE((*io)->Flush(3).ok());
  EXPECT_EQ((*io)->rounds(), 2);
  EXPECT_NEAR(Center({3}).at(3)[0], c.at(3)[0] - kLr * 3 / 4, 1e-6);
  EXPECT_EQ((*io)->keys_pulled(), 4);  // 3 rows in round 1, key 3 again in round 2
  EXPECT_EQ((*io)->keys_pushed(), 4);
}

// EASGD: at a round's end each held row x moves toward the center c by e =
// alpha (x - c) and the center by e; the rows used in the round stay for the
// next one, whose local steps continue from x - e.
TEST_F(AveragingRowsTest, EasgdKeepsUsedRowsAndMovesBothSides) {
  constexpr float kAlpha = 0.5f;
  auto io = AveragingRows::Create(*client_, "t", kWidth, Config(Algorithm::kEasgd, 1, kAlpha), 2);
  ASSERT_TRUE(io.ok()) << io.status();
  std::vector<float> c = Center({5}).at(5);
  std::vector<float> x = c;
  for (uint64_t round = 0; round < 3; ++round) {
    Step(**io, {5}, round);
    x[0] -= kLr * 5;
    x[1] += kLr * 5;
    for (int i = 0; i < 2; ++i) {
      const float e = kAlpha * (x[i] - c[i]);
      x[i] -= e;
      c[i] += e;
    }
    EXPECT_EQ((*io)->rows_held(), 1u) << "round " << round;
  }
  const std::vector<float> got = Center({5}).at(5);
  EXPECT_NEAR(got[0], c[0], 1e-5);
  EXPECT_NEAR(got[1], c[1], 1e-5);
  // Pulled once as a row, then once per round as the center.
  EXPECT_EQ((*io)->keys_pulled(), 4);
  // A round without key 5 drops it after its elastic step.
  Step(**io, {6}, 3);
  EXPECT_EQ((*io)->rows_held(), 1u);
}

TEST_F(AveragingRowsTest, APushOfARowNotPulledIsRefusedNamingTheKey) {
  auto io = AveragingRows::Create(*client_, "t", kWidth, Config(Algorithm::kAverage, 5), 1);
  ASSERT_TRUE(io.ok()) << io.status();
  const std::vector<uint64_t> keys = {42};
  const std::vector<float> grads = {1, 1};
  const absl::Status s = (*io)->Push(keys, grads, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(s.message(), HasSubstr("key 42 pushed without being pulled"));
  EXPECT_THAT(AveragingRows::Create(*client_, "t", kWidth, Config(Algorithm::kAverage, 0), 1)
                  .status()
                  .message(),
              HasSubstr("--average_every=0"));
}

}  // namespace
}  // namespace ps
