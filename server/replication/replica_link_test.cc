// ReplicaLink without sockets: an in-memory ForwardTransport that records
// every request, fails or blocks on demand, and a SnapshotSource that emits
// a fixed number of parts. Synchronisation is by mutex conditions with
// bounded waits, never by sleeping.
#include "server/replication/replica_link.h"

#include <cstdint>
#include <limits>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/replication.pb.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// How long any wait in these tests may take before it counts as a hang.
constexpr absl::Duration kWait = absl::Seconds(20);

// Answers applied_seq = first_seq + entries - 1, after failing the next N
// calls with UNAVAILABLE or holding calls while blocked. Thread-safe.
class FakeTransport final : public ForwardTransport {
 public:
  struct Call {
    std::string address;
    proto::ForwardRequest request;
    bool failed = false;
  };

  absl::StatusOr<proto::ForwardResponse> Forward(const std::string& address,
                                                 const proto::ForwardRequest& request,
                                                 absl::Duration) override {
    absl::MutexLock lock(&mu_);
    ++waiting_;
    auto open = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !blocked_; };
    const bool released = mu_.AwaitWithTimeout(absl::Condition(&open), kWait);
    --waiting_;
    if (!released) return absl::DeadlineExceededError("fake transport: never released");
    const bool fail = fail_next_ > 0;
    if (fail) --fail_next_;
    calls_.push_back({address, request, fail});
    if (fail) return absl::UnavailableError("fake transport: told to fail");
    proto::ForwardResponse response;
    response.set_applied_seq(request.first_seq() + request.entries_size() - 1);
    return response;
  }

  void FailNext(int n) {
    absl::MutexLock lock(&mu_);
    fail_next_ = n;
  }
  // Calls wait from now on until Release.
  void Block() {
    absl::MutexLock lock(&mu_);
    blocked_ = true;
  }
  void Release() {
    absl::MutexLock lock(&mu_);
    blocked_ = false;
  }
  // Whether a call is held by Block within kWait.
  bool WaitUntilACallIsHeld() {
    absl::MutexLock lock(&mu_);
    auto held = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return blocked_ && waiting_ > 0; };
    return mu_.AwaitWithTimeout(absl::Condition(&held), kWait);
  }
  std::vector<Call> calls() const {
    absl::MutexLock lock(&mu_);
    return calls_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<Call> calls_ ABSL_GUARDED_BY(mu_);
  int fail_next_ ABSL_GUARDED_BY(mu_) = 0;
  bool blocked_ ABSL_GUARDED_BY(mu_) = false;
  int waiting_ ABSL_GUARDED_BY(mu_) = 0;
};

// Emits `parts` snapshot parts ("part 0", ... padded to record_bytes), the
// last with last = true.
class FakeSource final : public SnapshotSource {
 public:
  explicit FakeSource(int parts, size_t record_bytes = 0)
      : parts_(parts), record_bytes_(record_bytes) {}

  absl::Status Begin(const std::function<bool()>& after) override {
    after();
    absl::MutexLock lock(&mu_);
    ++begins_;
    return absl::OkStatus();
  }
  absl::Status Write(const std::function<absl::Status(proto::ForwardEntry)>& emit,
                     size_t max_record_bytes) override {
    {
      absl::MutexLock lock(&mu_);
      max_record_bytes_ = max_record_bytes;
    }
    for (int i = 0; i < parts_; ++i) {
      proto::ForwardEntry entry;
      std::string record = absl::StrCat("part ", i);
      record.resize(std::max(record.size(), record_bytes_), '.');
      entry.mutable_snapshot()->set_record(std::move(record));
      entry.mutable_snapshot()->set_last(i + 1 == parts_);
      if (absl::Status s = emit(std::move(entry)); !s.ok()) return s;
    }
    return absl::OkStatus();
  }
  int begins() const {
    absl::MutexLock lock(&mu_);
    return begins_;
  }
  size_t max_record_bytes() const {
    absl::MutexLock lock(&mu_);
    return max_record_bytes_;
  }

