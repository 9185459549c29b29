#include "server/ps_server.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <iterator>
#include <optional>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "common/cluster_spec.h"
#include "common/grpc_channels.h"
#include "common/grpc_metrics.h"
#include "absl/time/clock.h"
#include "server/checkpoint/checkpoint_peer.h"
#include "common/log.h"
#include "common/random_id.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server_builder.h"

namespace ps {

absl::StatusOr<std::unique_ptr<PsServer>> PsServer::Start(const ServerOptions& options) {
  const bool replicated = options.replication.kv != nullptr;
  if (replicated && options.checkpoint.restore) {
    // Known now: fail at start, not at the first ring.
    if (options.checkpoint.dir.empty()) {
      return absl::InvalidArgumentError("--restore needs --checkpoint_dir, the checkpoints' root");
    }
    absl::StatusOr<FoundCheckpoint> newest =
        FindNewestValidCheckpoint(options.checkpoint.dir, nullptr);
    if (!newest.ok()) {
      return absl::Status(newest.status().code(), absl::StrCat("restore from ",
                                                               options.checkpoint.dir, ": ",
                                                               newest.status().message()));
    }
  }
  if (!replicated && (options.num_servers < 1 || options.server_index < 0 ||
                      options.server_index >= options.num_servers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("server index ", options.server_index, " is outside [0, ", options.num_servers,
                     "); check --index against the number of servers in --servers"));
  }
  std::unique_ptr<PsServer> server(new PsServer());
  server->options_ = options;
  ShardHostOptions host;
  host.core.server_index = options.server_index;
  host.core.num_servers = replicated ? options.replication.num_shards : options.num_servers;
  host.core.placement = options.placement;
  host.core.limits = options.limits;
  host.core.clock = options.clock;
  if (replicated) {
    server->forward_transport_ = NewGrpcForwardTransport();
    host.transport = server->forward_transport_.get();
    host.server_id = options.replication.server_id;
    host.incarnation = RandomNonZeroId();
    server->etcd_contact_ = std::make_unique<EtcdContact>(
        options.clock == Clock::Real() ? Clock::Monotonic() : options.clock);
    host.on_synced = [s = server.get()](int shard) {
      absl::MutexLock lock(&s->membership_mu_);
      if (s->membership_ != nullptr) s->membership_->ReportSynced(shard);
    };
    host.stuck_after = options.replication.lease;
    host.on_successor_stuck = [s = server.get()](int shard, uint32_t successor,
                                                 uint64_t incarnation, const absl::Status& why) {
      absl::MutexLock lock(&s->membership_mu_);
      if (s->membership_ != nullptr) s->membership_->ReportStuck(shard, successor, incarnation, why);
    };
    if (!options.checkpoint.dir.empty()) {
      host.restore = [s = server.get()](const std::map<int, PsCore*>& cores,
                                        const ShardRing& ring) {
        return s->RestoreShards(cores, ring);
      };
    }
  }
  server->host_ = std::make_unique<ShardHost>(host);
  if (!replicated) {
    server->core_ = server->host_->Cores().at(0);
    server->checkpointer_ =
        std::make_unique<Checkpointer>(server->core_.get(), options.server_index);
    if (absl::Status s = server->Restore(); !s.ok()) return s;
  }
  const Authorizer* auth = options.authorizer;
  server->service_ = std::make_unique<PsService>(server->host_.get(), auth);
  server->replication_ = std::make_unique<ReplicationService>(
      server->host_.get(), server->etcd_contact_.get(), auth);
  AdminService::Handler part;
  if (replicated) {
    server->shard_checkpointers_ = std::make_unique<ShardCheckpointers>(server->host_.get());
    part = [c = server->shard_checkpointers_.get()](const proto::CheckpointRequest& request,
                                                    AdminService::Done done) {
      c->Handle(request, std::move(done));
    };
  } else {
    part = [c = server->checkpointer_.get()](const proto::CheckpointRequest& request,
                                             AdminService::Done done) {
      c->Handle(request, std::move(done));
    };
  }
  server->admin_ = std::make_unique<AdminService>(
      std::move(part), options.server_index,
      [s = server.get()](const proto::CheckpointRequest& request, AdminService::Done done) {
        s->Coordinate(request, std::move(done));
      },
      auth);

  // Every server answers grpc.health.v1.Health (SERVING while Readiness()
  // is OK, set by the ticker) and server reflection (grpcurl, grpc_cli).
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address,
                           options.credentials != nullptr ? options.credentials
                                                          : grpc::InsecureServerCredentials(),
                           &server->port_);
  builder.RegisterService(server->service_.get());
  builder.RegisterService(server->admin_.get());
  builder.RegisterService(server->replication_.get());
  // Requests may carry the limit plus framing; responses are checked by the service.
  builder.SetMaxReceiveMessageSize(static_cast<int>(
      std::min<uint64_t>(options.limits.max_message_bytes + (1 << 16), INT32_MAX)));
  builder.SetMaxSendMessageSize(-1);
  // gRPC sets SO_REUSEPORT by default: a second server on the same port
  // would silently share its traffic. A taken port must be an error.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  AcceptPeerKeepalive(&builder);
  if (options.metrics != nullptr) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> metrics;
    metrics.push_back(NewServerMetricsInterceptors(options.metrics));
    builder.experimental().SetInterceptorCreators(std::move(metrics));
    options.metrics->AddCollector(
        [s = server.get()](MetricsWriter& out) { s->CollectMetrics(out); });
  }
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("could not listen on ", options.listen_address,
                     "; is the port in use or the address not local? see --listen"));
  }
  const std::string& listen = options.listen_address;
  const size_t colon = listen.rfind(':');
  server->address_ = absl::StrCat(listen.substr(0, colon), ":", server->port_);
  for (auto& core : server->host_->Cores()) core->set_address(server->address_);
  server->ticker_ = std::thread([s = server.get()] { s->TickLoop(); });
  if (replicated) {
    const ServerReplicationOptions& r = options.replication;
    MembershipOptions m;
    m.kv = r.kv;
    m.cluster = r.cluster;
    m.server_id = r.server_id;
    m.incarnation = host.incarnation;
    m.address = r.advertise_address.empty() ? server->address_ : r.advertise_address;
    m.num_shards = r.num_shards;
    m.num_servers = r.num_servers;
    m.replicas = r.replicas;
    m.lease = r.lease;
    m.standby = r.standby;
    m.rebuild_lost = !options.checkpoint.dir.empty();
    m.restore = options.checkpoint.restore;
    // The fence decides safety: on a monotonic clock, unless a test set one.
    m.clock = options.clock == Clock::Real() ? Clock::Monotonic() : options.clock;
    m.contact = server->etcd_contact_.get();
    m.peers = server->forward_transport_.get();
    absl::StatusOr<std::unique_ptr<MembershipAgent>> agent =
        MembershipAgent::Start(m, server->host_.get());
    if (!agent.ok()) return agent.status();
    {
      absl::MutexLock lock(&server->membership_mu_);
      server->membership_ = *std::move(agent);
    }
    if (absl::Status s = server->StartScheduler(); !s.ok()) return s;
    return server;
  }
  if (absl::Status s = server->StartScheduler(); !s.ok()) return s;
  LogEvent(absl::StrCat("ps_server ", options.server_index, " ", server->address_),
           absl::StrCat("started: shard ", options.server_index, " of ", options.num_servers,
                        ", slice_size ", options.placement.slice_size, ", virtual_nodes ",
                        options.placement.virtual_nodes));
  return server;
}

