#include "worker/client/shard_directory.h"

#include "absl/strings/str_cat.h"
#include "common/cluster_keys.h"
#include "common/log.h"

namespace ps {

absl::StatusOr<std::unique_ptr<EtcdShardDirectory>> EtcdShardDirectory::Start(
    KvStore* kv, const std::string& cluster, absl::Duration wait) {
  std::unique_ptr<EtcdShardDirectory> dir(new EtcdShardDirectory(kv, cluster));
  const absl::Time deadline = absl::Now() + wait;
  int64_t revision = 0;
  while (true) {
    absl::StatusOr<int64_t> read = dir->Read();
    if (!read.ok()) return read.status();
    if (dir->ring() != nullptr) break;
    revision = *read;
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(
          absl::StrCat("no ring for cluster '", cluster, "' in etcd (key ", RingKey(cluster),
                       ") after ", absl::FormatDuration(wait),
                       "; have servers 0..shards-1 started with --etcd and "
                       "--cluster=",
                       cluster, "?"));
    }
    (void)kv->WaitForChange(RingKey(cluster), revision,
                            std::min(deadline, absl::Now() + absl::Seconds(1)));
  }
  dir->watcher_ = std::thread([d = dir.get()] { d->WatchLoop(); });
  return dir;
}

EtcdShardDirectory::~EtcdShardDirectory() {
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  if (watcher_.joinable()) watcher_.join();
}

absl::StatusOr<int64_t> EtcdShardDirectory::Read() {
  absl::StatusOr<KvRange> range = kv_->Get(RingKey(cluster_));
  if (!range.ok()) return range.status();
  if (range->entries.empty()) return range->revision;
  proto::RingRecord record;
  if (absl::Status s = FromJson(range->entries[0].key, range->entries[0].value, &record); !s.ok()) {
    return s;
  }
  absl::StatusOr<ShardRing> ring = ShardRing::FromRecord(std::move(record));
  if (!ring.ok()) return ring.status();
  absl::MutexLock lock(&mu_);
  if (ring_ == nullptr || ring->version() > ring_->version()) {
    ring_ = std::make_shared<const ShardRing>(*std::move(ring));
  }
  return range->revision;
}

void EtcdShardDirectory::WatchLoop() {
  int64_t revision = 0;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_) return;
    }
    absl::StatusOr<int64_t> read = Read();
    if (read.ok()) {
      revision = *read;
      // Wakes within a second to notice the destructor. While etcd is
      // down, the last ring is kept and calls go on with it.
      (void)kv_->WaitForChange(RingKey(cluster_), revision, absl::Now() + absl::Seconds(1));
    } else {
      absl::MutexLock lock(&mu_);
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
      mu_.AwaitWithTimeout(absl::Condition(&stopping), absl::Milliseconds(250));
    }
  }
}

std::shared_ptr<const ShardRing> EtcdShardDirectory::ring() const {
  absl::MutexLock lock(&mu_);
  return ring_;
}

int EtcdShardDirectory::num_shards() const {
  std::shared_ptr<const ShardRing> r = ring();
  return r == nullptr ? 0 : r->num_shards();
}

std::string EtcdShardDirectory::PrimaryAddress(int shard) const {
  std::shared_ptr<const ShardRing> r = ring();
  if (r == nullptr) return "";
  std::optional<uint32_t> primary = r->Primary(shard);
  return primary ? r->Address(*primary) : "";
}

std::string EtcdShardDirectory::Describe(int shard) const {
  std::shared_ptr<const ShardRing> r = ring();
  if (r == nullptr) return absl::StrCat("shard ", shard, " (no ring yet)");
  std::optional<uint32_t> primary = r->Primary(shard);
  if (!primary)
    return absl::StrCat("shard ", shard, " (every copy lost, ring v", r->version(), ")");
  return absl::StrCat("shard ", shard, " (primary server ", *primary, " at ", r->Address(*primary),
                      ", ring v", r->version(), ")");
}

}  // namespace ps