 private:
  const int parts_;
  const size_t record_bytes_;
  mutable absl::Mutex mu_;
  int begins_ ABSL_GUARDED_BY(mu_) = 0;
  size_t max_record_bytes_ ABSL_GUARDED_BY(mu_) = 0;
};

// What became of one Barrier: how often its callback ran, and with what.
// Must outlive the link (the link's destructor may run it).
class Outcome {
 public:
  ReplicationLog::Done Callback(std::function<void()> on_run = nullptr) {
    return [this, on_run = std::move(on_run)](absl::Status s) {
      if (on_run) on_run();
      absl::MutexLock lock(&mu_);
      ++runs_;
      status_ = s;
    };
  }
  // The status of the first run, or DEADLINE_EXCEEDED when it did not run
  // within kWait.
  absl::Status Wait() {
    absl::MutexLock lock(&mu_);
    auto ran = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return runs_ > 0; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&ran), kWait)) {
      return absl::DeadlineExceededError("the barrier's callback did not run");
    }
    return status_;
  }
  int runs() const {
    absl::MutexLock lock(&mu_);
    return runs_;
  }

 private:
  mutable absl::Mutex mu_;
  int runs_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status status_ ABSL_GUARDED_BY(mu_);
};

// A push entry told apart by its request id.
proto::ForwardEntry Entry(uint64_t id) {
  proto::ForwardEntry entry;
  entry.mutable_push()->set_table("t");
  entry.mutable_push()->set_request_id(id);
  return entry;
}

// What one address received in acknowledged calls, checked to be one
// stream numbered 1, 2, ... in call order.
struct Received {
  uint64_t stream = 0;
  std::vector<proto::ForwardEntry> entries;
  std::vector<uint64_t> PushIds() const {
    std::vector<uint64_t> ids;
    for (const auto& e : entries) {
      if (e.has_push()) ids.push_back(e.push().request_id());
    }
    return ids;
  }
  int SnapshotParts() const {
    int n = 0;
    for (const auto& e : entries) n += e.has_snapshot() ? 1 : 0;
    return n;
  }
};
Received ReceivedAt(const FakeTransport& transport, const std::string& address) {
  Received r;
  for (const FakeTransport::Call& call : transport.calls()) {
    if (call.address != address || call.failed) continue;
    if (r.stream == 0) r.stream = call.request.stream_id();
    EXPECT_EQ(call.request.stream_id(), r.stream) << "one stream per successor";
    EXPECT_EQ(call.request.first_seq(), r.entries.size() + 1) << "consecutive, from 1";
    for (const auto& e : call.request.entries()) r.entries.push_back(e);
  }
  return r;
}

ReplicaLink::Options Opts() {
  ReplicaLink::Options options;
  options.shard = 3;
  options.self = 7;
  options.retry_backoff = absl::Milliseconds(1);
  return options;
}

const ReplicaLink::Target kH1{1, "h1"};
const ReplicaLink::Target kH2{2, "h2"};

// Retargets to `target` and waits for the snapshot to be acknowledged.
void SnapshotTo(ReplicaLink& link, uint64_t ring_version, const ReplicaLink::Target& target) {
  Outcome snapshot;
  link.Retarget(ring_version, target);
  link.Barrier(snapshot.Callback());
  ASSERT_TRUE(snapshot.Wait().ok());
}

// Snapshots to h1, then appends entry 1 and holds its batch on the way.
void HoldEntryOne(ReplicaLink& link, FakeTransport& transport) {
  SnapshotTo(link, 1, kH1);
  transport.Block();
  link.Append(Entry(1));
  ASSERT_TRUE(transport.WaitUntilACallIsHeld());
}

TEST(ReplicaLinkTest, TailAcknowledgesAtOnceAndSendsNothing) {
  FakeTransport transport;
  FakeSource source(2);
  Outcome before_ring, tail;
  {
    ReplicaLink link(Opts(), &transport, &source);
    link.Append(Entry(1));
    link.Barrier(before_ring.Callback());
    EXPECT_EQ(before_ring.runs(), 1) << "no successor yet: run inside Barrier";
    link.Retarget(1, std::nullopt);
    link.Append(Entry(2));
    link.Barrier(tail.Callback());
    EXPECT_EQ(tail.runs(), 1);
    EXPECT_EQ(link.stats().pending, 0u);
  }
  EXPECT_TRUE(before_ring.Wait().ok());
  EXPECT_TRUE(tail.Wait().ok());
  EXPECT_THAT(transport.calls(), IsEmpty());
  EXPECT_EQ(source.begins(), 0);
}

