// The core under replication, driven directly: what a copy learns from the
// chain, and what the log's answers (may this copy write? where does a
// forwarded entry go?) change, asked before anything is applied.
#include <cstring>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/ps_core_fixture.h"
#include "server/replication/replication_log.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// Collects what a replicated core appends, as the chain would carry it.
class CollectingLog final : public ReplicationLog {
 public:
  void Append(proto::ForwardEntry entry) override { entries.push_back(std::move(entry)); }
  void Barrier(Done done) override { done(absl::OkStatus()); }
  std::vector<proto::ForwardEntry> entries;
};

// The fixture's core as a chain's primary and a copy behind it, each with
// a log collecting what it appends (a copy appends what it applies, to
// forward it on). Forward() applies the primary's entries on the copy, as
// the chain would.
class PsCoreChainTest : public PsCoreTest {
 protected:
  PsCoreChainTest() : copy_(CopyOptions(&clock_)) {
    core_->set_replication(&log_);
    copy_.set_replication(&copy_log_);
  }

  static PsCoreOptions CopyOptions(Clock* clock) {
    PsCoreOptions options;
    options.clock = clock;
    options.address = "copy:0";
    return options;
  }

  void Forward() {
    for (const proto::ForwardEntry& e : log_.entries) {
      bool refused = false;
      ASSERT_TRUE(copy_.ApplyForwarded(e, &refused).ok());
    }
    log_.entries.clear();
  }

  CollectingLog log_, copy_log_;
  PsCore copy_;
};

