#include "server/replication/replica_link.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "common/random_id.h"

namespace ps {

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
  absl::MutexLock lock(&mu_);
  while (!recent_.empty()) DropRecentLocked();
}

void ReplicaLink::RunAll(std::vector<Done>& dones, const absl::Status& status) {
  for (Done& done : dones) done(status);
  dones.clear();
}

std::string ReplicaLink::Who() const { return absl::StrCat("replication shard ", options_.shard); }

void ReplicaLink::Append(proto::ForwardEntry entry) {
  absl::MutexLock lock(&mu_);
  AppendLocked(std::move(entry));
}

void ReplicaLink::AppendLocked(proto::ForwardEntry entry) {
  if (entry.seq() == 0) {  // the primary's own: its place in the history
    entry.set_epoch(epoch_);
    entry.set_seq(position_.seq + 1);
  }
  position_ = LogPosition::Of(entry);
  const bool keep = options_.history_bytes > 0;
  const bool send = !closed_ && target_.has_value();
  if (!keep && !send) {
    base_ = position_;
    return;
  }
  const size_t bytes = entry.ByteSizeLong();
  auto shared = std::make_shared<const proto::ForwardEntry>(std::move(entry));
  if (keep) {
    while (!recent_.empty() && recent_bytes_ + bytes > options_.history_bytes) DropRecentLocked();
    bool charged = options_.history_budget == nullptr;
    while (!charged && bytes <= options_.history_bytes) {
      charged = options_.history_budget->TryCharge(bytes);
      if (charged || recent_.empty()) break;
      DropRecentLocked();
    }
    if (charged && bytes <= options_.history_bytes) {
      recent_.push_back({position_, shared, bytes});
      recent_bytes_ += bytes;
    } else {
      // Not kept: the history now starts after it (nothing before it can
      // be replayed).
      while (!recent_.empty()) DropRecentLocked();
      base_ = position_;
    }
  } else {
    base_ = position_;
  }
  if (send) {
    Item item;
    item.entry = std::move(shared);
    item.bytes = bytes;
    queue_.push_back(std::move(item));
  }
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

void ReplicaLink::BecomePrimary(uint64_t ring_version) {
  absl::MutexLock lock(&mu_);
  if (primary_) return;
  primary_ = true;
  epoch_ = std::max(ring_version, position_.epoch + 1);
  proto::ForwardEntry start;
  start.set_epoch_start(true);
  AppendLocked(std::move(start));
  LogEvent(Who(), absl::StrCat("primary from ring v", ring_version, ": epoch ", epoch_,
                               " starts at seq ", position_.seq));
}

bool ReplicaLink::Decides() const {
  absl::MutexLock lock(&mu_);
  return primary_;
}

absl::Status ReplicaLink::CheckWritable() const {
  absl::MutexLock lock(&mu_);
  if (primary_) return absl::OkStatus();
  return absl::UnavailableError(absl::StrCat(
      Who(), ": this server is not the shard's primary (any longer); retry at the new primary"));
}

absl::StatusOr<bool> ReplicaLink::Place(const proto::ForwardEntry& entry) const {
  absl::MutexLock lock(&mu_);
  const LogPosition p = LogPosition::Of(entry);
  if (primary_) {
    // Its predecessor's entry arrived after this copy became the primary
    // and wrote its own at that place.
    return absl::FailedPreconditionError(
        absl::StrCat(Who(), ": a forwarded entry at ", p.ToString(),
                     " refused: this copy is the shard's primary since epoch ", epoch_));
  }
  if (p.seq == position_.seq + 1 && p.epoch >= position_.epoch) return true;
  // Held already: an entry of this copy's epoch (one primary wrote it, and
  // this copy has that epoch's entries up to its position), or one still in
  // its recent history.
  if (p.seq <= position_.seq && (p.epoch == position_.epoch || InHistoryLocked(p))) return false;
  if (p.seq > position_.seq + 1) {
    return absl::FailedPreconditionError(absl::StrCat(Who(), ": entry at seq ", p.seq,
                                                      " arrived after seq ", position_.seq,
                                                      " here: the stream skipped some"));
  }
  return absl::FailedPreconditionError(absl::StrCat(Who(), ": a forwarded entry at ", p.ToString(),
                                                    " does not follow this copy's history at ",
                                                    position_.ToString()));
}

void ReplicaLink::NotPrimary() {
  absl::MutexLock lock(&mu_);
  primary_ = false;
}

LogPosition ReplicaLink::position() const {
  absl::MutexLock lock(&mu_);
  return position_;
}

void ReplicaLink::ResetPosition(LogPosition position) {
  absl::MutexLock lock(&mu_);
  while (!recent_.empty()) DropRecentLocked();
  position_ = position;
  base_ = position;
}

void ReplicaLink::DropRecentLocked() {
  base_ = recent_.front().position;
  recent_bytes_ -= recent_.front().bytes;
  if (options_.history_budget != nullptr) options_.history_budget->Release(recent_.front().bytes);
  recent_.pop_front();
}

bool ReplicaLink::InHistoryLocked(LogPosition p) const {
  if (p == position_ || p == base_) return true;
  if (recent_.empty() || p.seq < recent_.front().position.seq) return false;
  const uint64_t i = p.seq - recent_.front().position.seq;
  return i < recent_.size() && recent_[i].position == p;
}

void ReplicaLink::RestartStreamLocked() {
  stream_ = RandomNonZeroId();
  next_seq_ = 1;
  if (!target_) return;
  // What is pending waits for the new stream's probe.
  Item marker;
  marker.marker = true;
  for (Item& item : queue_) {
    for (Done& d : item.dones) marker.dones.push_back(std::move(d));
  }
  queue_.clear();
  queue_.push_back(std::move(marker));
}

void ReplicaLink::Retarget(uint64_t ring_version, std::optional<Target> target) {
  std::vector<Done> finished;
  {
    absl::MutexLock lock(&mu_);
    ring_version_ = ring_version;
    if (closed_) return;
    const bool same =
        target.has_value() == target_.has_value() &&
        (!target || (target->server == target_->server && target->address == target_->address &&
                     target->incarnation == target_->incarnation));
    if (same && stream_ != 0) return;
    if (!target) {
      for (Item& item : queue_) {
        for (Done& d : item.dones) finished.push_back(std::move(d));
      }
      queue_.clear();
    }
    target_ = std::move(target);
    failing_since_ = absl::InfiniteFuture();
    stuck_reported_ = false;
    RestartStreamLocked();
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
  while (!queue_.empty() && queue_.front().entry == nullptr && !queue_.front().marker &&
         !queue_.front().caught_up) {
    for (Done& d : queue_.front().dones) dones->push_back(std::move(d));
    queue_.pop_front();
  }
}

void ReplicaLink::HeaderLocked(uint64_t stream, const Target& target,
                               proto::ForwardRequest& request) const {
  request.set_shard(options_.shard);
  request.set_ring_version(ring_version_);
  request.set_from_server(options_.self);
  request.set_from_incarnation(options_.incarnation);
  request.set_to_incarnation(target.incarnation);
  request.set_stream_id(stream);
  request.set_first_seq(next_seq_);
}

void ReplicaLink::Run() {
  while (true) {
    uint64_t stream;
    Target target;
    proto::ForwardRequest request;
    size_t count = 0;
    bool marker = false;
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
      marker = barriers.empty() && queue_.front().marker;
      if (barriers.empty() && !marker) {
        size_t bytes = 0;
        HeaderLocked(stream, target, request);
        for (Item& item : queue_) {
          if (item.marker) break;
          if (count > 0 &&
              (bytes + item.bytes > options_.max_batch_bytes ||
               request.entries_size() >= static_cast<int>(options_.max_batch_entries))) {
            break;
          }
          if (item.entry != nullptr) {
            *request.add_entries() = *item.entry;
            bytes += item.bytes;
          }
          ++count;
          if (item.caught_up) {
            request.set_caught_up(true);
            break;
          }
        }
        next_seq_ += request.entries_size();
      }
    }
    if (!barriers.empty()) {
      RunAll(barriers, absl::OkStatus());
      continue;
    }
    if (marker) {
      Resync(stream, target);
      continue;
    }
    const size_t sent = request.entries_size();
    absl::StatusOr<proto::ForwardResponse> reply = SendUntilAcked(stream, target, request, sent);
    std::vector<Done> dones;
    {
      absl::MutexLock lock(&mu_);
      if (reply.ok() && stream_ == stream) {
        PopLocked(count, &dones);
        stats_.entries_sent += sent;
        ++stats_.batches;
      }
    }
    RunAll(dones, absl::OkStatus());
  }
}

absl::StatusOr<proto::ForwardResponse> ReplicaLink::SendUntilAcked(uint64_t stream,
                                                                   const Target& target,
                                                                   proto::ForwardRequest& request,
                                                                   size_t entries) {
  for (int attempt = 0;; ++attempt) {
    {
      absl::MutexLock lock(&mu_);
      if (stop_ || closed_ || stream_ != stream) {
        return absl::CancelledError("successor changed, or the link closed");
      }
      if (attempt > 0) {
        ++stats_.batches_resent;
        stats_.entries_resent += entries;
      }
    }
    const absl::Time began = clock_->Now();
    absl::StatusOr<proto::ForwardResponse> reply =
        transport_->Forward(target.address, request, options_.rpc_timeout);
    if (reply.ok()) {
      absl::MutexLock lock(&mu_);
      failing_since_ = absl::InfiniteFuture();
      stuck_reported_ = false;
      return reply;
    }
    NoteFailure(began, target, reply.status());
    if (absl::IsFailedPrecondition(reply.status()) && !request.probe()) {
      // Out of the receiver's stream (it restarted the stream, lost a
      // snapshot, or found a gap): start again with a probe.
      LogEvent(Who(), absl::StrCat("server ", target.server, " (", target.address,
                                   ") refused the stream: ", reply.status().ToString(),
                                   "; probing it again"));
      absl::MutexLock lock(&mu_);
      if (stream_ == stream) RestartStreamLocked();
      auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_; };
      clock_->AwaitWithTimeout(&mu_, absl::Condition(&stopping), options_.retry_backoff);
      return absl::CancelledError("stream restarted");
    }
    if (attempt == 0 || attempt % 100 == 0) {
      LogEvent(Who(),
               absl::StrCat(request.probe() ? "probe of" : "forward to", " server ", target.server,
                            " (", target.address, ") failed, retrying until the ring changes: ",
                            reply.status().ToString()));
    }
    // Back off, but wake at once when the successor changes.
    absl::MutexLock lock(&mu_);
    auto changed = [this, stream]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || stream_ != stream; };
    clock_->AwaitWithTimeout(&mu_, absl::Condition(&changed), options_.retry_backoff);
  }
}

