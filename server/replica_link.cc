#include "server/replica_link.h"

#include <utility>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/grpc_channels.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/random_id.h"
#include "grpcpp/client_context.h"
#include "proto/replication.grpc.pb.h"

namespace ps {
namespace {

class GrpcForwardTransport final : public ForwardTransport {
 public:
  absl::StatusOr<proto::ForwardResponse> Forward(const std::string& address,
                                                 const proto::ForwardRequest& request,
                                                 absl::Duration timeout) override {
    proto::PsReplication::Stub* stub = StubFor(address);
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    proto::ForwardResponse response;
    grpc::Status status = stub->Forward(&context, request, &response);
    if (!status.ok()) return FromGrpcStatus(status);
    return response;
  }

  absl::StatusOr<proto::EtcdContactResponse> EtcdContact(const std::string& address,
                                                         absl::Duration timeout) override {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
    proto::EtcdContactResponse response;
    grpc::Status status = StubFor(address)->EtcdContact(&context, {}, &response);
    if (!status.ok()) return FromGrpcStatus(status);
    return response;
  }

 private:
  proto::PsReplication::Stub* StubFor(const std::string& address) {
    absl::MutexLock lock(&mu_);
    auto& stub = stubs_[address];
    if (stub == nullptr) {
      stub = proto::PsReplication::NewStub(NewPeerChannel(address));
    }
    return stub.get();
  }

  absl::Mutex mu_;
  absl::flat_hash_map<std::string, std::unique_ptr<proto::PsReplication::Stub>> stubs_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace

std::unique_ptr<ForwardTransport> NewGrpcForwardTransport() {
  return std::make_unique<GrpcForwardTransport>();
}

ReplicaLink::ReplicaLink(Options options, ForwardTransport* transport, SnapshotSource* source,
                         Clock* clock)
    : options_(std::move(options)),
      transport_(transport),
      source_(source),
      clock_(clock),
      sender_([this] { Run(); }) {}

ReplicaLink::~ReplicaLink() {
  Close(absl::UnavailableError(absl::StrCat("shard ", options_.shard,
                                            ": the server is stopping; retry at the new primary")));
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
  }
  sender_.join();
}

void ReplicaLink::RunAll(std::vector<Done>& dones, const absl::Status& status) {
  for (Done& done : dones) done(status);
  dones.clear();
}

void ReplicaLink::Append(proto::ForwardEntry entry) {
  absl::MutexLock lock(&mu_);
  if (closed_ || !target_) return;  // no successor: at the tail already
  Item item;
  item.has_entry = true;
  item.bytes = entry.ByteSizeLong();
  item.entry = std::move(entry);
  queue_.push_back(std::move(item));
}

void ReplicaLink::Barrier(Done done) {
  absl::Status now;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) {
      now = closed_status_;
    } else if (!queue_.empty()) {
      Item item;
      item.dones.push_back(std::move(done));
      queue_.push_back(std::move(item));
      return;
    }
  }
  done(now);
}

void ReplicaLink::Retarget(uint64_t ring_version, std::optional<Target> target) {
  std::vector<Done> finished;
  {
    absl::MutexLock lock(&mu_);
    ring_version_ = ring_version;
    if (closed_) return;
    const bool same = target.has_value() == target_.has_value() &&
                      (!target || (target->server == target_->server &&
                                   target->address == target_->address &&
                                   target->incarnation == target_->incarnation));
    if (same && stream_ != 0) return;
    stream_ = RandomNonZeroId();
    next_seq_ = 1;
    target_ = std::move(target);
    if (!target_) {
      for (Item& item : queue_) {
        for (Done& d : item.dones) finished.push_back(std::move(d));
      }
      queue_.clear();
    } else {
      // What is pending will be in the snapshot.
      Item marker;
      marker.marker = true;
      for (Item& item : queue_) {
        for (Done& d : item.dones) marker.dones.push_back(std::move(d));
      }
      queue_.clear();
      queue_.push_back(std::move(marker));
    }
  }
  RunAll(finished, absl::OkStatus());
}

void ReplicaLink::Close(const absl::Status& status) {
  std::vector<Done> failed;
  {
    absl::MutexLock lock(&mu_);
    if (closed_) return;
    closed_ = true;
    closed_status_ = status;
    for (Item& item : queue_) {
      for (Done& d : item.dones) failed.push_back(std::move(d));
    }
    queue_.clear();
  }
  RunAll(failed, status);
}

ReplicaLink::Stats ReplicaLink::stats() const {
  absl::MutexLock lock(&mu_);
  Stats s = stats_;
  s.pending = queue_.size();
  return s;
}

void ReplicaLink::PopLocked(size_t n, std::vector<Done>* dones) {
  for (size_t i = 0; i < n && !queue_.empty(); ++i) {
    for (Done& d : queue_.front().dones) dones->push_back(std::move(d));
    queue_.pop_front();
  }
  while (!queue_.empty() && !queue_.front().has_entry && !queue_.front().marker) {
    for (Done& d : queue_.front().dones) dones->push_back(std::move(d));
    queue_.pop_front();
  }
}

