// ReplicaLink: the ordered stream of one shard's updates from this server to
// the next server of the shard's chain (chain replication, PS paper 4.3),
// and this copy's place in the shard's history.
//
// The shard's core appends each applied update (ReplicationLog::Append,
// under its order lock). On the primary the link gives each its place
// (LogPosition: the primary's epoch and the next sequence number); on a
// replica the entry keeps the place its primary gave it. The link keeps the
// most recent entries (Options::history_bytes) and its position. One sender
// thread sends the entries in order, in batches of whatever has accumulated
// while the previous batch was in flight, and retries a failed batch (same
// stream sequence numbers: the receiver applies each entry once) until it is
// acknowledged or the successor changes. A batch's acknowledgement means the
// chain's tail applied it, so Barrier callbacks then run.
//
// A new successor (or a stream the receiver refused) starts with a probe:
// the receiver says where its copy is. When that position is in this copy's
// recent history, the link sends only the entries after it (a copy that
// rejoins, or a chain repaired around a lost server, catches up); otherwise
// a snapshot of the shard, fixed at one point of the stream
// (SnapshotSource::Begin, under the core's order lock): every update
// appended before it is in the copy and is not sent again. Without a
// successor (this server is the tail) entries are acknowledged at once.
//
// Thread-safe. The transport, source and clock must outlive the link.
#ifndef PS_SERVER_REPLICATION_REPLICA_LINK_H_
#define PS_SERVER_REPLICATION_REPLICA_LINK_H_

#include <cstdint>
#include <deque>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "proto/replication.pb.h"
#include "server/replication/forward_transport.h"
#include "server/replication/replication_log.h"
#include "server/store/memory_budget.h"

namespace ps {

// The shard's state, as a new successor receives it.
class SnapshotSource {
 public:
  virtual ~SnapshotSource() = default;
  // Fixes the copy now (every update applied so far is in it, none after),
  // then runs `after`, both under the shard's order lock so that no update
  // is applied in between. When `after` returns false the copy is dropped
  // (Write is not called). Errors: why no copy could be fixed.
  virtual absl::Status Begin(const std::function<bool()>& after) = 0;
  // Emits the copy fixed by Begin as snapshot entries, the last with
  // last = true, each record of at most max_record_bytes of rows (a slice
  // or bucket larger than that is split). Stops at emit's first error and
  // returns it.
  virtual absl::Status Write(const std::function<absl::Status(proto::ForwardEntry)>& emit,
                             size_t max_record_bytes) = 0;
};

class ReplicaLink final : public ReplicationLog {
 public:
  struct Target {
    uint32_t server = 0;
    std::string address;
    // A restarted server (same id and address, new incarnation) holds
    // nothing: it is a new successor, and refuses what was meant for the
    // process before it.
    uint64_t incarnation = 0;
  };
  struct Options {
    int shard = 0;
    uint32_t self = 0;         // this server's id
    uint64_t incarnation = 0;  // this process's
    // Recent entries kept to catch a successor up without a snapshot
    // (0: none kept; only a successor already at this copy's position is
    // spared a snapshot).
    size_t history_bytes = 0;
    // Charged with the history's bytes (not owned; may be null): the
    // history keeps an entry only while this has room, dropping its oldest
    // ones to make it (a catch-up then reaches less far back).
    MemoryBudget* history_budget = nullptr;
    // A batch's entries, at most (a larger entry goes alone); snapshot
    // records are split to half of it. Keep it under the successor's
    // message limit.
    size_t max_batch_bytes = 16 << 20;
    size_t max_batch_entries = 1024;
    absl::Duration rpc_timeout = absl::Seconds(10);
    absl::Duration retry_backoff = absl::Milliseconds(50);
    // A successor that has not acknowledged anything for this long (every
    // attempt failed or was refused) is reported, once per stretch, to
    // on_stuck, which has the ring changed (0: never reported).
    absl::Duration stuck_after = absl::ZeroDuration();
    std::function<void(const Target&, const absl::Status&)> on_stuck;
  };
  struct Stats {
    uint64_t entries_sent = 0;    // each entry once, however often its batch was sent
    uint64_t batches = 0;         // acknowledged batches
    uint64_t batches_resent = 0;  // attempts after a failure
    uint64_t entries_resent = 0;  // entries in those attempts
    uint64_t snapshots = 0;       // snapshots completed
    uint64_t snapshot_bytes = 0;
    uint64_t catch_ups = 0;         // successors caught up from the history
    uint64_t catch_up_entries = 0;  // entries sent for those
    size_t pending = 0;             // entries and barriers waiting
  };

  ReplicaLink(Options options, ForwardTransport* transport, SnapshotSource* source,
              Clock* clock = Clock::Real());
  // Fails what is pending with UNAVAILABLE and stops the sender.
  ~ReplicaLink() override;

  void Append(proto::ForwardEntry entry) override;
  void Barrier(Done done) override;
  bool Decides() const override;
  absl::Status CheckWritable() const override;
  absl::StatusOr<bool> Place(const proto::ForwardEntry& entry) const override;

