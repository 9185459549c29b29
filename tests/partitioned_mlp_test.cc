// Model-parallel partitions of the MLP (worker/train/partitioned_mlp.h),
// K partitions as threads (LocalGroup) over one in-process store: after
// 100 steps, K = 1, 2, 3 and 4 give the parameters the whole model gives
// (TrainDownpour) within float rounding (each table within 1e-5 of its
// norm; measured: about 5e-7), each partition pulling and pushing its 1/K
// of every table; partitions are refused for layers narrower than K.
#include "worker/train/partitioned_mlp.h"

#include <algorithm>
#include <cmath>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "common/placement.h"
#include "deploy/bench/local_param_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/in_process_cluster.h"
#include "worker/collective/local_collective.h"
#include "worker/collective/on_each_member.h"
#include "worker/train/model.h"
#include "worker/train/synthetic_data.h"
#include "worker/train/trainer.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// 20 inputs, hidden layers of 12 and 9 units (9 does not divide by 2 or
// 4: partitions of unequal size), 5 classes.
constexpr int kDim = 20, kClasses = 5;
const std::vector<int> kHidden = {12, 9};

std::vector<int> Widths() { return {kDim, kHidden[0], kHidden[1], kClasses}; }

TrainerConfig Config() {
  TrainerConfig config;
  config.batch_size = 16;
  config.max_steps = 100;
  config.epochs = 100;
  config.table_prefix = "mlp";
  config.seed = 3;
  return config;
}

// Every table of the model as the store holds it, concatenated.
std::vector<float> AllParams(ParamClient& client, const Model& model) {
  std::vector<float> params(model.num_params());
  EXPECT_TRUE(PullParams(client, model, "mlp", absl::MakeSpan(params)).ok());
  return params;
}

// The model's tables: AdaGrad (the workers' default optimizer).
std::vector<proto::TableDef> Tables(const Model& model) {
  proto::TableDef optimizer;
  optimizer.set_optimizer(proto::OPT_ADAGRAD);
  optimizer.set_learning_rate(0.1f);
  optimizer.set_initial_accumulator(0.1f);
  optimizer.set_epsilon(1e-8f);
  return ModelTables(model, "mlp", optimizer, 7);
}

struct Trained {
  std::vector<float> params;
  std::vector<PartitionedTrainStats> stats;
  double accuracy = 0;  // on the training examples, as the partitions compute it
};

// Trains the MLP for 100 steps with K partitions (K = 0: the whole model,
// TrainDownpour), AdaGrad tables, from the same initial tables.
Trained Train(int k) {
  const Dataset data = MakeLinearlySeparable(2000, kDim, kClasses, 11);
  std::unique_ptr<Model> model = MakeMlp(kDim, kHidden, kClasses);
  LocalParamClient client;
  EXPECT_TRUE(CreateModelTables(client, Tables(*model)).ok());
  Trained out;
  if (k == 0) {
    auto stats = TrainDownpour(client, *model, data, Config(), nullptr);
    EXPECT_TRUE(stats.ok()) << stats.status();
  } else {
    LocalGroup group(k, absl::Seconds(30));
    out.stats.resize(k);
    OnEachMember(group, [&](int p, Collective* c) {
      auto stats = TrainPartitionedMlp(client, Widths(), data, Config(), c, nullptr);
      ASSERT_TRUE(stats.ok()) << "partition " << p << ": " << stats.status();
      out.stats[p] = *stats;
      auto accuracy = PartitionedMlpAccuracy(client, Widths(), data, "mlp", c);
      ASSERT_TRUE(accuracy.ok()) << accuracy.status();
      if (p == 0) out.accuracy = *accuracy;
    });
  }
  out.params = AllParams(client, *model);
  if (k == 0) out.accuracy = Accuracy(*model, out.params, data);
  return out;
}

TEST(PartitionedMlpTest, PartitionsGiveTheWholeModelsParameters) {
  const Trained whole = Train(0);
  const Trained start = [] {
    LocalParamClient client;
    std::unique_ptr<Model> model = MakeMlp(kDim, kHidden, kClasses);
    EXPECT_TRUE(CreateModelTables(client, Tables(*model)).ok());
    return Trained{AllParams(client, *model), {}};
  }();
  double moved = 0;
  for (size_t i = 0; i < whole.params.size(); ++i) {
    moved = std::max(moved, std::abs(double{whole.params[i]} - start.params[i]));
  }
  ASSERT_GT(moved, 0.05);  // training moved the parameters
  for (int k : {1, 2, 3, 4}) {
    const Trained split = Train(k);
    ASSERT_EQ(split.params.size(), whole.params.size());
    // Per table: the norm of the difference relative to the table's norm.
    double worst = 0;
    int64_t at = 0;
    for (const ParamBlock& block : MakeMlp(kDim, kHidden, kClasses)->blocks()) {
      double diff = 0, norm = 0;
      for (int64_t i = at; i < at + block.size; ++i) {
        diff += std::pow(double{split.params[i]} - whole.params[i], 2);
        norm += std::pow(double{whole.params[i]}, 2);
      }
      worst = std::max(worst, std::sqrt(diff / norm));
      at += block.size;
    }
    EXPECT_LT(worst, 1e-5) << "K = " << k;
    EXPECT_GT(whole.accuracy, 0.5);
    EXPECT_NEAR(split.accuracy, whole.accuracy, 0.002) << "K = " << k;
    std::printf("K = %d: largest relative difference from K = 1: %.3g\n", k, worst);
    // Each partition holds, pulls and pushes its share, the shares adding up
    // to the model; with even layers it would be 1/K each.
    int64_t held = 0;
    const int64_t total = static_cast<int64_t>(whole.params.size());
    for (const PartitionedTrainStats& s : split.stats) {
      held += s.params_held;
      EXPECT_LE(s.params_held, total / k + total / 10) << "K = " << k;
      EXPECT_EQ(s.values_pulled, s.params_held * 100);
      EXPECT_EQ(s.values_pushed, s.params_held * 100);
      EXPECT_EQ(s.steps, 100);
      if (k > 1) EXPECT_GT(s.activation_values, 0);
    }
    EXPECT_EQ(held, total) << "K = " << k;
  }
}

