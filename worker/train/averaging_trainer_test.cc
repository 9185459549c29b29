// TrainAveraging against an in-memory center (tables that apply a push of g
// as w -= g, what AveragingTableOptimizer's servers do), checked against the
// rounds computed by hand here: full-batch steps, so the shuffle does not
// change them. The exactness of synchronous averaging across workers, on
// real servers, is in tests/averaging_test.cc.
#include "worker/train/averaging_trainer.h"

#include <cmath>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/client/param_client.h"
#include "worker/train/averaging_test_util.h"
#include "worker/train/dataset.h"
#include "worker/train/model.h"
#include "worker/train/synthetic_data.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// The center: one vector per table, a push of g applied as w -= g. Records
// the clock of every call.
class FakeCenter : public ParamClient {
 public:
  struct Call {
    bool pull;
    uint64_t clock;
  };

  absl::Status CreateTable(const proto::TableDef&) override { return absl::OkStatus(); }
  absl::Status Pull(absl::Span<const PullRange> ops, uint64_t clock, PullInfo* info) override {
    for (const PullRange& op : ops) {
      const std::vector<float>& t = Table(op.table, op.end);
      std::copy(t.begin() + op.begin, t.begin() + op.end, op.out.begin());
    }
    if (info != nullptr) info->params_clock = clock;
    calls.push_back({true, clock});
    return absl::OkStatus();
  }
  absl::Status Push(absl::Span<const PushRange> ops, uint64_t clock, Versions*) override {
    for (const PushRange& op : ops) {
      std::vector<float>& t = Table(op.table, op.end);
      for (uint64_t k = op.begin; k < op.end; ++k) t[k] -= op.grads[k - op.begin];
    }
    calls.push_back({false, clock});
    return absl::OkStatus();
  }
  int num_servers() const override { return 1; }

  // The whole model, in its blocks' order.
  std::vector<float> Flat(const Model& model) {
    std::vector<float> flat;
    for (const ParamBlock& b : model.blocks()) {
      const std::vector<float>& t = Table("m/" + b.name, b.size);
      flat.insert(flat.end(), t.begin(), t.end());
    }
    return flat;
  }

  std::vector<Call> calls;

 private:
  // A table starts at 0.01 * (k + 1) - 0.05 for key k.
  std::vector<float>& Table(const std::string& name, uint64_t size) {
    std::vector<float>& t = tables_[name];
    if (t.empty()) {
      t.resize(size);
      for (uint64_t k = 0; k < size; ++k) t[k] = 0.01f * (k + 1) - 0.05f;
    }
    return t;
  }
  std::map<std::string, std::vector<float>> tables_;
};

constexpr int kDim = 3, kClasses = 2, kExamples = 8;
constexpr float kLr = 0.2f;

TrainerConfig FullBatch(int steps, int worker, int workers, Consistency consistency) {
  TrainerConfig c;
  c.worker_index = worker;
  c.num_workers = workers;
  c.epochs = steps;  // one full-batch step per epoch
  c.batch_size = kExamples;
  c.consistency = consistency;
  c.table_prefix = "m";
  return c;
}

AveragingConfig Averaging(Algorithm algorithm, int every, double alpha = 0.1) {
  return LocalSgdAveraging(algorithm, every, alpha, kLr);
}

// `steps` full-batch SGD steps from w.
void LocalSteps(const Model& model, const Dataset& data, int steps, std::vector<float>& w) {
  std::vector<float> g(w.size());
  for (int s = 0; s < steps; ++s) {
    model.LossAndGradient(w, data.features.data(), data.labels.data(),
                          static_cast<int>(data.num_examples), absl::MakeSpan(g));
    for (size_t i = 0; i < w.size(); ++i) w[i] -= kLr * g[i];
  }
}

void ExpectNear(const std::vector<float>& got, const std::vector<float>& want) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "value " << i;
}

class AveragingTest : public ::testing::Test {
 protected:
  const std::unique_ptr<Model> model_ = MakeSoftmaxRegression(kDim, kClasses);
  const Dataset data_ = MakeLinearlySeparable(kExamples, kDim, kClasses, /*seed=*/5);
};

// Averaging with N workers moves the center by (local - c) / N each round,
// the local copy starting from the center: 7 steps in rounds of 3, 3, 1.
TEST_F(AveragingTest, EachRoundMovesTheCenterByTheLocalDeltaOverN) {
  for (int workers : {1, 2}) {
    FakeCenter center;
    std::vector<float> c = center.Flat(*model_);
    auto stats =
        TrainAveraging(center, *model_, data_, FullBatch(7, 0, workers, Consistency::kAsync),
                       Averaging(Algorithm::kAverage, 3), nullptr);
    ASSERT_TRUE(stats.ok()) << stats.status();
    for (int steps : {3, 3, 1}) {
      std::vector<float> local = c;
      LocalSteps(*model_, data_, steps, local);
      for (size_t i = 0; i < c.size(); ++i) c[i] += (local[i] - c[i]) / workers;
    }
    ExpectNear(center.Flat(*model_), c);
    EXPECT_EQ(stats->steps, 7);
    EXPECT_EQ(stats->pushes, 3);
    EXPECT_EQ(stats->pulls, 3);
    EXPECT_EQ(stats->values_pushed, 3 * model_->num_params());
  }
}

