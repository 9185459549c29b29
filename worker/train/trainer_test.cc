// ValidateTrainerConfig, and the pull/push schedule of TrainDownpour that its
// BSP rule rests on, observed through a ParamClient that records calls.
#include "worker/train/trainer.h"

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/train/dataset.h"
#include "worker/train/model.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

TrainerConfig Config(Consistency consistency, int staleness, int n_fetch, int n_push) {
  TrainerConfig c;
  c.consistency = consistency;
  c.staleness = staleness;
  c.n_fetch = n_fetch;
  c.n_push = n_push;
  return c;
}

TEST(ValidateTrainerConfigTest, DefaultsAreValid) {
  EXPECT_TRUE(ValidateTrainerConfig(TrainerConfig()).ok());
}

TEST(ValidateTrainerConfigTest, BspRefusesNFetchDifferentFromNPush) {
  const absl::Status s = ValidateTrainerConfig(Config(Consistency::kBsp, 0, 2, 1));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--consistency=bsp needs --n_fetch == --n_push "
                                     "(got n_fetch 2, n_push 1)"));
  EXPECT_THAT(s.message(), HasSubstr("waits forever"));
  EXPECT_THAT(s.message(), HasSubstr("--staleness >= 1"));
}

TEST(ValidateTrainerConfigTest, BspRefusesEveryUnequalPair) {
  for (int n_fetch = 1; n_fetch <= 4; ++n_fetch) {
    for (int n_push = 1; n_push <= 4; ++n_push) {
      const absl::Status s = ValidateTrainerConfig(Config(Consistency::kBsp, 0, n_fetch, n_push));
      EXPECT_EQ(s.ok(), n_fetch == n_push)
          << "n_fetch " << n_fetch << " n_push " << n_push << ": " << s;
    }
  }
}

TEST(ValidateTrainerConfigTest, DivisorNFetchIsRefusedAsNotBsp) {
  const absl::Status s = ValidateTrainerConfig(Config(Consistency::kBsp, 0, 1, 2));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("(got n_fetch 1, n_push 2)"));
  EXPECT_THAT(s.message(), HasSubstr("read other workers' pushes of that round"));
}

TEST(ValidateTrainerConfigTest, BoundedWithZeroStalenessIsBsp) {
  const absl::Status s = ValidateTrainerConfig(Config(Consistency::kBounded, 0, 3, 2));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--consistency=bounded with --staleness=0"));
  EXPECT_THAT(s.message(), HasSubstr("(got n_fetch 3, n_push 2)"));
}

TEST(ValidateTrainerConfigTest, BoundedAndAsyncAllowAnyNFetchAndNPush) {
  for (int n_fetch = 1; n_fetch <= 4; ++n_fetch) {
    for (int n_push = 1; n_push <= 4; ++n_push) {
      EXPECT_TRUE(ValidateTrainerConfig(Config(Consistency::kBounded, 1, n_fetch, n_push)).ok());
      EXPECT_TRUE(ValidateTrainerConfig(Config(Consistency::kBounded, 3, n_fetch, n_push)).ok());
      EXPECT_TRUE(ValidateTrainerConfig(Config(Consistency::kAsync, 0, n_fetch, n_push)).ok());
    }
  }
}

TEST(ValidateTrainerConfigTest, RefusesNegativeStaleness) {
  const absl::Status s = ValidateTrainerConfig(Config(Consistency::kBounded, -1, 1, 1));
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("staleness=-1"));
}

TEST(ValidateTrainerConfigTest, OverlapStillNeedsEqualNFetchAndNPush) {
  TrainerConfig c = Config(Consistency::kAsync, 0, 2, 1);
  c.overlap = true;
  EXPECT_EQ(ValidateTrainerConfig(c).code(), absl::StatusCode::kInvalidArgument);
}

// Records the clock of every Pull and Push, and the pushes' layer norms
// against the norms of what they carry; pulls read `pulled` (0 unless set).
class RecordingClient : public ParamClient {
 public:
  struct Call {
    bool pull;
    uint64_t clock;
  };

