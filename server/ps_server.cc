#include "server/ps_server.h"

#include <algorithm>
#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_channels.h"
#include "common/grpc_metrics.h"
#include "common/log.h"
#include "common/random_id.h"
#include "grpcpp/ext/proto_server_reflection_plugin.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace ps {

absl::StatusOr<std::unique_ptr<PsServer>> PsServer::Start(const ServerOptions& options) {
  if (absl::Status s = CheckOptions(options); !s.ok()) return s;
  std::unique_ptr<PsServer> server(new PsServer());
  server->options_ = options;
  if (absl::Status s = server->StartHost(); !s.ok()) return s;
  server->MakeServices();
  if (absl::Status s = server->StartGrpc(); !s.ok()) return s;
  ServerTickerOptions ticker;
  ticker.interval = options.tick_interval;
  ticker.who = absl::StrCat("ps_server ", options.server_index, " ", server->address_);
  server->ticker_ = std::make_unique<ServerTicker>(
      std::move(ticker), server->host_.get(), server->checkpoints_.get(),
      [s = server.get()](bool serving) { s->health_.SetServing(serving); },
      [s = server.get()] { return s->Readiness(); });
  const bool replicated = options.replication.kv != nullptr;
  if (replicated) {
    if (absl::Status s = server->JoinMembership(); !s.ok()) return s;
  }
  if (absl::Status s = server->checkpoints_->StartScheduler(); !s.ok()) return s;
  if (!replicated) {
    LogEvent(absl::StrCat("ps_server ", options.server_index, " ", server->address_),
             absl::StrCat("started: shard ", options.server_index, " of ", options.num_servers,
                          ", slice_size ", options.placement.slice_size, ", virtual_nodes ",
                          options.placement.virtual_nodes));
  }
  return server;
}

absl::Status PsServer::CheckOptions(const ServerOptions& options) {
  const bool replicated = options.replication.kv != nullptr;
  if (replicated && options.checkpoint.restore) {
    // Known now: fail at start, not at the first ring.
    return ServerCheckpoints::CheckRestorable(options.checkpoint);
  }
  if (!replicated && (options.num_servers < 1 || options.server_index < 0 ||
                      options.server_index >= options.num_servers)) {
    return absl::InvalidArgumentError(
        absl::StrCat("server index ", options.server_index, " is outside [0, ", options.num_servers,
                     "); check --index against the number of servers in --servers"));
  }
  return absl::OkStatus();
}

ShardHostOptions PsServer::HostOptions() {
  const bool replicated = options_.replication.kv != nullptr;
  ShardHostOptions host;
  host.core.server_index = options_.server_index;
  host.core.num_servers = replicated ? options_.replication.num_shards : options_.num_servers;
  host.core.placement = options_.placement;
  host.core.limits = options_.limits;
  host.core.clock = options_.clock;
  if (!replicated) return host;
  forward_transport_ = NewGrpcForwardTransport();
  host.transport = forward_transport_.get();
  host.server_id = options_.replication.server_id;
  host.incarnation = incarnation_ = RandomNonZeroId();
  etcd_contact_ = std::make_unique<EtcdContact>(options_.clock == Clock::Real() ? Clock::Monotonic()
                                                                                : options_.clock);
  host.on_synced = [this](int shard) {
    absl::MutexLock lock(&membership_mu_);
    if (membership_ != nullptr) membership_->ReportSynced(shard);
  };
  host.stuck_after = options_.replication.lease;
  host.on_successor_stuck = [this](int shard, uint32_t successor, uint64_t incarnation,
                                   const absl::Status& why) {
    absl::MutexLock lock(&membership_mu_);
    if (membership_ != nullptr) membership_->ReportStuck(shard, successor, incarnation, why);
  };
  if (!options_.checkpoint.dir.empty()) {
    // Called once a ring is set (membership starts after checkpoints_ is).
    host.restore = [this](const std::map<int, PsCore*>& cores, const ShardRing& ring) {
      return checkpoints_->RestoreShards(cores, ring);
    };
  }
  return host;
}

ServerCheckpointsConfig PsServer::CheckpointsConfig() const {
  ServerCheckpointsConfig config;
  config.checkpoint = options_.checkpoint;
  config.server_index = options_.server_index;
  config.num_servers = options_.num_servers;
  config.placement = options_.placement;
  config.replicated = options_.replication.kv != nullptr;
  config.server_id = options_.replication.server_id;
  return config;
}

absl::Status PsServer::StartHost() {
  host_ = std::make_unique<ShardHost>(HostOptions());
  const bool replicated = options_.replication.kv != nullptr;
  if (!replicated) core_ = host_->Cores().at(0);
  checkpoints_ = std::make_unique<ServerCheckpoints>(CheckpointsConfig(), host_.get(), core_.get());
  if (!replicated) return checkpoints_->RestoreAtStart();
  return absl::OkStatus();
}

void PsServer::MakeServices() {
  const Authorizer* auth = options_.authorizer;
  service_ = std::make_unique<PsService>(host_.get(), auth, options_.metrics);
  replication_ = std::make_unique<ReplicationService>(host_.get(), etcd_contact_.get(), auth);
  admin_ = std::make_unique<AdminService>(checkpoints_->PartHandler(), options_.server_index,
                                          checkpoints_->CoordinateHandler(), auth);
}