// Under BSP on two real servers (in-process, gRPC) with slices of 16 keys,
// some partition's share of some table lies on one server only; with
// every_server its clock-only calls let the other server's rounds go on
// (without them that server would wait for its reads and pushes until the
// deadline). The parameters are the whole model's after 30 steps.
TEST(PartitionedMlpTest, BspRoundsGoOnWhereAPartitionHasNoKeys) {
  constexpr int kK = 4, kSteps = 30;
  const PlacementConfig placement{16, 64};
  auto cluster = InProcessCluster::Start(2, placement);
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  std::unique_ptr<Model> model = MakeMlp(kDim, kHidden, kClasses);
  auto admin = (*cluster)->Connect(100);
  ASSERT_TRUE(CreateModelTables(*admin, Tables(*model)).ok());
  // The premise: partition p's rows of the output layer (fc2/w: its units of
  // the 9 of hidden layer 2, 5 classes each) miss a server for some p.
  const Placement where(2, placement);
  bool misses = false;
  for (int p = 0; p < kK; ++p) {
    auto part = MlpPartition::Make(Widths(), kK, p);
    ASSERT_TRUE(part.ok());
    std::set<int> owners;
    for (const RangePart& r : where.SplitRange("mlp/fc2/w", part->First(2) * kClasses,
                                               (part->First(2) + part->Count(2)) * kClasses)) {
      owners.insert(r.owner);
    }
    misses = misses || owners.size() < 2;
  }
  ASSERT_TRUE(misses) << "every share spans both servers: the test checks nothing";

  const Dataset data = MakeLinearlySeparable(2000, kDim, kClasses, 11);
  TrainerConfig config = Config();
  config.max_steps = kSteps;
  config.consistency = Consistency::kBsp;
  LocalGroup group(kK, absl::Seconds(60));
  OnEachMember(group, [&](int p, Collective* c) {
    auto client = (*cluster)->Connect((*cluster)->BoundedClientOptions(p, 0));
    ASSERT_TRUE(client->WaitForWorkers(kK, absl::Seconds(30)).ok());
    auto stats = TrainPartitionedMlp(*client, Widths(), data, config, c, nullptr);
    ASSERT_TRUE(stats.ok()) << "partition " << p << ": " << stats.status();
    client->Leave();
  });
  std::vector<float> split = AllParams(*admin, *model);

  LocalParamClient local;
  ASSERT_TRUE(CreateModelTables(local, Tables(*model)).ok());
  ASSERT_TRUE(TrainDownpour(local, *model, data, config, nullptr).ok());
  const std::vector<float> whole = AllParams(local, *model);
  ASSERT_EQ(split.size(), whole.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < whole.size(); ++i) {
    diff += std::pow(double{split[i]} - whole[i], 2);
    norm += std::pow(double{whole[i]}, 2);
  }
  EXPECT_LT(std::sqrt(diff / norm), 1e-5);
}

TEST(PartitionedMlpTest, UnitsAreSplitInContiguousRuns) {
  auto p = MlpPartition::Make({784, 10, 7, 4}, 4, 1);
  ASSERT_TRUE(p.ok()) << p.status();
  // 10 units: 0-1, 2-4, 5-6, 7-9; partition 1 owns 2-4.
  EXPECT_EQ(p->First(1), 2);
  EXPECT_EQ(p->Count(1), 3);
  EXPECT_EQ(p->MaxCount(1), 3);
  EXPECT_EQ(p->First(1, 4), 10);
  EXPECT_EQ(p->Count(3), 1);  // classes 1 of 0-3
  // fc0: 784 x 3 + 3; fc1: 10 x 7 -> 3 x 7's columns: 10 x 2 (units 1-2 of 7) + 2;
  // fc2: rows 1-2 of 7 x 4 -> 2 x 4, + 1 class bias.
  EXPECT_EQ(p->ParamsHeld(), 784 * 3 + 3 + 10 * 2 + 2 + 2 * 4 + 1);
  EXPECT_EQ(p->ParamsTotal(), 784 * 10 + 10 + 10 * 7 + 7 + 7 * 4 + 4);
}

TEST(PartitionedMlpTest, RefusesLayersNarrowerThanThePartitions) {
  auto narrow = MlpPartition::Make({20, 16, 3}, 4, 0);
  EXPECT_EQ(narrow.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(narrow.status().message(), HasSubstr("the output has 3 classes: too few for 4"));
  auto hidden = MlpPartition::Make({20, 2, 10}, 4, 0);
  EXPECT_THAT(hidden.status().message(), HasSubstr("hidden layer 1 has 2 units"));
  auto softmax = MlpPartition::Make({20, 10}, 2, 0);
  EXPECT_THAT(softmax.status().message(), HasSubstr("at least one"));
}

}  // namespace
}  // namespace ps