void ReplicaLink::NoteFailure(absl::Time began, const Target& target, const absl::Status& status) {
  absl::Duration failing;
  {
    absl::MutexLock lock(&mu_);
    failing_since_ = std::min(failing_since_, began);
    failing = clock_->Now() - failing_since_;
    if (stuck_reported_ || options_.stuck_after <= absl::ZeroDuration() ||
        failing < options_.stuck_after || stop_ || closed_) {
      return;
    }
    stuck_reported_ = true;
  }
  LogEvent(Who(), absl::StrCat("server ", target.server, " (", target.address,
                               ") has acknowledged nothing for ", absl::FormatDuration(failing),
                               " (", status.ToString(), "): reporting it stuck"));
  if (options_.on_stuck) options_.on_stuck(target, status);
}

void ReplicaLink::Resync(uint64_t stream, const Target& target) {
  proto::ForwardRequest probe;
  {
    absl::MutexLock lock(&mu_);
    if (stream_ != stream) return;
    HeaderLocked(stream, target, probe);
  }
  probe.set_probe(true);
  absl::StatusOr<proto::ForwardResponse> reply = SendUntilAcked(stream, target, probe, 0);
  if (!reply.ok()) return;
  const LogPosition theirs = LogPosition::From(reply->position());
  {
    absl::MutexLock lock(&mu_);
    if (stream_ != stream || queue_.empty() || !queue_.front().marker) return;
    if (reply->has_copy() && InHistoryLocked(theirs)) {
      // Only what the successor lacks; what was pending is among it.
      Item caught_up;
      caught_up.caught_up = true;
      for (Item& item : queue_) {
        for (Done& d : item.dones) caught_up.dones.push_back(std::move(d));
      }
      queue_.clear();
      for (const Recent& r : recent_) {
        if (r.position.seq <= theirs.seq) continue;
        Item item;
        item.entry = r.entry;
        item.bytes = r.bytes;
        queue_.push_back(std::move(item));
      }
      const size_t n = queue_.size();
      queue_.push_back(std::move(caught_up));
      ++stats_.catch_ups;
      stats_.catch_up_entries += n;
      LogEvent(Who(), absl::StrCat("server ", target.server, " holds a copy at ", theirs.ToString(),
                                   ": catching it up with ", n, " entries to ",
                                   position_.ToString(), " (no snapshot)"));
      return;
    }
    LogEvent(Who(),
             absl::StrCat("server ", target.server,
                          reply->has_copy()
                              ? absl::StrCat(" holds a copy at ", theirs.ToString(),
                                             ", not in the recent history after ", base_.ToString())
                              : std::string(" holds no copy"),
                          ": sending a snapshot"));
  }
  SendSnapshot(stream, target);
}