// EASGD: the local copy persists; at each round's end e = alpha (local - c),
// local -= e, c += e. Async reads the center at the round's end (and once
// before training); BSP at the round's start. With one worker both see the
// same center.
TEST_F(AveragingTest, EasgdMovesCenterAndCopyTowardEachOther) {
  constexpr double kAlpha = 0.3;
  for (Consistency consistency : {Consistency::kAsync, Consistency::kBsp}) {
    FakeCenter center;
    std::vector<float> c = center.Flat(*model_);
    auto stats = TrainAveraging(center, *model_, data_, FullBatch(8, 0, 1, consistency),
                                Averaging(Algorithm::kEasgd, 4, kAlpha), nullptr);
    ASSERT_TRUE(stats.ok()) << stats.status();
    std::vector<float> local = c;
    for (int round = 0; round < 2; ++round) {
      LocalSteps(*model_, data_, 4, local);
      for (size_t i = 0; i < c.size(); ++i) {
        const float e = static_cast<float>(kAlpha) * (local[i] - c[i]);
        local[i] -= e;
        c[i] += e;
      }
    }
    ExpectNear(center.Flat(*model_), c);
    EXPECT_EQ(stats->pushes, 2);
    EXPECT_EQ(stats->pulls, consistency == Consistency::kAsync ? 3 : 2);
  }
}

// Under BSP every push of round t follows a pull at clock t (what a BSP
// push waits for), rounds are numbered from 0, and a last partial round is
// pushed: 10 steps of 4 are rounds 0, 1, 2.
TEST_F(AveragingTest, EveryRoundIsReadBeforeItIsPushed) {
  for (Algorithm algorithm : {Algorithm::kAverage, Algorithm::kEasgd}) {
    FakeCenter center;
    TrainerConfig config = FullBatch(10, 0, 1, Consistency::kBsp);
    auto stats = TrainAveraging(center, *model_, data_, config, Averaging(algorithm, 4), nullptr);
    ASSERT_TRUE(stats.ok()) << stats.status();
    std::vector<FakeCenter::Call> want;
    for (uint64_t round = 0; round < 3; ++round) {
      want.push_back({true, round});
      want.push_back({false, round});
    }
    ASSERT_EQ(center.calls.size(), want.size()) << AlgorithmName(algorithm);
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ(center.calls[i].pull, want[i].pull) << AlgorithmName(algorithm) << " call " << i;
      EXPECT_EQ(center.calls[i].clock, want[i].clock) << AlgorithmName(algorithm) << " call " << i;
    }
  }
}

// The local steps use the local optimizer's rule: AdaGrad's first step from
// an accumulator a0 is w -= lr * g / sqrt(a0 + g^2).
TEST_F(AveragingTest, LocalStepsUseTheLocalOptimizer) {
  FakeCenter center;
  std::vector<float> c = center.Flat(*model_);
  AveragingConfig averaging = Averaging(Algorithm::kAverage, 1);
  averaging.local_optimizer.set_optimizer(proto::OPT_ADAGRAD);
  averaging.local_optimizer.set_initial_accumulator(0.5f);
  averaging.local_optimizer.set_epsilon(0);
  auto stats = TrainAveraging(center, *model_, data_, FullBatch(1, 0, 1, Consistency::kAsync),
                              averaging, nullptr);
  ASSERT_TRUE(stats.ok()) << stats.status();
  std::vector<float> g(c.size());
  model_->LossAndGradient(c, data_.features.data(), data_.labels.data(), kExamples,
                          absl::MakeSpan(g));
  for (size_t i = 0; i < c.size(); ++i) c[i] -= kLr * g[i] / std::sqrt(0.5f + g[i] * g[i]);
  ExpectNear(center.Flat(*model_), c);
}

TEST(ValidateAveragingConfigTest, NamesTheSettingAndItsValue) {
  TrainerConfig trainer;
  AveragingConfig a = Averaging(Algorithm::kAverage, 0);
  EXPECT_THAT(ValidateAveragingConfig(a, trainer).message(), HasSubstr("--average_every=0"));
  a = Averaging(Algorithm::kEasgd, 5, 1.5);
  EXPECT_THAT(ValidateAveragingConfig(a, trainer).message(), HasSubstr("--easgd_alpha=1.5"));
  a = Averaging(Algorithm::kAverage, 5);
  trainer.n_push = 4;
  EXPECT_THAT(ValidateAveragingConfig(a, trainer).message(), HasSubstr("--n_push (4)"));
  trainer.n_push = 1;
  EXPECT_TRUE(ValidateAveragingConfig(a, trainer).ok());
  a.local_optimizer.set_optimizer(static_cast<proto::OptimizerKind>(99));
  EXPECT_THAT(ValidateAveragingConfig(a, trainer).message(), HasSubstr("local optimizer"));
  EXPECT_EQ(ParseAlgorithm("sgd").status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ParseAlgorithm("easgd"), Algorithm::kEasgd);
}

}  // namespace
}  // namespace ps
