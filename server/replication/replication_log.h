// ReplicationLog: where a shard's core sends the updates it applied, when
// the shard is replicated (server/replica_link.h sends them down the chain).
//
// The core calls Append with its order lock held, right after applying an
// update, so entries are in the order of application. A write is answered
// only after Barrier(done) reports that every entry appended before it has
// been applied by the chain's tail. Implementations are thread-safe.
#ifndef PS_SERVER_REPLICATION_REPLICATION_LOG_H_
#define PS_SERVER_REPLICATION_REPLICATION_LOG_H_

#include <cstdint>
#include <functional>
#include <string>
#include <tuple>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "proto/replication.pb.h"

namespace ps {

// Where a copy of a shard is in the shard's history: the epoch (the ring
// version in which the primary that wrote it became primary) and sequence
// number of the last entry it applied. Epochs only grow, and a new primary
// writes an entry of its epoch first, so between copies that a ring
// connects, the greater position is the more advanced copy.
struct LogPosition {
  uint64_t epoch = 0;
  uint64_t seq = 0;

  static LogPosition Of(const proto::ForwardEntry& entry) { return {entry.epoch(), entry.seq()}; }
  static LogPosition From(const proto::LogPosition& p) { return {p.epoch(), p.seq()}; }
  proto::LogPosition ToProto() const {
    proto::LogPosition p;
    p.set_epoch(epoch);
    p.set_seq(seq);
    return p;
  }
  std::string ToString() const { return absl::StrCat("(epoch ", epoch, ", seq ", seq, ")"); }
  friend bool operator==(const LogPosition& a, const LogPosition& b) {
    return a.epoch == b.epoch && a.seq == b.seq;
  }
  friend bool operator<(const LogPosition& a, const LogPosition& b) {
    return std::tie(a.epoch, a.seq) < std::tie(b.epoch, b.seq);
  }
};

class ReplicationLog {
 public:
  using Done = std::function<void(absl::Status)>;
  virtual ~ReplicationLog() = default;
  // An entry applied by the core: the primary's own (seq 0: the log gives
  // it its place in the history), or one forwarded to this copy (it keeps
  // the place its primary gave it).
  virtual void Append(proto::ForwardEntry entry) = 0;
  // `done` runs once (on any thread, possibly at once) when every entry
  // appended so far is at the tail: OK, or UNAVAILABLE when this server
  // left the chain before that (the writer must not count it acknowledged).
  virtual void Barrier(Done done) = 0;
  // Whether this copy decides what is not deterministic (sparse eviction by
  // age): the shard's primary. A copy replays its primary's decisions.
  virtual bool Decides() const { return true; }
  // The core asks, under its order lock, before it applies an update of its
  // own (a push, a table creation, a heartbeat): OK when this copy is its
  // shard's primary; UNAVAILABLE when it is not (any longer: the ring moved
  // the primary), and then nothing is applied here and the writer retries
  // at the new primary.
  virtual absl::Status CheckWritable() const { return absl::OkStatus(); }
  // The core asks, under its order lock, before it applies an entry its
  // predecessor forwarded: true to apply it (the next entry of this copy's
  // history), false when this copy holds it already, FAILED_PRECONDITION
  // when it has no place here (this copy is its shard's primary, or the
  // entry is of another history than this copy's), and then nothing is
  // applied. A copy's role changes under the same lock, so an entry is
  // never taken for one this copy has when the copy just wrote its own at
  // that place (docs/experiments/2026-11-27-forward-race.md).
  virtual absl::StatusOr<bool> Place(const proto::ForwardEntry& entry) const { return true; }
};

}  // namespace ps

#endif  // PS_SERVER_REPLICATION_REPLICATION_LOG_H_