void ReplicaLink::SendSnapshot(uint64_t stream, const Target& target) {
  // Fix the copy; what was appended after the marker is in it too.
  bool current = false;
  LogPosition at;
  absl::Status begun = source_->Begin([&] {
    absl::MutexLock lock(&mu_);
    if (stream_ != stream || queue_.empty() || !queue_.front().marker) return false;
    current = true;
    at = position_;
    Item& marker = queue_.front();
    for (size_t i = 1; i < queue_.size(); ++i) {
      for (Done& d : queue_[i].dones) marker.dones.push_back(std::move(d));
    }
    queue_.resize(1);
    return true;
  });
  if (!begun.ok()) {
    LogEvent(Who(), absl::StrCat("snapshot for server ", target.server,
                                 " could not start, retrying: ", begun.ToString()));
    absl::MutexLock lock(&mu_);
    auto changed = [this, stream]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stop_ || stream_ != stream; };
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
      HeaderLocked(stream, target, request);
      next_seq_ += request.entries_size();
    }
    absl::Status s = SendUntilAcked(stream, target, request, request.entries_size()).status();
    total += bytes;
    request.Clear();
    bytes = 0;
    return s;
  };
  absl::Status written = source_->Write(
      [&](proto::ForwardEntry entry) -> absl::Status {
        *entry.mutable_snapshot()->mutable_position() = at.ToProto();
        const size_t entry_bytes = entry.ByteSizeLong();
        // A batch stays within max_batch_bytes (and so the successor's
        // message limit): records are at most half of it.
        if (bytes + entry_bytes > options_.max_batch_bytes) {
          if (absl::Status s = flush(); !s.ok()) return s;
        }
        bytes += entry_bytes;
        *request.add_entries() = std::move(entry);
        return absl::OkStatus();
      },
      options_.max_batch_bytes / 2);
  if (written.ok()) written = flush();
  std::vector<Done> dones;
  {
    absl::MutexLock lock(&mu_);
    if (!written.ok() || stream_ != stream || queue_.empty() || !queue_.front().marker) return;
    ++stats_.snapshots;
    stats_.snapshot_bytes += total;
    PopLocked(1, &dones);
  }
  LogEvent(Who(), absl::StrCat("snapshot at ", at.ToString(), " sent to server ", target.server,
                               " (", total, " bytes)"));
  RunAll(dones, absl::OkStatus());
}

}  // namespace ps