PsServer::~PsServer() { Shutdown(); }

std::string PsServer::Who() const {
  return absl::StrCat("ps_server ", options_.server_index, " ", address_);
}

absl::Status PsServer::Restore() {
  const ServerCheckpointOptions& c = options_.checkpoint;
  if (!c.restore) return absl::OkStatus();
  if (c.dir.empty()) {
    return absl::InvalidArgumentError("--restore needs --checkpoint_dir, the checkpoints' root");
  }
  const std::string who = absl::StrCat("ps_server ", options_.server_index);
  const absl::Time start = absl::Now();
  std::vector<std::string> skipped;
  absl::StatusOr<FoundCheckpoint> found = checkpointer_->Restore(c.dir, &skipped);
  for (const std::string& s : skipped) LogEvent(who, absl::StrCat("restore: passed over ", s));
  if (!found.ok()) {
    return absl::Status(found.status().code(),
                        absl::StrCat("restore from ", c.dir, ": ", found.status().message()));
  }
  restored_cut_ = found->manifest.cut();
  LogEvent(who, absl::StrFormat("restored %s (cut %d, taken by %d servers): %d tables, %.1f MiB "
                                "here, in %.3f s",
                                found->path, found->manifest.cut(), found->manifest.num_servers(),
                                found->manifest.tables_size(), store().bytes_used() / 1048576.0,
                                absl::ToDoubleSeconds(absl::Now() - start)));
  return absl::OkStatus();
}