// The first successor gets the snapshot, then the entries in order, on one
// stream numbered from 1, each request naming shard, sender and ring.
TEST(ReplicaLinkTest, SnapshotThenEntriesInOrderOnOneStream) {
  FakeTransport transport;
  FakeSource source(3);
  ReplicaLink::Options options = Opts();
  options.max_batch_bytes = 1;  // one entry per request: many requests to number
  ReplicaLink link(options, &transport, &source);
  SnapshotTo(link, 5, kH1);
  for (uint64_t id = 1; id <= 5; ++id) link.Append(Entry(id));
  Outcome done;
  link.Barrier(done.Callback());
  ASSERT_TRUE(done.Wait().ok());

  Received h1 = ReceivedAt(transport, "h1");
  EXPECT_NE(h1.stream, 0u);
  ASSERT_EQ(h1.entries.size(), 8u);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(h1.entries[i].has_snapshot()) << i;
    EXPECT_EQ(h1.entries[i].snapshot().last(), i == 2);
  }
  EXPECT_THAT(h1.PushIds(), ElementsAre(1, 2, 3, 4, 5));
  for (const FakeTransport::Call& call : transport.calls()) {
    EXPECT_EQ(call.request.shard(), 3u);
    EXPECT_EQ(call.request.from_server(), 7u);
    EXPECT_EQ(call.request.ring_version(), 5u);
  }
  ReplicaLink::Stats stats = link.stats();
  EXPECT_EQ(stats.snapshots, 1u);
  EXPECT_EQ(stats.entries_sent, 5u);
  EXPECT_EQ(stats.batches_resent, 0u);
  EXPECT_EQ(stats.pending, 0u);

  // A newer ring with the same successor: same stream, no new snapshot.
  link.Retarget(6, kH1);
  link.Append(Entry(6));
  Outcome later;
  link.Barrier(later.Callback());
  ASSERT_TRUE(later.Wait().ok());
  Received again = ReceivedAt(transport, "h1");
  EXPECT_EQ(again.stream, h1.stream);
  EXPECT_THAT(again.PushIds(), ElementsAre(1, 2, 3, 4, 5, 6));
  EXPECT_EQ(transport.calls().back().request.ring_version(), 6u);
  EXPECT_EQ(source.begins(), 1);
}

// Snapshot records are asked at half the batch size, and a batch never
// grows past max_batch_bytes (the successor's message limit) by taking one
// more record: 10 records of 300 bytes in batches of at most 1000 bytes.
TEST(ReplicaLinkTest, SnapshotBatchesStayWithinTheBatchSize) {
  FakeTransport transport;
  FakeSource source(10, 300);
  ReplicaLink::Options options = Opts();
  options.max_batch_bytes = 1000;
  ReplicaLink link(options, &transport, &source);
  SnapshotTo(link, 5, kH1);
  EXPECT_EQ(source.max_record_bytes(), 500u);
  size_t parts = 0;
  for (const FakeTransport::Call& call : transport.calls()) {
    size_t bytes = 0;
    for (const auto& e : call.request.entries()) bytes += e.ByteSizeLong();
    EXPECT_LE(bytes, 1000u);
    parts += call.request.entries_size();
  }
  EXPECT_EQ(parts, 10u);
  EXPECT_GE(transport.calls().size(), 4u) << "3 records of ~310 bytes a batch at most";
}

