// JoinWorkerGroups among threads (LocalGroup as the MPI world): rank r of a
// world of 4 with K = 2 is replica r / 2, partition r % 2, its replica group
// being the two partitions; flags that disagree with the world, and a world
// that K does not divide, are refused naming the flag and the values.
#include "worker/worker_group.h"

#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "worker/collective/local_collective.h"
#include "worker/collective/on_each_member.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// A Collective that forwards to a member of a LocalGroup without owning it.
class Borrowed final : public Collective {
 public:
  explicit Borrowed(Collective* c) : c_(c) {}
  int rank() const override { return c_->rank(); }
  int size() const override { return c_->size(); }
  absl::Status AllreduceSum(absl::Span<float> d) override { return c_->AllreduceSum(d); }
  absl::Status Allgather(absl::Span<const float> in, absl::Span<float> out) override {
    return c_->Allgather(in, out);
  }
  absl::Status Broadcast(absl::Span<float> d, int root) override { return c_->Broadcast(d, root); }
  absl::StatusOr<std::unique_ptr<Collective>> Split(int color, int key) override {
    return c_->Split(color, key);
  }

 private:
  Collective* const c_;
};

TEST(WorkerGroupTest, RanksBecomeReplicasAndPartitions) {
  LocalGroup world(4, absl::Seconds(30));
  std::vector<WorkerConfig> configs(4);
  std::vector<float> sums(4);
  OnEachMember(world, [&](int r, Collective* c) {
    WorkerConfig& config = configs[r];
    config.model_partitions = 2;
    WorkerGroups groups;
    groups.world = std::make_unique<Borrowed>(c);
    ASSERT_TRUE(NeedsWorkerGroups(config));
    ASSERT_TRUE(JoinWorkerGroups(&config, &groups).ok());
    ASSERT_NE(groups.replica, nullptr);
    EXPECT_EQ(groups.replica->size(), 2);
    EXPECT_EQ(groups.replica->rank(), config.partition);
    // The replica's group sums over its own two ranks only.
    float v = static_cast<float>(r);
    ASSERT_TRUE(groups.replica->AllreduceSum(absl::MakeSpan(&v, 1)).ok());
    sums[r] = v;
  });
  for (int r = 0; r < 4; ++r) {
    EXPECT_EQ(configs[r].trainer.worker_index, r / 2) << r;
    EXPECT_EQ(configs[r].trainer.num_workers, 2) << r;
    EXPECT_EQ(configs[r].partition, r % 2) << r;
  }
  EXPECT_EQ(sums, (std::vector<float>{1, 1, 5, 5}));
}

TEST(WorkerGroupTest, FlagsThatDisagreeWithTheWorldAreRefused) {
  LocalGroup world(3, absl::Seconds(5));
  WorkerConfig config;
  config.model_partitions = 2;
  WorkerGroups groups;
  groups.world = std::make_unique<Borrowed>(world.Member(1));
  absl::Status s = JoinWorkerGroups(&config, &groups);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--model_partitions=2: the job has 3 processes"));

  LocalGroup two(2, absl::Seconds(5));
  WorkerConfig wrong;
  wrong.dense_allreduce = true;
  wrong.trainer.num_workers = 5;
  WorkerGroups g2;
  g2.world = std::make_unique<Borrowed>(two.Member(1));
  s = JoinWorkerGroups(&wrong, &g2);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("--num_workers=5 but this process is rank 1 of 2"));

  WorkerConfig evaluating;
  evaluating.dense_allreduce = true;
  evaluating.eval_only = true;
  EXPECT_FALSE(NeedsWorkerGroups(evaluating));  // an allreduce job's evaluation reads the servers
}

}  // namespace
}  // namespace ps
