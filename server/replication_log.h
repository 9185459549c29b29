// ReplicationLog: where a shard's core sends the updates it applied, when
// the shard is replicated (server/replica_link.h sends them down the chain).
//
// The core calls Append with its order lock held, right after applying an
// update, so entries are in the order of application. A write is answered
// only after Barrier(done) reports that every entry appended before it has
// been applied by the chain's tail. Implementations are thread-safe.
#ifndef PS_SERVER_REPLICATION_LOG_H_
#define PS_SERVER_REPLICATION_LOG_H_

#include <functional>

#include "absl/status/status.h"
#include "proto/replication.pb.h"

namespace ps {

class ReplicationLog {
 public:
  using Done = std::function<void(absl::Status)>;
  virtual ~ReplicationLog() = default;
  virtual void Append(proto::ForwardEntry entry) = 0;
  // `done` runs once (on any thread, possibly at once) when every entry
  // appended so far is at the tail: OK, or UNAVAILABLE when this server
  // left the chain before that (the writer must not count it acknowledged).
  virtual void Barrier(Done done) = 0;
};

}  // namespace ps

#endif  // PS_SERVER_REPLICATION_LOG_H_
