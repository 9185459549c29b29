// ShardCheckpointers on ShardHosts of the in-memory fixture: a shard's cut
// is marked and written on its primary only, a copy that moved since the
// MARK is refused, and the core of a shard that left the server is not
// kept alive by its last checkpoint.
#include "server/checkpoint/shard_checkpointers.h"

#include <memory>
#include <optional>
#include <string>

#include "absl/synchronization/notification.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/replication/shard_host_fixture.h"
#include "tests/test_util/temp_dir.h"

namespace ps {
namespace hosttest {
namespace {

using ::testing::HasSubstr;

// One checkpoint call, waited for (bounded).
absl::StatusOr<proto::CheckpointResponse> Call(ShardCheckpointers& part,
                                               proto::CheckpointRequest request) {
  absl::Notification called;
  absl::StatusOr<proto::CheckpointResponse> reply = absl::UnknownError("not answered");
  part.Handle(request, [&](absl::StatusOr<proto::CheckpointResponse> r) {
    reply = std::move(r);
    called.Notify();
  });
  if (!called.WaitForNotificationWithTimeout(kWait)) return absl::DeadlineExceededError("hung");
  return reply;
}

proto::CheckpointRequest Request(proto::CheckpointAction action, uint64_t cut,
                                 std::optional<uint32_t> shard, const std::string& dir = "") {
  proto::CheckpointRequest request;
  request.set_action(action);
  request.set_cut(cut);
  if (shard) request.set_shard(*shard);
  request.set_dir(dir);
  request.set_timeout_ms(10000);
  return request;
}

TEST_F(ShardHostTest, ACutIsTakenOnTheShardsPrimaryAndReleasesItsCore) {
  std::shared_ptr<PsCore> primary = StartChainOfTwo();
  ASSERT_NE(primary, nullptr);
  ASSERT_TRUE(Push(*primary, 1).ok());
  ShardCheckpointers on0(&host(0)), on1(&host(1));

  absl::StatusOr<proto::CheckpointResponse> unnamed =
      Call(on0, Request(proto::CHECKPOINT_MARK, 5, std::nullopt));
  EXPECT_EQ(unnamed.status().code(), absl::StatusCode::kInvalidArgument);
  absl::StatusOr<proto::CheckpointResponse> replica =
      Call(on1, Request(proto::CHECKPOINT_MARK, 5, 0));
  EXPECT_EQ(replica.status().code(), absl::StatusCode::kUnavailable) << "not the primary";
  EXPECT_THAT(replica.status().message(), HasSubstr("not the primary of shard 0"));

  absl::StatusOr<proto::CheckpointResponse> marked =
      Call(on0, Request(proto::CHECKPOINT_MARK, 5, 0));
  ASSERT_TRUE(marked.ok()) << marked.status();
  EXPECT_TRUE(marked->marked());
  const std::string dir = MakeTestDir("shard_checkpointers");
  absl::StatusOr<proto::CheckpointResponse> written =
      Call(on0, Request(proto::CHECKPOINT_WRITE, 5, 0, dir));
  ASSERT_TRUE(written.ok()) << written.status();
  ASSERT_EQ(written->files_size(), 1);
  EXPECT_THAT(written->files(0).name(), HasSubstr("server-0-table-"));

  // A MARK, then the shard moves to server 1: the WRITE finds no cut on the
  // copy it serves now.
  ASSERT_TRUE(Call(on0, Request(proto::CHECKPOINT_MARK, 6, 0)).ok());
  std::weak_ptr<PsCore> old = primary;
  primary.reset();
  SetRing(Ring(2, {{{1}}}), {1, 0});
  absl::StatusOr<proto::CheckpointResponse> moved =
      Call(on0, Request(proto::CHECKPOINT_WRITE, 6, 0, dir));
  EXPECT_EQ(moved.status().code(), absl::StatusCode::kUnavailable) << moved.status();
  on0.Sweep();
  EXPECT_FALSE(old.expired()) << "the cut at 6 is still marked on it";
  // The coordinator's ABORT ends the mark although the shard moved; then
  // the old copy is let go.
  ASSERT_TRUE(Call(on0, Request(proto::CHECKPOINT_ABORT, 6, 0)).ok());
  on0.Sweep();
  EXPECT_TRUE(old.expired()) << "the shard left server 0: its copy is freed";
  absl::StatusOr<proto::CheckpointResponse> promoted =
      Call(on1, Request(proto::CHECKPOINT_MARK, 7, 0));
  ASSERT_TRUE(promoted.ok()) << promoted.status();
  EXPECT_TRUE(promoted->marked()) << "the new primary takes the shard's cuts";
  ASSERT_TRUE(Call(on1, Request(proto::CHECKPOINT_ABORT, 7, 0)).ok());
}

// A WRITE waiting for a live worker's rounds below the cut, when the shard
// leaves the server: it fails at once (nothing ticks a copy that is no
// longer held, so it would wait for ever, and hold the server's shutdown).
TEST_F(ShardHostTest, AWriteWaitingForItsCutFailsWhenTheShardLeaves) {
  std::shared_ptr<PsCore> primary = StartChainOfTwo();
  ASSERT_NE(primary, nullptr);
  // Worker 1 (the fixture's pusher) live and at clock 1 in table "w": the
  // cut at 5 waits for its rounds 1 to 4.
  proto::HeartbeatRequest hb;
  hb.set_worker_id(1);
  hb.set_lease_ms(60000);
  hb.set_incarnation(99);
  absl::StatusOr<proto::HeartbeatResponse> beat = primary->Heartbeat(hb);
  ASSERT_TRUE(beat.ok()) << beat.status();
  ASSERT_TRUE(Push(*primary, 1).ok());
  ShardCheckpointers on0(&host(0));
  ASSERT_TRUE(Call(on0, Request(proto::CHECKPOINT_MARK, 5, 0)).ok());
  const std::string dir = MakeTestDir("shard_checkpointers_wait");
  absl::Notification answered;
  absl::StatusOr<proto::CheckpointResponse> written = absl::UnknownError("not answered");
  on0.Handle(Request(proto::CHECKPOINT_WRITE, 5, 0, dir),
             [&](absl::StatusOr<proto::CheckpointResponse> r) {
               written = std::move(r);
               answered.Notify();
             });
  EXPECT_FALSE(answered.HasBeenNotified()) << "worker 1 has not finished its rounds";
  primary.reset();
  SetRing(Ring(2, {{{1}}}), {1, 0});
  ASSERT_TRUE(answered.WaitForNotificationWithTimeout(kWait));
  EXPECT_EQ(written.status().code(), absl::StatusCode::kUnavailable) << written.status();
  EXPECT_THAT(written.status().message(), HasSubstr("left the chain"));
}

}  // namespace
}  // namespace hosttest
}  // namespace ps
