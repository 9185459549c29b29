// A server's part of a checkpoint, through the core: the cut waits for the
// slower worker's pushes below it, leaves out the faster one's above it, and
// a fresh core restored from the files holds exactly the pushes below the
// cut, the worker clocks and the de-duplication windows.
#include "server/checkpoint/checkpointer.h"

#include <optional>
#include <string>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/ps_core_test_peer.h"
#include "tests/test_util/store_pull.h"
#include "tests/test_util/table_defs.h"
#include "tests/test_util/temp_dir.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

std::unique_ptr<PsCore> NewCore() {
  PsCoreOptions options;
  options.address = "test:0";
  return std::make_unique<PsCore>(options);
}

void Register(PsCore& core, uint32_t worker) {
  proto::HeartbeatRequest hb;
  hb.set_worker_id(worker);
  hb.set_lease_ms(60000);
  ASSERT_TRUE(core.Heartbeat(hb).ok());
}

// Worker `worker` adds 1 to every key at `clock`.
absl::Status PushOne(PsCore& core, uint32_t worker, uint64_t clock) {
  proto::PushRequest req;
  req.set_table("c");
  proto::KeyRange* r = req.add_ranges();
  r->set_begin(0);
  r->set_end(10);
  std::vector<float> g(10, -1.0f);
  req.set_values(std::string(reinterpret_cast<const char*>(g.data()), g.size() * sizeof(float)));
  req.set_worker_id(worker);
  req.set_clock(clock);
  req.set_request_id(worker * 1000 + clock + 1);
  PushArgs args;
  if (absl::Status s = DecodePush(req, &core.key_lists(), &args); !s.ok()) return s;
  std::optional<absl::StatusOr<proto::PushResponse>> result;
  core.Push(&args, absl::InfiniteFuture(),
            [&result](absl::StatusOr<proto::PushResponse> r) { result = std::move(r); });
  if (!result.has_value()) return absl::InternalError("the push did not complete at once");
  return result->status();
}

absl::StatusOr<proto::CheckpointResponse> Call(Checkpointer& c, proto::CheckpointAction action,
                                               uint64_t cut, const std::string& dir = "") {
  proto::CheckpointRequest req;
  req.set_action(action);
  req.set_cut(cut);
  req.set_dir(dir);
  req.set_timeout_ms(30000);
  absl::Notification done;
  absl::StatusOr<proto::CheckpointResponse> result;
  c.Handle(req, [&](absl::StatusOr<proto::CheckpointResponse> r) {
    result = std::move(r);
    done.Notify();
  });
  done.WaitForNotification();
  return result;
}

// A WRITE of the cut into dir (timeout_ms 0: the default), answered later.
struct PendingWrite {
  absl::Notification done;
  absl::StatusOr<proto::CheckpointResponse> part;
};
void StartWrite(Checkpointer& c, uint64_t cut, const std::string& dir, uint32_t timeout_ms,
                PendingWrite* w) {
  proto::CheckpointRequest req;
  req.set_action(proto::CHECKPOINT_WRITE);
  req.set_cut(cut);
  req.set_dir(dir);
  req.set_timeout_ms(timeout_ms);
  c.Handle(req, [w](absl::StatusOr<proto::CheckpointResponse> r) {
    w->part = std::move(r);
    w->done.Notify();
  });
}

// A core with table "c" (10 keys, summing) and workers 1 and 2 registered,
// and its checkpointer.
class CheckpointerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TRUE(core_->CreateTable(CreateTableRequestFor(SumTable("c", 10, 1))).ok());
    Register(*core_, 1);
    Register(*core_, 2);
  }
  std::unique_ptr<PsCore> core_ = NewCore();
  Checkpointer checkpointer_{core_.get(), 0};
};