  absl::Status CreateTable(const proto::TableDef&) override { return absl::OkStatus(); }
  absl::Status Pull(absl::Span<const PullRange> ops, uint64_t clock, PullInfo* info) override {
    for (const PullRange& op : ops) std::fill(op.out.begin(), op.out.end(), pulled);
    if (info != nullptr) info->params_clock = clock;
    calls.push_back({true, clock});
    return absl::OkStatus();
  }
  absl::Status Push(absl::Span<const PushRange> ops, uint64_t clock, Versions*) override {
    calls.push_back({false, clock});
    for (const PushRange& op : ops) {
      if (op.layer_norms == nullptr) {
        ++pushes_without_norms;
        continue;
      }
      ++pushes_with_norms;
      double g = 0;
      for (float x : op.grads) g += static_cast<double>(x) * x;
      EXPECT_FLOAT_EQ(op.layer_norms->gradient(), static_cast<float>(std::sqrt(g))) << op.table;
      EXPECT_FLOAT_EQ(op.layer_norms->weight(), pulled * std::sqrt(op.grads.size())) << op.table;
    }
    return absl::OkStatus();
  }

  float pulled = 0;
  int pushes_with_norms = 0;
  int pushes_without_norms = 0;
  int num_servers() const override { return 1; }

  std::vector<Call> calls;
};

// `n` examples of dimension 2, two classes.
Dataset Tiny(int64_t n) {
  Dataset d;
  d.num_examples = n;
  d.dim = 2;
  d.num_classes = 2;
  for (int64_t i = 0; i < n; ++i) {
    d.features.push_back(static_cast<float>(i % 2));
    d.features.push_back(1.0f);
    d.labels.push_back(static_cast<int32_t>(i % 2));
  }
  return d;
}

// True when, for every push of round t, the worker pulled at clock t before
// it (what a BSP push of round t waits for).
bool EveryRoundRead(const std::vector<RecordingClient::Call>& calls) {
  std::vector<bool> read;
  for (const RecordingClient::Call& c : calls) {
    if (c.pull) {
      if (read.size() <= c.clock) read.resize(c.clock + 1, false);
      read[c.clock] = true;
    } else if (c.clock >= read.size() || !read[c.clock]) {
      return false;
    }
  }
  return true;
}

// The schedule behind the BSP rule: with n_fetch == n_push the worker reads
// every round it pushes, including a final partial one; with n_fetch > n_push
// it does not (the BSP push of such a round would wait forever).
TEST(TrainDownpourTest, ReadsEveryRoundItPushesIffNFetchDividesNPush) {
  const std::unique_ptr<Model> model = MakeSoftmaxRegression(2, 2);
  for (int n_fetch = 1; n_fetch <= 4; ++n_fetch) {
    for (int n_push = 1; n_push <= 4; ++n_push) {
      bool all_steps_ok = true;
      for (int64_t steps = 1; steps <= 13; ++steps) {
        RecordingClient client;
        TrainerConfig config = Config(Consistency::kAsync, 0, n_fetch, n_push);
        config.batch_size = 1;
        const absl::StatusOr<TrainStats> stats =
            TrainDownpour(client, *model, Tiny(steps), config, nullptr);
        ASSERT_TRUE(stats.ok()) << stats.status();
        EXPECT_EQ(stats->steps, steps);
        EXPECT_EQ(stats->pushes, (steps + n_push - 1) / n_push);
        all_steps_ok = all_steps_ok && EveryRoundRead(client.calls);
      }
      EXPECT_EQ(all_steps_ok, n_push % n_fetch == 0)
          << "n_fetch " << n_fetch << " n_push " << n_push;
    }
  }
}

// LARS: with layer_norms each block's push carries the norms of the
// parameters it was computed at and of its own gradient; without, none.
TEST(TrainDownpourTest, LayerNormsGoWithEachBlocksPush) {
  const std::unique_ptr<Model> model = MakeMlp(2, {3}, 2);
  for (bool overlap : {false, true}) {
    RecordingClient client;
    client.pulled = 0.5f;
    TrainerConfig config = Config(Consistency::kAsync, 0, 2, 2);
    config.batch_size = 1;
    config.overlap = overlap;
    config.layer_norms = true;
    ASSERT_TRUE(TrainDownpour(client, *model, Tiny(6), config, nullptr).ok());
    EXPECT_EQ(client.pushes_with_norms, 3 * 4) << "3 rounds of 4 blocks";
    EXPECT_EQ(client.pushes_without_norms, 0);
  }
  RecordingClient plain;
  TrainerConfig config = Config(Consistency::kAsync, 0, 1, 1);
  config.batch_size = 1;
  ASSERT_TRUE(TrainDownpour(plain, *model, Tiny(6), config, nullptr).ok());
  EXPECT_EQ(plain.pushes_with_norms, 0);
  EXPECT_EQ(plain.pushes_without_norms, 6 * 4);
}

}  // namespace
}  // namespace ps