// The history is charged to the process's history budget: it keeps what
// the budget has room for (dropping its oldest entries), never more, and
// gives it all back when the link goes.
TEST(ReplicaLinkTest, HistoryStaysWithinItsBudget) {
  FakeTransport transport;
  FakeSource source(1);
  const size_t entry_bytes = Entry(1).ByteSizeLong();
  MemoryBudget budget(3 * entry_bytes + entry_bytes / 2);
  ReplicaLink::Options options = Opts();
  options.history_bytes = 1 << 20;
  options.history_budget = &budget;
  {
    ReplicaLink link(options, &transport, &source);
    for (uint64_t id = 1; id <= 10; ++id) {
      link.Append(Entry(id));
      EXPECT_LE(budget.used(), budget.limit());
      EXPECT_GT(budget.used(), 0u);
    }
    EXPECT_GE(budget.used(), 2 * entry_bytes) << "keeps what fits";
  }
  EXPECT_EQ(budget.used(), 0u);
}

TEST(ReplicaLinkTest, BarrierWaitsForTheBatchAcknowledgement) {
  FakeTransport transport;
  FakeSource source(1);
  ReplicaLink link(Opts(), &transport, &source);
  HoldEntryOne(link, transport);
  // When the barrier runs, the batch holding entry 1 must have been answered.
  std::vector<uint64_t> acked_when_run;
  Outcome barrier;
  link.Barrier(barrier.Callback([&] { acked_when_run = ReceivedAt(transport, "h1").PushIds(); }));
  EXPECT_EQ(barrier.runs(), 0) << "entry 1 is still on its way";
  EXPECT_GT(link.stats().pending, 0u);
  transport.Release();
  ASSERT_TRUE(barrier.Wait().ok());
  EXPECT_THAT(acked_when_run, ElementsAre(1));
  EXPECT_EQ(barrier.runs(), 1);
}

TEST(ReplicaLinkTest, FailedBatchesAreResentWithTheSameSequenceNumbers) {
  FakeTransport transport;
  FakeSource source(1);
  Outcome done;
  {
    ReplicaLink link(Opts(), &transport, &source);
    SnapshotTo(link, 1, kH1);
    const size_t before = transport.calls().size();
    transport.FailNext(3);
    for (uint64_t id = 1; id <= 4; ++id) link.Append(Entry(id));
    link.Barrier(done.Callback());
    ASSERT_TRUE(done.Wait().ok());

    // Each failed attempt is followed by the same batch, same numbers.
    std::vector<FakeTransport::Call> calls = transport.calls();
    uint64_t failed_entries = 0;
    int failed = 0;
    for (size_t i = before; i < calls.size(); ++i) {
      if (!calls[i].failed) continue;
      ++failed;
      failed_entries += calls[i].request.entries_size();
      ASSERT_LT(i + 1, calls.size()) << "a failed batch must be sent again";
      EXPECT_EQ(calls[i + 1].request.stream_id(), calls[i].request.stream_id());
      EXPECT_EQ(calls[i + 1].request.first_seq(), calls[i].request.first_seq());
      EXPECT_EQ(calls[i + 1].request.SerializeAsString(), calls[i].request.SerializeAsString());
    }
    EXPECT_EQ(failed, 3);
    EXPECT_THAT(ReceivedAt(transport, "h1").PushIds(), ElementsAre(1, 2, 3, 4))
        << "each entry delivered once, in order";
    ReplicaLink::Stats stats = link.stats();
    EXPECT_EQ(stats.batches_resent, 3u);
    EXPECT_GE(stats.entries_resent, 3u);
    EXPECT_EQ(stats.entries_resent, failed_entries);
    EXPECT_EQ(stats.entries_sent, 4u) << "each entry counted once";
  }
  EXPECT_EQ(done.runs(), 1);
}