absl::Status PsServer::RestoreShards(const std::map<int, PsCore*>& cores, const ShardRing& ring) {
  const std::string& dir = options_.checkpoint.dir;
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
    clocks.push_back(absl::StrCat("worker ", c.worker_id(), " at clock ", c.clock(), " in '",
                                  c.table(), "'"));
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
      LogEvent(who, absl::StrFormat("shard %d: restored from %s (cut %d, %d shards/servers)",
                                    shard, found->path, m.cut(), m.num_servers()));
    }
  }
  LogEvent(who, absl::StrFormat("restored %d shard(s) from %s in %.3f s", cores.size(),
                                found->path, absl::ToDoubleSeconds(absl::Now() - start)));
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::string>> PsServer::ServerAddresses() const {
  const ServerCheckpointOptions& c = options_.checkpoint;
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
  if (addresses.empty() && options_.num_servers == 1) addresses.push_back(address_);
  if (addresses.size() != static_cast<size_t>(options_.num_servers)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoints into ", c.dir, " need the addresses of the ", options_.num_servers,
        " servers, not ", addresses.size(), ": give --servers or --servers_file"));
  }
  return addresses;
}

absl::Status PsServer::StartScheduler() {
  const ServerCheckpointOptions& c = options_.checkpoint;
  const bool replicated = options_.replication.kv != nullptr;
  if ((!replicated && options_.server_index != 0) || c.dir.empty() || !c.coordinate) {
    return absl::OkStatus();
  }
  if (c.servers_file.empty() && !replicated) {
    // Known now: fail at start rather than at the first checkpoint.
    if (absl::StatusOr<std::vector<std::string>> a = ServerAddresses(); !a.ok()) return a.status();
  }
  auto peers = [this, replicated]() -> absl::StatusOr<CheckpointCoordinator::Peers> {
    if (replicated) {
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
  };
  CoordinatorOptions co;
  co.root = c.dir;
  co.keep = c.keep;
  co.full_every = c.full_every;
  co.write_timeout = c.write_timeout;
  co.slice_size = options_.placement.slice_size;
  co.virtual_nodes = static_cast<uint32_t>(options_.placement.virtual_nodes);
  co.ask_peers_each_time = replicated;
  SchedulerOptions so;
  so.every = c.every;
  so.every_clocks = c.every_clocks;
  so.start_cut = restored_cut_;
  if (replicated) {
    // Every server runs a scheduler; the primary of shard 0 coordinates.
    so.coordinates = [this] {
      std::shared_ptr<const ShardRing> ring = host_->ring();
      return ring != nullptr && !host_->fenced() &&
             ring->IsPrimary(0, options_.replication.server_id);
    };
  }
  auto scheduler = std::make_unique<CheckpointScheduler>(
      std::make_unique<CheckpointCoordinator>(CheckpointCoordinator::PeerSource(peers), co), so,
      [this] {
        uint64_t max_clock = 0;
        for (const auto& core : host_->Cores()) {
          max_clock = std::max(max_clock, core->store().max_clock());
        }
        return max_clock;
      },
      [who = Who()](const std::string& line) { LogEvent(who, line); });
  absl::MutexLock lock(&mu_);
  scheduler_ = std::move(scheduler);
  return absl::OkStatus();
}

void PsServer::Coordinate(const proto::CheckpointRequest& request, AdminService::Done done) {
  CheckpointScheduler* scheduler;
  {
    absl::MutexLock lock(&mu_);
    scheduler = scheduler_.get();
  }
  if (scheduler == nullptr) {
    return done(absl::FailedPreconditionError(absl::StrCat(
        "server ", options_.server_index,
        " does not coordinate checkpoints: ask server 0, started with --checkpoint_dir")));
  }
  scheduler->Request(request.full(), [done = std::move(done)](
                                         absl::StatusOr<CheckpointResult> result) {
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

void PsServer::LastCheckpoint() {
  const ServerCheckpointOptions& c = options_.checkpoint;
  if (c.dir.empty()) return;
  CheckpointScheduler* scheduler;
  {
    absl::MutexLock lock(&mu_);
    scheduler = scheduler_.get();
  }
  if (scheduler != nullptr) {
    // A replicated server leaving is not the cluster stopping: its shards
    // live on in their chains, and the scheduler of the next primary of
    // shard 0 goes on.
    (void)scheduler->Stop(c.on_exit && options_.replication.kv == nullptr);  // logs its result
    return;
  }
  if (!c.on_exit || !c.coordinate || options_.server_index == 0 ||
      options_.replication.kv != nullptr) {
    return;
  }
  absl::StatusOr<std::vector<std::string>> addresses = ServerAddresses();
  if (!addresses.ok()) {
    LogEvent(Who(), absl::StrCat("no last checkpoint: ", addresses.status().message()));
    return;
  }
  proto::CheckpointRequest request;
  request.set_action(proto::CHECKPOINT_COORDINATE);
  absl::StatusOr<proto::CheckpointResponse> reply = NewGrpcCheckpointPeer(0, (*addresses)[0])
                                                        ->Call(request, c.write_timeout + absl::Seconds(30));
  LogEvent(Who(), reply.ok() ? absl::StrCat("last checkpoint (taken by server 0): ", reply->path(),
                                            " at cut ", reply->cut())
                             : absl::StrCat("no last checkpoint: ", reply.status().message()));
}

void PsServer::TickLoop() {
  const std::string who = absl::StrCat("ps_server ", options_.server_index, " ", address_);
  std::optional<bool> serving;  // as last told to the health service
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&shut_down_), options_.tick_interval)) return;
    }
    for (auto& core : host_->Cores()) {
      for (const std::string& event : core->Tick()) LogEvent(who, event);
    }
    if (shard_checkpointers_ != nullptr) shard_checkpointers_->Sweep();
    const bool ready = Readiness().ok();
    if (serving != ready) {
      if (grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService()) {
        health->SetServingStatus(ready);
      }
      serving = ready;
    }
  }
}