TEST_F(CheckpointerTest, CutWaitsForSlowerWorkerAndRestoresExactly) {
  const std::string root = TestRoot("cut");
  for (uint64_t t = 0; t < 5; ++t) ASSERT_TRUE(PushOne(*core_, 1, t).ok());
  for (uint64_t t = 0; t < 3; ++t) ASSERT_TRUE(PushOne(*core_, 2, t).ok());

  auto query = Call(checkpointer_, proto::CHECKPOINT_MARK, 0);
  ASSERT_TRUE(query.ok()) << query.status();
  EXPECT_EQ(query->max_clock(), 4u);
  EXPECT_FALSE(query->marked());
  auto refused = Call(checkpointer_, proto::CHECKPOINT_MARK, 4);
  ASSERT_TRUE(refused.ok());
  EXPECT_FALSE(refused->marked());
  auto marked = Call(checkpointer_, proto::CHECKPOINT_MARK, 5);
  ASSERT_TRUE(marked.ok() && marked->marked());

  // WRITE waits for worker 2's rounds 3 and 4; worker 1's 5 and 6 are
  // outside the cut.
  const std::string dir = root + "/" + CheckpointDirName(1);
  PendingWrite write;
  StartWrite(checkpointer_, 5, dir, 0, &write);
  ASSERT_TRUE(PushOne(*core_, 1, 5).ok());
  ASSERT_TRUE(PushOne(*core_, 1, 6).ok());
  ASSERT_TRUE(PushOne(*core_, 2, 3).ok());
  EXPECT_FALSE(write.done.HasBeenNotified());
  ASSERT_TRUE(PushOne(*core_, 2, 4).ok());  // completes the cut
  write.done.WaitForNotification();
  const absl::StatusOr<proto::CheckpointResponse>& part = write.part;
  ASSERT_TRUE(part.ok()) << part.status();
  ASSERT_EQ(part->files_size(), 1);
  ASSERT_EQ(part->clocks_size(), 2);
  EXPECT_EQ(part->clocks(0).clock(), 5u);  // worker 1 at 7, capped at the cut
  EXPECT_EQ(part->clocks(1).clock(), 5u);
  ASSERT_EQ(part->dedup_size(), 2);
  EXPECT_EQ(part->dedup(0).request_ids_size(), 5);  // worker 1's pushes below the cut
  // 10 in the cut, 2 outside.
  for (float v : PullAll(PsCoreTestPeer::store(*core_), "c", KeySpec::Single(0, 10)))
    EXPECT_EQ(v, 12.0f);

  proto::CheckpointManifest m;
  m.set_sequence(1);
  m.set_cut(5);
  *m.mutable_files() = part->files();
  *m.mutable_clocks() = part->clocks();
  *m.mutable_tables() = part->tables();
  *m.mutable_dedup() = part->dedup();
  ASSERT_TRUE(CommitCheckpoint(dir, m).ok());

  auto restored = NewCore();
  Checkpointer loader(restored.get(), 0);
  std::vector<std::string> skipped;
  auto found = loader.Restore(root, &skipped);
  ASSERT_TRUE(found.ok()) << found.status();
  EXPECT_TRUE(skipped.empty());
  for (float v : PullAll(PsCoreTestPeer::store(*restored), "c", KeySpec::Single(0, 10)))
    EXPECT_EQ(v, 10.0f);
  const auto clocks = PsCoreTestPeer::clocks(*restored).Clocks(~uint64_t{0});
  ASSERT_EQ(clocks.size(), 2u);
  EXPECT_EQ(clocks[0].clock, 5u);
  // A retry of a push in the checkpoint is not applied again; one after the
  // cut is.
  ASSERT_TRUE(PushOne(*restored, 1, 4).ok());
  for (float v : PullAll(PsCoreTestPeer::store(*restored), "c", KeySpec::Single(0, 10)))
    EXPECT_EQ(v, 10.0f);
  ASSERT_TRUE(PushOne(*restored, 1, 5).ok());
  for (float v : PullAll(PsCoreTestPeer::store(*restored), "c", KeySpec::Single(0, 10)))
    EXPECT_EQ(v, 11.0f);
}

TEST_F(CheckpointerTest, DeadlineNamesTheSlowestWorkerAndEndsTheCut) {
  const std::string root = TestRoot("deadline");
  ASSERT_TRUE(PushOne(*core_, 1, 0).ok());
  ASSERT_TRUE(PushOne(*core_, 2, 0).ok());
  ASSERT_TRUE(Call(checkpointer_, proto::CHECKPOINT_MARK, 2)->marked());
  ASSERT_TRUE(PushOne(*core_, 1, 1).ok());
  PendingWrite write;
  StartWrite(checkpointer_, 2, root + "/" + CheckpointDirName(1), 1, &write);
  // Deadlines are enforced by the server's tick.
  for (int i = 0; i < 10000000 && !write.done.HasBeenNotified(); ++i) core_->Tick();
  ASSERT_TRUE(write.done.HasBeenNotified());
  EXPECT_EQ(write.part.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(write.part.status().message(),
              HasSubstr("worker 2 has completed clock 1 of table 'c'"));
  // The cut ended: another can be marked.
  EXPECT_TRUE(Call(checkpointer_, proto::CHECKPOINT_MARK, 3)->marked());
  EXPECT_TRUE(Call(checkpointer_, proto::CHECKPOINT_ABORT, 3).ok());
  EXPECT_EQ(Call(checkpointer_, proto::CHECKPOINT_ABORT, 3).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

// A retried mark lands a round or more past a finishing worker's last
// push: its leaving ends the cut's wait for it at once (not the deadline),
// and the checkpoint records the rounds it completed.
TEST_F(CheckpointerTest, AWorkerLeavingEndsTheCutsWaitForIt) {
  const std::string root = TestRoot("leave");
  for (uint64_t t = 0; t < 3; ++t) ASSERT_TRUE(PushOne(*core_, 1, t).ok());
  for (uint64_t t = 0; t < 3; ++t) ASSERT_TRUE(PushOne(*core_, 2, t).ok());
  ASSERT_TRUE(Call(checkpointer_, proto::CHECKPOINT_MARK, 5)->marked());
  PendingWrite write;
  StartWrite(checkpointer_, 5, root + "/" + CheckpointDirName(1), 60000, &write);
  ASSERT_TRUE(PushOne(*core_, 1, 3).ok());
  ASSERT_TRUE(PushOne(*core_, 1, 4).ok());
  EXPECT_FALSE(write.done.HasBeenNotified()) << "worker 2 has not pushed rounds 3 and 4";
  proto::HeartbeatRequest leave;
  leave.set_worker_id(2);
  leave.set_leaving(true);
  ASSERT_TRUE(core_->Heartbeat(leave).ok());
  ASSERT_TRUE(write.done.WaitForNotificationWithTimeout(absl::Seconds(30)))
      << "the cut still waits for worker 2, which left";
  const absl::StatusOr<proto::CheckpointResponse>& part = write.part;
  ASSERT_TRUE(part.ok()) << part.status();
  ASSERT_EQ(part->clocks_size(), 2);
  EXPECT_EQ(part->clocks(0).worker_id(), 1u);
  EXPECT_EQ(part->clocks(0).clock(), 5u);
  EXPECT_EQ(part->clocks(1).worker_id(), 2u);
  EXPECT_EQ(part->clocks(1).clock(), 3u);
}

}  // namespace
}  // namespace ps