absl::Status PsServer::StartGrpc() {
  // Every call, health checks included, is served from one completion queue
  // by one thread (DataCallQueue). Server reflection (grpcurl, grpc_cli) is
  // gRPC's sync service, whose own polling threads cost small calls about
  // a third of their speed: only with --grpc_reflection.
  if (options_.grpc_reflection) grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(
      options_.listen_address,
      options_.credentials != nullptr ? options_.credentials : grpc::InsecureServerCredentials(),
      &port_);
  calls_.Register(&builder);
  service_->Register(&calls_);
  admin_->Register(&calls_);
  replication_->Register(&calls_);
  health_.Register(&calls_);
  // Requests may carry the limit plus framing; responses are checked by the service.
  builder.SetMaxReceiveMessageSize(static_cast<int>(
      std::min<uint64_t>(options_.limits.max_message_bytes + (1 << 16), INT32_MAX)));
  builder.SetMaxSendMessageSize(-1);
  // gRPC sets SO_REUSEPORT by default: a second server on the same port
  // would silently share its traffic. A taken port must be an error.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  AcceptPeerKeepalive(&builder);
  if (options_.metrics != nullptr) {
    std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> metrics;
    metrics.push_back(NewServerMetricsInterceptors(options_.metrics));
    builder.experimental().SetInterceptorCreators(std::move(metrics));
    options_.metrics->AddCollector([this](MetricsWriter& out) { CollectMetrics(out); });
  }
  server_ = builder.BuildAndStart();
  if (server_ == nullptr || port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("could not listen on ", options_.listen_address,
                     "; is the port in use or the address not local? see --listen"));
  }
  calls_.Start();
  const std::string& listen = options_.listen_address;
  const size_t colon = listen.rfind(':');
  address_ = absl::StrCat(listen.substr(0, colon), ":", port_);
  for (auto& core : host_->Cores()) core->set_address(address_);
  checkpoints_->SetAddress(address_);
  return absl::OkStatus();
}

MembershipOptions PsServer::MembershipConfig() const {
  const ServerReplicationOptions& r = options_.replication;
  MembershipOptions m;
  m.kv = r.kv;
  m.cluster = r.cluster;
  m.server_id = r.server_id;
  m.incarnation = incarnation_;
  m.address = r.advertise_address.empty() ? address_ : r.advertise_address;
  m.num_shards = r.num_shards;
  m.num_servers = r.num_servers;
  m.replicas = r.replicas;
  m.lease = r.lease;
  m.standby = r.standby;
  m.rebuild_lost = !options_.checkpoint.dir.empty();
  m.restore = options_.checkpoint.restore;
  // The fence decides safety: on a monotonic clock, unless a test set one.
  m.clock = options_.clock == Clock::Real() ? Clock::Monotonic() : options_.clock;
  m.contact = etcd_contact_.get();
  m.peers = forward_transport_.get();
  return m;
}

absl::Status PsServer::JoinMembership() {
  absl::StatusOr<std::unique_ptr<MembershipAgent>> agent =
      MembershipAgent::Start(MembershipConfig(), host_.get());
  if (!agent.ok()) return agent.status();
  absl::MutexLock lock(&membership_mu_);
  membership_ = *std::move(agent);
  return absl::OkStatus();
}

PsServer::~PsServer() { Shutdown(); }

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
  const bool all = drained->mu.AwaitWithTimeout(absl::Condition(drained.get(), &Drained::Done),
                                                options_.replication.lease);
  LogEvent(absl::StrCat("ps_server id ", options_.replication.server_id, " ", address_),
           all ? "drained: every accepted write is at its chain's tail"
               : absl::StrCat("drain incomplete after ",
                              absl::FormatDuration(options_.replication.lease), ": ", drained->left,
                              " shard(s) still waiting for their chain"));
}

void PsServer::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  // While the server still serves and ticks (leases of workers that died
  // must expire for the cut to complete).
  if (server_ != nullptr) checkpoints_->TakeLast();
  if (ticker_ != nullptr) ticker_->Stop();
  // A replicated server drains first: it takes no new worker call (workers
  // retry at the new primary), and what it accepted reaches the chain's
  // tail and is answered (bounded by one lease); then it leaves the cluster
  // at once, so the others take over without waiting for the lease to
  // expire.
  if (options_.replication.kv != nullptr && server_ != nullptr) DrainReplicated();
  {
    absl::MutexLock lock(&membership_mu_);
    if (membership_ != nullptr) {
      // The copies it will keep on disk (KeepCopies, below): their chains
      // wait for its next process for a while.
      membership_->AnnounceReturn(host_->KeepableShards(), options_.replication.rejoin_grace);
      membership_->Stop(/*leave=*/true);
    }
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
  calls_.Stop();  // after the calls in flight, which its thread finishes
  // No call runs any more: a replicated server's copies of all-tiered
  // shards stay on disk for its next process (ShardHost::KeepCopies).
  if (options_.replication.kv != nullptr) host_->KeepCopies();
  LogEvent(absl::StrCat("ps_server ", options_.server_index, " ", address_), "shut down");
}

void PsServer::Wait() { server_->Wait(); }

}  // namespace ps
