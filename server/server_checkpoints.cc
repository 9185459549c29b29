#include "server/server_checkpoints.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "common/checkpoint_request.h"
#include "common/cluster_spec.h"
#include "common/log.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_peer.h"
#include "server/core/core_state.h"

namespace ps {

absl::Status ServerCheckpoints::CheckRestorable(const ServerCheckpointOptions& checkpoint) {
  if (checkpoint.dir.empty()) {
    return absl::InvalidArgumentError("--restore needs --checkpoint_dir, the checkpoints' root");
  }
  absl::StatusOr<FoundCheckpoint> newest = FindNewestValidCheckpoint(checkpoint.dir, nullptr);
  if (!newest.ok()) {
    return absl::Status(newest.status().code(), absl::StrCat("restore from ", checkpoint.dir, ": ",
                                                             newest.status().message()));
  }
  return absl::OkStatus();
}

ServerCheckpoints::ServerCheckpoints(ServerCheckpointsConfig config, ShardHost* host, PsCore* core)
    : config_(std::move(config)), host_(host), core_(core) {
  if (config_.replicated) {
    shard_checkpointers_ = std::make_unique<ShardCheckpointers>(host_);
  } else {
    checkpointer_ = std::make_unique<Checkpointer>(core_, config_.server_index);
  }
}

AdminService::Handler ServerCheckpoints::PartHandler() {
  if (shard_checkpointers_ != nullptr) {
    return [c = shard_checkpointers_.get()](const proto::CheckpointRequest& request,
                                            AdminService::Done done) {
      c->Handle(request, std::move(done));
    };
  }
  return
      [c = checkpointer_.get()](const proto::CheckpointRequest& request, AdminService::Done done) {
        c->Handle(request, std::move(done));
      };
}

AdminService::Handler ServerCheckpoints::CoordinateHandler() {
  return [this](const proto::CheckpointRequest& request, AdminService::Done done) {
    Coordinate(request, std::move(done));
  };
}

void ServerCheckpoints::SetAddress(const std::string& address) {
  absl::MutexLock lock(&mu_);
  address_ = address;
}

std::string ServerCheckpoints::Who() const {
  absl::MutexLock lock(&mu_);
  return absl::StrCat("ps_server ", config_.server_index, " ", address_);
}

CheckpointScheduler* ServerCheckpoints::scheduler() const {
  absl::MutexLock lock(&mu_);
  return scheduler_.get();
}

absl::Status ServerCheckpoints::RestoreAtStart() {
  const ServerCheckpointOptions& c = config_.checkpoint;
  if (!c.restore) return absl::OkStatus();
  if (c.dir.empty()) {
    return absl::InvalidArgumentError("--restore needs --checkpoint_dir, the checkpoints' root");
  }
  const std::string who = absl::StrCat("ps_server ", config_.server_index);
  const absl::Time start = absl::Now();
  std::vector<std::string> skipped;
  absl::StatusOr<FoundCheckpoint> found = checkpointer_->Restore(c.dir, &skipped);
  for (const std::string& s : skipped) LogEvent(who, absl::StrCat("restore: passed over ", s));
  if (!found.ok()) {
    return absl::Status(found.status().code(),
                        absl::StrCat("restore from ", c.dir, ": ", found.status().message()));
  }
  {
    absl::MutexLock lock(&mu_);
    restored_cut_ = found->manifest.cut();
  }
  LogEvent(who, absl::StrFormat("restored %s (cut %d, taken by %d servers): %d tables, %.1f MiB "
                                "here, in %.3f s",
                                found->path, found->manifest.cut(), found->manifest.num_servers(),
                                found->manifest.tables_size(), core_->bytes_used() / 1048576.0,
                                absl::ToDoubleSeconds(absl::Now() - start)));
  return absl::OkStatus();
}

absl::Status ServerCheckpoints::RestoreShards(const std::map<int, PsCore*>& cores,
                                              const ShardRing& ring) {
  const std::string& dir = config_.checkpoint.dir;
  const std::string who = Who();
  std::vector<PsCore*> list;
  for (const auto& [shard, core] : cores) list.push_back(core);
  const absl::Time start = absl::Now();
  std::vector<std::string> skipped;
  absl::StatusOr<FoundCheckpoint> found = RestoreCores(dir, list, &skipped);
  for (const std::string& s : skipped) LogEvent(who, absl::StrCat("restore: passed over ", s));
  if (!found.ok()) {
    return absl::Status(found.status().code(),
                        absl::StrCat("restore from ", dir, ": ", found.status().message()));
  }
  const proto::CheckpointManifest& m = found->manifest;
  std::vector<std::string> clocks;
  for (const proto::WorkerClock& c : m.clocks()) {
    clocks.push_back(
        absl::StrCat("worker ", c.worker_id(), " at clock ", c.clock(), " in '", c.table(), "'"));
  }
  for (const auto& [shard, core] : cores) {
    const uint64_t at = ring.record().shards(shard).restored_at();
    if (at > 1) {
      // Every copy was lost: what the cut does not hold is gone.
      LogEvent(who, absl::StrFormat(
                        "shard %d: every copy was lost; rebuilt by ring v%d from %s (cut %d). "
                        "LOST: every update to this shard pushed at a worker clock >= %d after "
                        "that checkpoint (the workers' clocks at the cut: %s)",
                        shard, at, found->path, m.cut(), m.cut(),
                        clocks.empty() ? "none" : absl::StrJoin(clocks, ", ")));
    } else {
      LogEvent(who, absl::StrFormat("shard %d: restored from %s (cut %d, %d shards/servers)", shard,
                                    found->path, m.cut(), m.num_servers()));
    }
  }
  LogEvent(who, absl::StrFormat("restored %d shard(s) from %s in %.3f s", cores.size(), found->path,
                                absl::ToDoubleSeconds(absl::Now() - start)));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> ServerCheckpoints::ServerAddresses() const {
  const ServerCheckpointOptions& c = config_.checkpoint;
  std::vector<std::string> addresses = c.servers;
  if (addresses.empty() && !c.servers_file.empty()) {
    std::ifstream in(c.servers_file);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    if (!in.good() && !in.eof()) {
      return absl::NotFoundError(absl::StrCat("cannot read --servers_file=", c.servers_file));
    }
    absl::StatusOr<ClusterSpec> spec = ClusterSpec::Parse(absl::StripAsciiWhitespace(text));
    if (!spec.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--servers_file=", c.servers_file, ": ", spec.status().message()));
    }
    addresses = spec->servers;
  }
  if (addresses.empty() && config_.num_servers == 1) {
    absl::MutexLock lock(&mu_);
    addresses.push_back(address_);
  }
  if (addresses.size() != static_cast<size_t>(config_.num_servers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoints into ", c.dir, " need the addresses of the ", config_.num_servers,
                     " servers, not ", addresses.size(), ": give --servers or --servers_file"));
  }
  return addresses;
}

absl::StatusOr<CheckpointCoordinator::Peers> ServerCheckpoints::Peers() const {
  if (config_.replicated) {
    std::shared_ptr<const ShardRing> ring = host_->ring();
    if (ring == nullptr) return absl::UnavailableError("no ring yet: the cluster is starting");
    return NewShardCheckpointPeers(*ring);
  }
  absl::StatusOr<std::vector<std::string>> addresses = ServerAddresses();
  if (!addresses.ok()) return addresses.status();
  CheckpointCoordinator::Peers peers;
  for (size_t i = 0; i < addresses->size(); ++i) {
    peers.push_back(NewGrpcCheckpointPeer(static_cast<int>(i), (*addresses)[i]));
  }
  return peers;
}

CoordinatorOptions ServerCheckpoints::MakeCoordinatorOptions() const {
  const ServerCheckpointOptions& c = config_.checkpoint;
  CoordinatorOptions co;
  co.root = c.dir;
  co.keep = c.keep;
  co.full_every = c.full_every;
  co.write_timeout = c.write_timeout;
  co.slice_size = config_.placement.slice_size;
  co.virtual_nodes = static_cast<uint32_t>(config_.placement.virtual_nodes);
  co.ask_peers_each_time = config_.replicated;
  return co;
}

SchedulerOptions ServerCheckpoints::MakeSchedulerOptions() const {
  SchedulerOptions so;
  so.every = config_.checkpoint.every;
  so.every_clocks = config_.checkpoint.every_clocks;
  {
    absl::MutexLock lock(&mu_);
    so.start_cut = restored_cut_;
  }
  if (config_.replicated) {
    // Every server runs a scheduler; the primary of shard 0 coordinates.
    so.coordinates = [this] {
      std::shared_ptr<const ShardRing> ring = host_->ring();
      return ring != nullptr && !host_->fenced() && ring->IsPrimary(0, config_.server_id);
    };
  }
  return so;
}

absl::Status ServerCheckpoints::StartScheduler() {
  const ServerCheckpointOptions& c = config_.checkpoint;
  if ((!config_.replicated && config_.server_index != 0) || c.dir.empty() || !c.coordinate) {
    return absl::OkStatus();
  }
  if (c.servers_file.empty() && !config_.replicated) {
    // Known now: fail at start rather than at the first checkpoint.
    if (absl::StatusOr<std::vector<std::string>> a = ServerAddresses(); !a.ok()) return a.status();
  }
  auto scheduler = std::make_unique<CheckpointScheduler>(
      std::make_unique<CheckpointCoordinator>(
          CheckpointCoordinator::PeerSource([this] { return Peers(); }), MakeCoordinatorOptions()),
      MakeSchedulerOptions(),
      [this] {
        uint64_t max_clock = 0;
        for (const auto& core : host_->Cores()) {
          max_clock = std::max(max_clock, CoreStateIo(core.get()).max_clock());
        }
        return max_clock;
      },
      [who = Who()](const std::string& line) { LogEvent(who, line); });
  absl::MutexLock lock(&mu_);
  scheduler_ = std::move(scheduler);
  return absl::OkStatus();
}

void ServerCheckpoints::Coordinate(const proto::CheckpointRequest& request,
                                   AdminService::Done done) {
  CheckpointScheduler* scheduler = this->scheduler();
  if (scheduler == nullptr) {
    return done(absl::FailedPreconditionError(absl::StrCat(
        "server ", config_.server_index,
        " does not coordinate checkpoints: ask server 0, started with --checkpoint_dir")));
  }
  scheduler->Request(
      request.full(), [done = std::move(done)](absl::StatusOr<CheckpointResult> result) {
        if (!result.ok()) return done(result.status());
        proto::CheckpointResponse reply;
        reply.set_path(result->path);
        reply.set_sequence(result->sequence);
        reply.set_base_sequence(result->base_sequence);
        reply.set_cut(result->cut);
        reply.set_bytes(result->bytes);
        reply.set_micros(static_cast<uint64_t>(absl::ToInt64Microseconds(result->took)));
        done(reply);
      });
}

void ServerCheckpoints::TakeLast() {
  const ServerCheckpointOptions& c = config_.checkpoint;
  if (c.dir.empty()) return;
  if (CheckpointScheduler* scheduler = this->scheduler(); scheduler != nullptr) {
    // A replicated server leaving is not the cluster stopping: its shards
    // live on in their chains, and the scheduler of the next primary of
    // shard 0 goes on.
    (void)scheduler->Stop(c.on_exit && !config_.replicated);  // logs its result
    return;
  }
  if (!c.on_exit || !c.coordinate || config_.server_index == 0 || config_.replicated) return;
  absl::StatusOr<std::vector<std::string>> addresses = ServerAddresses();
  if (!addresses.ok()) {
    LogEvent(Who(), absl::StrCat("no last checkpoint: ", addresses.status().message()));
    return;
  }
  absl::StatusOr<proto::CheckpointResponse> reply =
      RequestCheckpoint((*addresses)[0], /*full=*/false, c.write_timeout);
  LogEvent(Who(), reply.ok() ? absl::StrCat("last checkpoint (taken by server 0): ", reply->path(),
                                            " at cut ", reply->cut())
                             : absl::StrCat("no last checkpoint: ", reply.status().message()));
}

void ServerCheckpoints::Sweep() {
  if (shard_checkpointers_ != nullptr) shard_checkpointers_->Sweep();
}

std::optional<CheckpointScheduler::Record> ServerCheckpoints::SchedulerRecord() const {
  CheckpointScheduler* scheduler = this->scheduler();
  if (scheduler == nullptr) return std::nullopt;
  return scheduler->record();
}

}  // namespace ps