// A copy learns the workers' leases from the chain: promoted, it counts
// every live worker in its waits before any of them has called it.
TEST_F(PsCoreChainTest, HeartbeatsGoDownTheChainAndCopiesKnowTheLiveWorkers) {
  CollectingLog& log = log_;
  PsCore& copy = copy_;
  ASSERT_TRUE(core_->CreateTable(CreateTableRequestFor(SumTable("w", 4, 1))).ok());
  log.entries.clear();  // table creation is forwarded by the service, not tested here
  proto::HeartbeatRequest hb;
  hb.set_worker_id(5);
  hb.set_clock(7);
  hb.set_lease_ms(1000);
  hb.set_incarnation(55);
  ASSERT_TRUE(core_->Heartbeat(hb).ok());
  ASSERT_EQ(log.entries.size(), 1u);
  EXPECT_TRUE(log.entries[0].has_heartbeat());
  EXPECT_EQ(PsCoreTestPeer::clocks(copy).ParamsClock("w"), UINT64_MAX) << "no worker known yet";
  Forward();
  EXPECT_EQ(PsCoreTestPeer::clocks(copy).ParamsClock("w"), 7u)
      << "worker 5 live at clock 7 on the copy";
  // A refused heartbeat (another process, same id) is not forwarded.
  hb.set_incarnation(66);
  EXPECT_EQ(core_->Heartbeat(hb).status().code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(log.entries.empty());
  // Leaving is forwarded too.
  hb.set_incarnation(55);
  hb.set_leaving(true);
  ASSERT_TRUE(core_->Heartbeat(hb).ok());
  Forward();
  EXPECT_EQ(PsCoreTestPeer::clocks(copy).ParamsClock("w"), UINT64_MAX)
      << "worker 5 left on the copy too";
}

// A log whose answers the test sets: whether the copy may write, and where
// a forwarded entry goes.
class RoleLog final : public ReplicationLog {
 public:
  void Append(proto::ForwardEntry entry) override { entries.push_back(std::move(entry)); }
  void Barrier(Done done) override { done(absl::OkStatus()); }
  absl::Status CheckWritable() const override { return writable; }
  absl::StatusOr<bool> Place(const proto::ForwardEntry&) const override { return place; }
  absl::Status writable = absl::OkStatus();
  absl::StatusOr<bool> place = true;
  std::vector<proto::ForwardEntry> entries;
};

// What the log says is asked under the order lock before anything is
// applied: a copy that is not the primary applies no worker's push (nor
// records its id, so the retry at the new primary, or here once primary
// again, applies it); a forwarded entry refused or already held changes
// nothing and is not appended.
TEST_F(PsCoreTest, TheLogsAnswerComesBeforeAnyChange) {
  ASSERT_TRUE(core_->CreateTable(CreateTableRequestFor(SumTable("w", 4, 1))).ok());
  RoleLog log;
  core_->set_replication(&log);
  auto value = [&] {
    std::string values;
    EXPECT_TRUE(PsCoreTestPeer::store(*core_).Pull("w", KeySpec::Single(0, 1), &values).ok());
    float v = 0;
    std::memcpy(&v, values.data(), sizeof v);
    return v;
  };
  log.writable = absl::UnavailableError("not the primary");
  EXPECT_EQ(Push(OnePush("w", 0, -1, 42)).status().code(), absl::StatusCode::kUnavailable);
  proto::HeartbeatRequest hb;
  hb.set_worker_id(5);
  hb.set_lease_ms(1000);
  hb.set_incarnation(55);
  EXPECT_EQ(core_->Heartbeat(hb).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(core_->CreateTable(CreateTableRequestFor(SumTable("v", 4, 1))).status().code(),
            absl::StatusCode::kUnavailable);
  EXPECT_EQ(value(), 0.0f);
  EXPECT_TRUE(log.entries.empty());
  log.writable = absl::OkStatus();
  absl::StatusOr<proto::PushResponse> retry = Push(OnePush("w", 0, -1, 42));
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_FALSE(retry->duplicate()) << "the refused push left no id behind";
  EXPECT_EQ(value(), 1.0f);
  ASSERT_EQ(log.entries.size(), 1u);

  proto::ForwardEntry forwarded = log.entries[0];
  forwarded.mutable_push()->set_request_id(43);
  log.entries.clear();
  bool refused = false;
  log.place = absl::FailedPreconditionError("this copy is the shard's primary");
  absl::Status s = core_->ApplyForwarded(forwarded, &refused);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_TRUE(refused);
  log.place = false;
  EXPECT_TRUE(core_->ApplyForwarded(forwarded, &refused).ok());
  EXPECT_FALSE(refused);
  EXPECT_EQ(value(), 1.0f) << "neither the refused nor the held entry applied";
  EXPECT_TRUE(log.entries.empty()) << "nor appended";
  log.place = true;
  EXPECT_TRUE(core_->ApplyForwarded(forwarded, &refused).ok());
  EXPECT_EQ(value(), 2.0f);
  EXPECT_EQ(log.entries.size(), 1u);
}

// A LARS table scales each push by the trust ratio of the norms it carries,
// and a copy, applying the forwarded entry, by the same one; a push without
// norms is refused, applied nowhere and not forwarded.
TEST_F(PsCoreChainTest, LarsNormsTravelWithThePushDownTheChain) {
  proto::TableDef def = SumTable("w", 4, 1);  // SGD at rate 1, zeros
  def.set_lars_eta(0.5f);
  ASSERT_TRUE(core_->CreateTable(CreateTableRequestFor(def)).ok());
  ASSERT_TRUE(copy_.CreateTable(CreateTableRequestFor(def)).ok());
  log_.entries.clear();  // table creation is forwarded by the service
  CollectingLog& log = log_;
  PsCore& copy = copy_;
  auto value = [](PsCore& core) {
    std::string values;
    EXPECT_TRUE(PsCoreTestPeer::store(core).Pull("w", KeySpec::Single(0, 1), &values).ok());
    float v = 0;
    std::memcpy(&v, values.data(), sizeof v);
    return v;
  };
  auto with_norms = [](proto::PushRequest push, float weight, float gradient) {
    push.mutable_layer_norms()->set_weight(weight);
    push.mutable_layer_norms()->set_gradient(gradient);
    return push;
  };
  absl::StatusOr<proto::PushResponse> bare = Push(OnePush("w", 0, -1, 1));
  EXPECT_EQ(bare.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bare.status().message(), HasSubstr("table 'w' uses LARS"));
  EXPECT_TRUE(log.entries.empty());
  // ||w|| = 0: ratio 1, w = 0 - (-1) = 1.
  ASSERT_TRUE(Push(with_norms(OnePush("w", 0, -1, 2), 0, 1)).ok());
  // ratio 0.5 * 2 / 4 = 0.25: w = 1 - 0.25 * 2 = 0.5.
  ASSERT_TRUE(Push(with_norms(OnePush("w", 0, 2, 3), 2, 4)).ok());
  EXPECT_EQ(value(*core_), 0.5f);
  ASSERT_EQ(log.entries.size(), 2u);
  Forward();
  EXPECT_EQ(value(copy), 0.5f);
}

}  // namespace
}  // namespace ps