absl::Status PsServer::Readiness() const {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return absl::UnavailableError("shutting down");
  }
  if (options_.replication.kv == nullptr) return absl::OkStatus();
  if (host_->fenced()) {
    return absl::UnavailableError("fenced: the etcd lease could not be renewed in time");
  }
  if (host_->ring() == nullptr) {
    return absl::UnavailableError("no ring yet: waiting for the first servers to register in etcd");
  }
  return absl::OkStatus();
}

void PsServer::DrainReplicated() {
  host_->StopTakingWorkerCalls();
  const std::vector<std::shared_ptr<PsCore>> cores = host_->Cores();
  struct Drained {
    absl::Mutex mu;
    size_t left ABSL_GUARDED_BY(mu) = 0;
    bool Done() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return left == 0; }
  };
  auto drained = std::make_shared<Drained>();
  {
    absl::MutexLock lock(&drained->mu);
    drained->left = cores.size();
  }
  for (const auto& core : cores) {
    core->AfterReplicated([drained](absl::Status) {
      absl::MutexLock lock(&drained->mu);
      --drained->left;
    });
  }
  absl::MutexLock lock(&drained->mu);
  const bool all = drained->mu.AwaitWithTimeout(
      absl::Condition(drained.get(), &Drained::Done), options_.replication.lease);
  LogEvent(absl::StrCat("ps_server id ", options_.replication.server_id, " ", address_),
           all ? "drained: every accepted write is at its chain's tail"
               : absl::StrCat("drain incomplete after ", absl::FormatDuration(options_.replication.lease),
                              ": ", drained->left, " shard(s) still waiting for their chain"));
}

void PsServer::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  // While the server still serves and ticks (leases of workers that died
  // must expire for the cut to complete).
  if (server_ != nullptr) LastCheckpoint();
  {
    absl::MutexLock lock(&mu_);
    shut_down_ = true;
  }
  if (ticker_.joinable()) ticker_.join();
  // A replicated server drains first: it takes no new worker call (workers
  // retry at the new primary), and what it accepted reaches the chain's
  // tail and is answered (bounded by one lease); then it leaves the cluster
  // at once, so the others take over without waiting for the lease to
  // expire.
  if (options_.replication.kv != nullptr && server_ != nullptr) DrainReplicated();
  {
    absl::MutexLock lock(&membership_mu_);
    if (membership_ != nullptr) membership_->Stop(/*leave=*/true);
  }
  if (server_ == nullptr) return;  // Start failed before the server ran
  // Parked pulls and pushes end now, and new ones fail at once, so that the
  // server can drain.
  const absl::Status stopping = absl::UnavailableError(
      absl::StrCat("server ", options_.server_index, " (", address_, ") is shutting down"));
  for (auto& core : host_->Cores()) core->Close(stopping);
  // Replication streams end too: a call waiting for the chain (a write, a
  // predecessor's batch or probe) is answered now, so that the gRPC server
  // is not left waiting for it.
  host_->Close(stopping);
  if (forward_transport_ != nullptr) forward_transport_->CancelAll();
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  LogEvent(absl::StrCat("ps_server ", options_.server_index, " ", address_), "shut down");
}

void PsServer::Wait() { server_->Wait(); }

}  // namespace ps
