// ClusterReader: reads a cluster's state (each shard's Stats from its
// primary through a PsClient, the ring from etcd for a replicated cluster,
// the newest checkpoint in a directory) for the web UI, as
// ClusterViewJson, and for ps_admin status. Connects at the first read and
// again after a failed one. Thread-safe (reads one at a time).
#ifndef PS_SERVER_UI_CLUSTER_READER_H_
#define PS_SERVER_UI_CLUSTER_READER_H_

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/kv_store.h"
#include "common/placement.h"
#include "common/shard_ring.h"
#include "server/replication/cluster_status.h"
#include "worker/client/ps_client.h"
#include "worker/client/shard_directory.h"

namespace ps {

struct ClusterReaderOptions {
  std::string source;                // who answers, for the page
  std::vector<std::string> servers;  // a static cluster
  std::string servers_file;          // or its spec in a file, read when connecting
  std::string self;                  // or only this server (its address), said in an alert
  KvStore* kv = nullptr;             // or a replicated one (not owned)
  std::string cluster;
  std::string checkpoint_dir;  // "": no checkpoints shown
  PlacementConfig placement;
  absl::Duration timeout = absl::Seconds(3);          // of each call
  absl::Duration connect_timeout = absl::Seconds(3);  // of connecting and following the ring
};

// The ring (replicated clusters) and each shard's Stats, named
// "server N (address)" after its primary ("no primary" when it has none).
struct ClusterShards {
  std::optional<ShardRing> ring;
  std::vector<ShardStatus> shards;
};

class ClusterReader {
 public:
  explicit ClusterReader(ClusterReaderOptions options) : options_(std::move(options)) {}
  // Fills *out with what could be read. Errors: reading the ring (named),
  // following it or connecting, reading the Stats.
  absl::Status ReadShards(ClusterShards* out);
  // The cluster now, as JSON; what could not be read becomes an alert.
  std::string ReadJson();

 private:
  absl::Status ConnectLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const ClusterReaderOptions options_;
  absl::Mutex mu_;
  std::vector<std::string> servers_ ABSL_GUARDED_BY(mu_);  // of the static cluster read
  // Declared before the client, which reads the ring through it.
  std::shared_ptr<const ShardDirectory> directory_ ABSL_GUARDED_BY(mu_);
  std::unique_ptr<PsClient> client_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_SERVER_UI_CLUSTER_READER_H_
