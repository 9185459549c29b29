// ShardDirectory: where a replicated cluster's shards are served now, for
// the client's transport. Each call goes to the shard's primary as of the
// call's start; when it fails, the client's retry asks again, so a retry
// after a failover reaches the new primary (with the same request id).
//
// EtcdShardDirectory reads the ring from etcd (common/cluster_keys.h) and
// follows it with a watch. Thread-safe.
#ifndef PS_WORKER_CLIENT_SHARD_DIRECTORY_H_
#define PS_WORKER_CLIENT_SHARD_DIRECTORY_H_

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/kv_store.h"
#include "common/shard_ring.h"

namespace ps {

class ShardDirectory {
 public:
  virtual ~ShardDirectory() = default;
  virtual int num_shards() const = 0;
  // host:port of the shard's primary; "" when it has none now (no ring yet,
  // or every copy of the shard is lost).
  virtual std::string PrimaryAddress(int shard) const = 0;
  // "shard 1 (primary server 2 at 127.0.0.1:4000, ring v7)", for messages.
  virtual std::string Describe(int shard) const = 0;
};

class EtcdShardDirectory final : public ShardDirectory {
 public:
  // Reads the cluster's ring, waiting up to `wait` for the first one (the
  // servers commit it once servers 0..shards-1 have registered). Errors:
  // DEADLINE_EXCEEDED naming the cluster and etcd's key when no ring came,
  // the store's errors. `kv` must outlive the directory.
  static absl::StatusOr<std::unique_ptr<EtcdShardDirectory>> Start(KvStore* kv,
                                                                   const std::string& cluster,
                                                                   absl::Duration wait);
  ~EtcdShardDirectory() override;

  int num_shards() const override;
  std::string PrimaryAddress(int shard) const override;
  std::string Describe(int shard) const override;
  std::shared_ptr<const ShardRing> ring() const;

 private:
  EtcdShardDirectory(KvStore* kv, std::string cluster) : kv_(kv), cluster_(std::move(cluster)) {}
  // Reads the ring key; returns the revision read.
  absl::StatusOr<int64_t> Read();
  void WatchLoop();

  KvStore* const kv_;
  const std::string cluster_;
  mutable absl::Mutex mu_;
  std::shared_ptr<const ShardRing> ring_ ABSL_GUARDED_BY(mu_);
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread watcher_;
};

}  // namespace ps

#endif  // PS_WORKER_CLIENT_SHARD_DIRECTORY_H_