// A new successor: a new stream from 1 starting with a snapshot, which
// covers what was pending for the old one (not re-sent as entries).
TEST(ReplicaLinkTest, NewSuccessorGetsNewStreamAndSnapshotCoveringPending) {
  FakeTransport transport;
  FakeSource source(2);
  ReplicaLink link(Opts(), &transport, &source);
  SnapshotTo(link, 1, kH1);
  link.Append(Entry(1));
  link.Append(Entry(2));
  Outcome first;
  link.Barrier(first.Callback());
  ASSERT_TRUE(first.Wait().ok());

  transport.Block();
  link.Append(Entry(3));
  ASSERT_TRUE(transport.WaitUntilACallIsHeld());
  link.Append(Entry(4));
  Outcome pending;
  link.Barrier(pending.Callback());
  link.Retarget(2, kH2);
  EXPECT_EQ(pending.runs(), 0) << "waits for the new successor's snapshot";
  transport.Release();
  ASSERT_TRUE(pending.Wait().ok());

  Received h1 = ReceivedAt(transport, "h1");
  Received h2 = ReceivedAt(transport, "h2");
  EXPECT_NE(h2.stream, 0u);
  EXPECT_NE(h2.stream, h1.stream);
  EXPECT_EQ(h2.SnapshotParts(), 2);
  EXPECT_THAT(h2.PushIds(), IsEmpty()) << "entries 3 and 4 are in the snapshot";
  EXPECT_EQ(source.begins(), 2);
  EXPECT_EQ(link.stats().snapshots, 2u);

  link.Append(Entry(5));
  Outcome after;
  link.Barrier(after.Callback());
  ASSERT_TRUE(after.Wait().ok());
  h2 = ReceivedAt(transport, "h2");  // checks seq 3 follows the 2 parts
  EXPECT_THAT(h2.PushIds(), ElementsAre(5));
  for (const FakeTransport::Call& call : transport.calls()) {
    if (call.address == "h2") {
      EXPECT_EQ(call.request.ring_version(), 2u);
    }
  }
}

// Becoming the tail: everything pending is at the tail now.
TEST(ReplicaLinkTest, BecomingTheTailReleasesPendingBarriers) {
  FakeTransport transport;
  FakeSource source(1);
  ReplicaLink link(Opts(), &transport, &source);
  HoldEntryOne(link, transport);
  Outcome pending, later;
  link.Barrier(pending.Callback());
  EXPECT_EQ(pending.runs(), 0);
  link.Retarget(2, std::nullopt);
  EXPECT_EQ(pending.runs(), 1) << "run inside Retarget";
  EXPECT_TRUE(pending.Wait().ok());
  link.Append(Entry(2));
  link.Barrier(later.Callback());
  EXPECT_EQ(later.runs(), 1);
  transport.Release();
  EXPECT_EQ(link.stats().pending, 0u);
}

TEST(ReplicaLinkTest, CloseFailsPendingAndLaterBarriers) {
  FakeTransport transport;
  FakeSource source(1);
  Outcome pending, later;
  {
    ReplicaLink link(Opts(), &transport, &source);
    SnapshotTo(link, 1, kH1);
    transport.Block();
    link.Append(Entry(1));
    ASSERT_TRUE(transport.WaitUntilACallIsHeld());
    link.Barrier(pending.Callback());
    link.Close(absl::AbortedError("closed by the test"));
    EXPECT_EQ(pending.runs(), 1) << "run inside Close";
    EXPECT_EQ(pending.Wait().code(), absl::StatusCode::kAborted);
    link.Append(Entry(2));
    link.Barrier(later.Callback());
    EXPECT_EQ(later.runs(), 1);
    EXPECT_EQ(later.Wait().code(), absl::StatusCode::kAborted);
    EXPECT_EQ(link.stats().pending, 0u);
    transport.Release();
  }
  EXPECT_EQ(pending.runs(), 1) << "not run again by the destructor";
  EXPECT_EQ(later.runs(), 1);
  EXPECT_THAT(ReceivedAt(transport, "h1").PushIds(), ::testing::Not(::testing::Contains(2)));
}