  // The ring changed: `target` is the shard's successor from now on
  // (nullopt: this server is the tail, and everything pending is at the
  // tail). A different successor gets a snapshot before anything else;
  // what was pending is in it.
  void Retarget(uint64_t ring_version, std::optional<Target> target);
  // This server is the shard's primary from ring `ring_version` on: unless
  // it already was (since an earlier ring), it starts its epoch, appending
  // an epoch_start entry that every copy downstream will apply. The core's
  // own entries are stamped with this epoch. Called under the core's order
  // lock (PsCore::RunOrdered), as NotPrimary is: no update is being applied
  // while the copy's role changes (CheckWritable, Place).
  void BecomePrimary(uint64_t ring_version);
  // Not the primary (any longer) in the current ring.
  void NotPrimary();
  // The last entry appended.
  LogPosition position() const;
  // A copy filled from a snapshot taken at `position` (no history before
  // it): called before the copy's core applies any entry.
  void ResetPosition(LogPosition position);
  // This server left the chain: what is pending fails with `status`, and so
  // does every later Barrier.
  void Close(const absl::Status& status);

  Stats stats() const;

 private:
  using EntryPtr = std::shared_ptr<const proto::ForwardEntry>;
  struct Item {
    bool marker = false;     // the stream (re)starts here: probe, then catch-up or snapshot
    bool caught_up = false;  // the receiver is caught up once this item is applied
    EntryPtr entry;          // null: a barrier (or marker, caught_up)
    size_t bytes = 0;
    std::vector<Done> dones;  // run once this item (and all before) are at the tail
  };
  struct Recent {
    LogPosition position;
    EntryPtr entry;
    size_t bytes = 0;
  };
  void AppendLocked(proto::ForwardEntry entry) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::string Who() const;
  void Run();
  // Probes the successor for the marker at the front of the queue, then
  // replaces the marker by the entries it lacks, or sends a snapshot.
  void Resync(uint64_t stream, const Target& target);
  // Whether `p` is this copy's position or that of one of its recent
  // entries (or the point just before them).
  bool InHistoryLocked(LogPosition p) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets the oldest recent entry (releasing its charge).
  void DropRecentLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One snapshot for the marker at the front of the queue.
  void SendSnapshot(uint64_t stream, const Target& target);
  // Fills the header of a request of `stream`.
  void HeaderLocked(uint64_t stream, const Target& target, proto::ForwardRequest& request) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends `request` until acknowledged, the stream changes or the link
  // stops (CANCELLED). A batch the receiver refuses as out of its stream
  // (FAILED_PRECONDITION) restarts the stream (CANCELLED): a probe follows.
  absl::StatusOr<proto::ForwardResponse> SendUntilAcked(uint64_t stream, const Target& target,
                                                        proto::ForwardRequest& request,
                                                        size_t entries);
  // An attempt begun at `began` failed with `status`: reports the target
  // when it has failed for stuck_after.
  void NoteFailure(absl::Time began, const Target& target, const absl::Status& status);
  // A new stream to the current target: what is pending waits for its
  // probe (its entries are in the history, or in the snapshot).
  void RestartStreamLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Pops the first `n` items (and barriers right after them) into *dones.
  void PopLocked(size_t n, std::vector<Done>* dones) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static void RunAll(std::vector<Done>& dones, const absl::Status& status);

  const Options options_;
  ForwardTransport* const transport_;
  SnapshotSource* const source_;
  Clock* const clock_;

  mutable absl::Mutex mu_;
  std::deque<Item> queue_ ABSL_GUARDED_BY(mu_);
  std::optional<Target> target_ ABSL_GUARDED_BY(mu_);
  uint64_t ring_version_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t stream_ ABSL_GUARDED_BY(mu_) = 0;  // changes with the target
  uint64_t next_seq_ ABSL_GUARDED_BY(mu_) = 1;
  // This copy's history: its position, and its recent entries after `base_`.
  LogPosition position_ ABSL_GUARDED_BY(mu_);
  bool primary_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t epoch_ ABSL_GUARDED_BY(mu_) = 0;  // stamped on the primary's own entries
  std::deque<Recent> recent_ ABSL_GUARDED_BY(mu_);
  LogPosition base_ ABSL_GUARDED_BY(mu_);
  size_t recent_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Since when every attempt at the current target failed (InfiniteFuture:
  // the last one succeeded), and whether that was reported.
  absl::Time failing_since_ ABSL_GUARDED_BY(mu_) = absl::InfiniteFuture();
  bool stuck_reported_ ABSL_GUARDED_BY(mu_) = false;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status closed_status_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  Stats stats_ ABSL_GUARDED_BY(mu_);
  std::thread sender_;  // last: starts after the fields it uses
};

}  // namespace ps

#endif  // PS_SERVER_REPLICATION_REPLICA_LINK_H_