void ReplicaLink::Run() {
  while (true) {
    uint64_t stream;
    Target target;
    proto::ForwardRequest request;
    size_t count = 0;
    std::vector<Done> barriers;  // leading barriers: nothing before them
    {
      absl::MutexLock lock(&mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
        return stop_ || (target_.has_value() && !queue_.empty());
      };
      mu_.Await(absl::Condition(&ready));
      if (stop_) return;
      stream = stream_;
      target = *target_;
      PopLocked(0, &barriers);
      if (barriers.empty() && !queue_.front().marker) {
        size_t bytes = 0;
        request.set_shard(options_.shard);
        request.set_ring_version(ring_version_);
        request.set_from_server(options_.self);
        request.set_stream_id(stream);
        request.set_first_seq(next_seq_);
        for (Item& item : queue_) {
          if (item.marker) break;
          if (count > 0 && (bytes + item.bytes > options_.max_batch_bytes ||
                            request.entries_size() >= static_cast<int>(options_.max_batch_entries))) {
            break;
          }
          if (item.has_entry) {
            *request.add_entries() = std::move(item.entry);
            bytes += item.bytes;
          }
          ++count;
        }
        next_seq_ += request.entries_size();
      }
    }
    if (!barriers.empty()) {
      RunAll(barriers, absl::OkStatus());
      continue;
    }
    if (count == 0) {
      SendSnapshot(stream, target);
      continue;
    }
    const size_t sent = request.entries_size();
    absl::Status status = SendUntilAcked(stream, target, request, sent);
    std::vector<Done> dones;
    {
      absl::MutexLock lock(&mu_);
      if (status.ok() && stream_ == stream) {
        PopLocked(count, &dones);
        stats_.entries_sent += sent;
        ++stats_.batches;
      }
    }
    RunAll(dones, absl::OkStatus());
  }
}

absl::Status ReplicaLink::SendUntilAcked(uint64_t stream, const Target& target,
                                         proto::ForwardRequest& request, size_t entries) {
  for (int attempt = 0;; ++attempt) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_ || stream_ != stream) return absl::CancelledError("successor changed");
      if (attempt > 0) {
        ++stats_.batches_resent;
        stats_.entries_resent += entries;
      }
    }
    absl::StatusOr<proto::ForwardResponse> reply =
        transport_->Forward(target.address, request, options_.rpc_timeout);
    if (reply.ok()) return absl::OkStatus();
    if (attempt == 0 || attempt % 100 == 0) {
      LogEvent(absl::StrCat("replication shard ", options_.shard),
               absl::StrCat("forward to server ", target.server, " (", target.address,
                            ") failed, retrying until the ring changes: ", reply.status().ToString()));
    }
    // Back off, but wake at once when the successor changes.
    absl::MutexLock lock(&mu_);
    auto changed = [this, stream]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ || stream_ != stream;
    };
    clock_->AwaitWithTimeout(&mu_, absl::Condition(&changed), options_.retry_backoff);
  }
}

void ReplicaLink::SendSnapshot(uint64_t stream, const Target& target) {
  // Fix the copy; what was appended after the marker is in it too.
  bool current = false;
  absl::Status begun = source_->Begin([&] {
    absl::MutexLock lock(&mu_);
    if (stream_ != stream || queue_.empty() || !queue_.front().marker) return false;
    current = true;
    Item& marker = queue_.front();
    for (size_t i = 1; i < queue_.size(); ++i) {
      for (Done& d : queue_[i].dones) marker.dones.push_back(std::move(d));
    }
    queue_.resize(1);
    return true;
  });
  if (!begun.ok()) {
    LogEvent(absl::StrCat("replication shard ", options_.shard),
             absl::StrCat("snapshot for server ", target.server,
                          " could not start, retrying: ", begun.ToString()));
    absl::MutexLock lock(&mu_);
    auto changed = [this, stream]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return stop_ || stream_ != stream;
    };
    clock_->AwaitWithTimeout(&mu_, absl::Condition(&changed), options_.retry_backoff * 4);
    return;
  }
  if (!current) return;
  proto::ForwardRequest request;
  size_t bytes = 0;
  uint64_t total = 0;
  auto flush = [&]() -> absl::Status {
    if (request.entries_size() == 0) return absl::OkStatus();
    {
      absl::MutexLock lock(&mu_);
      if (stream_ != stream) return absl::CancelledError("successor changed");
      request.set_shard(options_.shard);
      request.set_ring_version(ring_version_);
      request.set_from_server(options_.self);
      request.set_stream_id(stream);
      request.set_first_seq(next_seq_);
      next_seq_ += request.entries_size();
    }
    absl::Status s = SendUntilAcked(stream, target, request, request.entries_size());
    total += bytes;
    request.Clear();
    bytes = 0;
    return s;
  };
  absl::Status written = source_->Write([&](proto::ForwardEntry entry) -> absl::Status {
    bytes += entry.ByteSizeLong();
    *request.add_entries() = std::move(entry);
    if (bytes >= options_.max_batch_bytes) return flush();
    return absl::OkStatus();
  });
  if (written.ok()) written = flush();
  std::vector<Done> dones;
  {
    absl::MutexLock lock(&mu_);
    if (!written.ok() || stream_ != stream || queue_.empty() || !queue_.front().marker) return;
    ++stats_.snapshots;
    stats_.snapshot_bytes += total;
    PopLocked(1, &dones);
  }
  LogEvent(absl::StrCat("replication shard ", options_.shard),
           absl::StrCat("snapshot sent to server ", target.server, " (", total, " bytes)"));
  RunAll(dones, absl::OkStatus());
}

}  // namespace ps