// A successor that never answers: destroying the link fails what waits for
// it with UNAVAILABLE, without hanging.
TEST(ReplicaLinkTest, DestructorFailsPendingWithUnavailable) {
  FakeTransport transport;
  FakeSource source(1);
  transport.FailNext(std::numeric_limits<int>::max());
  Outcome snapshot, entry;
  {
    ReplicaLink link(Opts(), &transport, &source);
    link.Retarget(1, kH1);
    link.Barrier(snapshot.Callback());
    link.Append(Entry(1));
    link.Barrier(entry.Callback());
  }
  EXPECT_EQ(snapshot.Wait().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(entry.Wait().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(snapshot.runs(), 1);
  EXPECT_EQ(entry.runs(), 1);
}

// An entry forwarded by a predecessor, at the place its primary gave it.
proto::ForwardEntry At(uint64_t epoch, uint64_t seq, uint64_t id) {
  proto::ForwardEntry entry = Entry(id);
  entry.set_epoch(epoch);
  entry.set_seq(seq);
  return entry;
}

// "apply", "held", or the code of the refusal: where the link places `entry`.
std::string Where(const ReplicaLink& link, const proto::ForwardEntry& entry) {
  absl::StatusOr<bool> place = link.Place(entry);
  if (!place.ok()) return absl::StatusCodeToString(place.status().code());
  return *place ? "apply" : "held";
}

// Where a copy places a forwarded entry: the next one of its history is
// applied; one it holds (its epoch, or its recent history) is skipped; a
// gap, or an entry of another history, is refused.
TEST(ReplicaLinkTest, PlacesForwardedEntriesByTheirPositionInThisHistory) {
  FakeTransport transport;
  FakeSource source(1);
  ReplicaLink::Options options = Opts();
  options.history_bytes = 1 << 20;
  ReplicaLink link(options, &transport, &source);
  for (uint64_t seq = 1; seq <= 3; ++seq) {
    ASSERT_EQ(Where(link, At(1, seq, seq)), "apply");
    link.Append(At(1, seq, seq));
  }
  EXPECT_EQ(Where(link, At(1, 4, 4)), "apply") << "the next entry";
  EXPECT_EQ(Where(link, At(2, 4, 4)), "apply") << "a new primary's first";
  EXPECT_EQ(Where(link, At(1, 2, 2)), "held") << "held: this epoch";
  absl::StatusOr<bool> gap = link.Place(At(1, 6, 6));
  EXPECT_EQ(gap.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(gap.status().message(), ::testing::HasSubstr("entry at seq 6 arrived after seq 3"));
  link.Append(At(2, 4, 4));  // a later epoch, as a new primary would forward it
  EXPECT_EQ(Where(link, At(1, 3, 3)), "held") << "held: in the history";
  absl::StatusOr<bool> other = link.Place(At(1, 4, 4));
  EXPECT_EQ(other.status().code(), absl::StatusCode::kFailedPrecondition)
      << "seq 4 here is epoch 2's, not epoch 1's";
  EXPECT_THAT(other.status().message(), ::testing::HasSubstr("does not follow this copy's"));
  EXPECT_EQ(link.Place(At(1, 5, 5)).status().code(), absl::StatusCode::kFailedPrecondition)
      << "an older epoch after a newer one";
}

// The race of docs/experiments/2026-11-27-forward-race.md: a copy made
// primary wrote its epoch start at seq 4; its old predecessor's entry at
// seq 4 (acknowledged by this copy, its sender would tell its worker the
// push was at the tail) must be refused, not taken for the one it holds.
// The role decides what the core may write, too.
TEST(ReplicaLinkTest, APrimaryRefusesForwardedEntriesAndOnlyAPrimaryWrites) {
  FakeTransport transport;
  FakeSource source(1);
  ReplicaLink link(Opts(), &transport, &source);
  for (uint64_t seq = 1; seq <= 3; ++seq) link.Append(At(1, seq, seq));
  absl::Status copy_writes = link.CheckWritable();
  EXPECT_EQ(copy_writes.code(), absl::StatusCode::kUnavailable);
  EXPECT_THAT(copy_writes.message(), ::testing::HasSubstr("not the shard's primary"));

  link.BecomePrimary(2);
  EXPECT_EQ(link.position().epoch, 2u);
  EXPECT_EQ(link.position().seq, 4u);
  EXPECT_TRUE(link.CheckWritable().ok());
  absl::StatusOr<bool> late = link.Place(At(1, 4, 4));
  EXPECT_EQ(late.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(late.status().message(), ::testing::HasSubstr("this copy is the shard's primary"));
  EXPECT_EQ(link.Place(At(1, 5, 5)).status().code(), absl::StatusCode::kFailedPrecondition);

  link.NotPrimary();
  EXPECT_EQ(link.CheckWritable().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ps
