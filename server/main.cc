// ps_server: one shard of the parameter server.
//
//   ps_server --servers=h0:p0,h1:p1,h2:p2 --index=1
//       listens on the address of entry 1 and owns ring shard 1 of 3.
//   ps_server --num_servers=3 --index=1 --listen=127.0.0.1:0 --port_file=F
//       picks a free port and writes it to F (for launchers and tests).
//   ps_server --servers=... --index=0 --checkpoint_dir=D --checkpoint_every_seconds=60
//       also coordinates a checkpoint of the cluster every minute into D;
//       with --restore, every server first loads the newest valid one.
//   ps_server --etcd=h:p --cluster=C ... --checkpoint_dir=D
//       replicated: the primary of shard 0 coordinates; a shard whose
//       every copy was lost is rebuilt from the newest checkpoint in D.
//
// Stops cleanly on SIGTERM or SIGINT (after a last checkpoint, with
// --checkpoint_dir).
#include <signal.h>

#include <algorithm>
#include <cstdio>
#include <memory>
#include <string>
#include <thread>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "common/cluster_spec.h"
#include "common/connection_flags.h"
#include "common/etcd_kv_store.h"
#include "common/grpc_channels.h"
#include "common/log.h"
#include "common/metrics.h"
#include "common/metrics_flags.h"
#include "common/metrics_http.h"
#include "common/peer_security.h"
#include "common/port_file.h"
#include "common/process_tuning.h"
#include "server/core/server_limits.h"
#include "server/ps_server.h"
#include "server/rpc/authorizer.h"
#include "server/ui/cluster_reader.h"
#include "server/ui/ui_http.h"

ABSL_FLAG(std::string, servers, "",
          "cluster spec: comma-separated host:port of every server, in shard order");
ABSL_FLAG(int, num_servers, 0, "number of servers, when --servers is not given");
ABSL_FLAG(int, index, 0, "this server's shard index (position in --servers)");
ABSL_FLAG(std::string, listen, "",
          "address to listen on (default: entry --index of --servers, else 127.0.0.1:0)");
ABSL_FLAG(std::string, port_file, "", "if set, write the bound port to this file");
ABSL_FLAG(uint64_t, slice_size, 4096, "keys per slice (must match the workers)");
ABSL_FLAG(int, virtual_nodes, 512, "virtual nodes per server on the hash ring");
ABSL_FLAG(int, max_message_mb, 64, "largest request or response, in MiB");
ABSL_FLAG(uint64_t, memory_budget_mb, 0,
          "MiB of parameters and optimizer state this server may hold; a table that would "
          "pass it is refused (0: 3/4 of the memory the process may use, cgroup-aware)");
ABSL_FLAG(uint32_t, max_tables, 1024, "tables per server");
ABSL_FLAG(uint64_t, max_keys_per_request, uint64_t{1} << 24, "keys one push or pull may name");
ABSL_FLAG(uint32_t, max_table_name_bytes, 256, "longest table name");
ABSL_FLAG(uint32_t, max_parked_calls, 4096,
          "pulls and BSP pushes that may wait for slower workers at once");
ABSL_FLAG(double, max_lease_seconds, 300, "longest worker lease a heartbeat may ask for");
ABSL_FLAG(uint64_t, max_clock, uint64_t{1} << 62, "clocks at or above this are refused");
ABSL_FLAG(double, dedup_retention_seconds, 120,
          "how long a push's request id is remembered to recognize its retries (must exceed "
          "the workers' --timeout_seconds times their attempts)");
ABSL_FLAG(std::string, table_dir, "",
          "directory the rows of tiered tables (TableDef storage STORAGE_TIERED) go under, one "
          "directory per table; on a disk of its own for speed (\"\": tiered tables are refused)");
ABSL_FLAG(uint64_t, disk_budget_mb, 0,
          "MiB the files of all tiered tables may take together under --table_dir (like "
          "--memory_budget_mb, for the whole process); a push that would need more is refused "
          "naming the table and directory (0: no limit but the disk's)");
ABSL_FLAG(uint64_t, key_list_cache_mb, 64,
          "MiB of key lists kept for workers' key-list caching (all workers together, apart "
          "from --memory_budget_mb; 0: none kept)");

ABSL_FLAG(
    int, server_id, -1,
    "with --etcd: this server's id; ids 0..--shards-1 form the first ring (default: --index)");
ABSL_FLAG(int, shards, 0,
          "with --etcd: logical shards of a new cluster (default: --num_servers); more shards "
          "than servers let it grow onto more servers later (ps_admin add-server)");
ABSL_FLAG(int, replicas, 2, "with --etcd: servers per shard's chain (r)");
ABSL_FLAG(double, lease_seconds, 3,
          "with --etcd: this server's etcd lease; it is declared dead this long after it stops "
          "renewing it");
ABSL_FLAG(bool, standby, false,
          "with --etcd: joining a running cluster, take no shard until ps_admin add-server (or "
          "until a chain is short of copies); by default a server that joins or comes back "
          "takes its share");
ABSL_FLAG(double, rejoin_grace_seconds, 30,
          "with --etcd and --table_dir: after a clean stop (SIGTERM) the chains of the shards "
          "whose tables are all tiered wait this long for this server id to come back with the "
          "copies it kept on disk (then it is sent only what it missed); 0: they go to other "
          "servers at once");
ABSL_FLAG(std::string, advertise, "",
          "with --etcd: the host:port others reach this server at (default: the bound address)");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "root of the checkpoints (ckpt-<sequence> directories); server 0 coordinates them "
          "(with --etcd: the primary of shard 0, and a shard whose every copy was lost is "
          "rebuilt from the newest one). Empty: no checkpoints");
ABSL_FLAG(std::string, servers_file, "",
          "with --num_servers: a file the launcher writes with the cluster spec (host:port,...) "
          "once every server has bound its port; read when checkpoints need it");
ABSL_FLAG(bool, restore, false,
          "before serving, load the newest valid checkpoint under --checkpoint_dir (and the "
          "chain it adds to); fail when there is none. With --etcd: the first ring's "
          "primaries load it");
ABSL_FLAG(double, checkpoint_every_seconds, 0,
          "server 0 (with --etcd: the primary of shard 0): a checkpoint this often (0: off)");
ABSL_FLAG(uint64_t, checkpoint_every_clocks, 0,
          "server 0: a checkpoint whenever its clock passes the last cut by this much (0: off)");
ABSL_FLAG(bool, checkpoint_on_exit, true,
          "with --checkpoint_dir: a last checkpoint on SIGTERM or SIGINT (server 0 takes it, "
          "the others ask server 0)");
ABSL_FLAG(bool, grpc_reflection, false,
          "serve gRPC server reflection (grpcurl, grpc_cli); its threads poll beside the call "
          "queue's and cost small calls about a third of their speed (docs/ops/tuning.md)");
ABSL_FLAG(int, checkpoint_keep, 3, "server 0: complete checkpoints kept (with their bases)");
ABSL_FLAG(int, checkpoint_incremental, 0,
          "server 0: up to this many incremental checkpoints (what changed since the previous "
          "one) between full ones (0: always full)");
ABSL_FLAG(std::string, tokens_file, "",
          "accepted tokens and their roles, one '<worker|admin> <token>' per line; calls without "
          "one are refused (UNAUTHENTICATED), and calls beyond their role too "
          "(PERMISSION_DENIED)");
ABSL_FLAG(double, checkpoint_timeout_seconds, 60,
          "how long a checkpoint may wait for the workers to finish the rounds before its cut");

namespace {

int Fail(const std::string& message) {
  std::fprintf(stderr, "ps_server: %s\n", message.c_str());
  return 2;
}

// Placement and request limits; names the flag and value that is wrong.
absl::Status LimitsFromFlags(ps::ServerOptions* options, std::string* budget_source) {
  options->server_index = absl::GetFlag(FLAGS_index);
  options->placement.slice_size = absl::GetFlag(FLAGS_slice_size);
  options->placement.virtual_nodes = absl::GetFlag(FLAGS_virtual_nodes);
  if (options->placement.slice_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--slice_size=", options->placement.slice_size, " must be >= 1"));
  }
  if (options->placement.virtual_nodes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("--virtual_nodes=", options->placement.virtual_nodes, " must be >= 1"));
  }
  const int max_mb = absl::GetFlag(FLAGS_max_message_mb);
  if (max_mb < 1 || max_mb > 1024) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_message_mb=", max_mb, " must be in 1..1024"));
  }
  ps::ServerLimits& limits = options->limits;
  limits.max_message_bytes = uint64_t(max_mb) << 20;
  *budget_source = "--memory_budget_mb";
  limits.memory_budget_bytes = absl::GetFlag(FLAGS_memory_budget_mb) << 20;
  if (limits.memory_budget_bytes == 0) {
    limits.memory_budget_bytes = ps::DefaultMemoryBudget(budget_source);
  }
  limits.max_tables = absl::GetFlag(FLAGS_max_tables);
  limits.max_keys_per_request = absl::GetFlag(FLAGS_max_keys_per_request);
  limits.max_table_name_bytes = absl::GetFlag(FLAGS_max_table_name_bytes);
  limits.max_parked_calls = absl::GetFlag(FLAGS_max_parked_calls);
  limits.max_clock = absl::GetFlag(FLAGS_max_clock);
  const double lease = absl::GetFlag(FLAGS_max_lease_seconds);
  const double retention = absl::GetFlag(FLAGS_dedup_retention_seconds);
  if (limits.max_tables < 1 || limits.max_keys_per_request < 1 || limits.max_table_name_bytes < 1 ||
      limits.max_clock < 1) {
    return absl::InvalidArgumentError(
        "--max_tables, --max_keys_per_request, --max_table_name_bytes and --max_clock must be "
        ">= 1");
  }
  if (!(lease > 0) || !(retention > 0)) {
    return absl::InvalidArgumentError(absl::StrCat("--max_lease_seconds=", lease,
                                                   " and --dedup_retention_seconds=", retention,
                                                   " must be > 0"));
  }
  limits.max_lease = absl::Seconds(lease);
  limits.dedup_retention = absl::Seconds(retention);
  limits.key_list_cache_bytes = absl::GetFlag(FLAGS_key_list_cache_mb) << 20;
  limits.table_dir = absl::GetFlag(FLAGS_table_dir);
  limits.disk_budget_bytes = absl::GetFlag(FLAGS_disk_budget_mb) << 20;
  return absl::OkStatus();
}

// The cluster's shape and this server's listening address.
absl::Status ClusterFromFlags(const ps::ConnectionFlags& connection, ps::ServerOptions* options) {
  const std::string servers = absl::GetFlag(FLAGS_servers);
  std::string listen = absl::GetFlag(FLAGS_listen);
  if (!servers.empty()) {
    auto spec = ps::ClusterSpec::Parse(servers);
    if (!spec.ok()) {
      return absl::InvalidArgumentError(absl::StrCat("--servers: ", spec.status().message()));
    }
    options->num_servers = static_cast<int>(spec->servers.size());
    if (options->server_index < 0 || options->server_index >= options->num_servers) {
      return absl::InvalidArgumentError(absl::StrCat("--index=", options->server_index,
                                                     " is outside [0, ", options->num_servers,
                                                     ") for --servers=", servers));
    }
    if (listen.empty()) listen = spec->servers[options->server_index];
    options->checkpoint.servers = spec->servers;
  } else {
    options->num_servers = absl::GetFlag(FLAGS_num_servers);
    if (options->num_servers < 1 && !connection.etcd.empty()) {
      options->num_servers = std::max(1, absl::GetFlag(FLAGS_shards));
    }
    if (options->num_servers < 1) {
      return absl::InvalidArgumentError("give --servers=host:port,... or --num_servers=N");
    }
    if (listen.empty()) listen = "127.0.0.1:0";
  }
  options->listen_address = listen;
  return absl::OkStatus();
}

absl::Status CheckpointFromFlags(ps::ServerCheckpointOptions* ckpt) {
  ckpt->dir = absl::GetFlag(FLAGS_checkpoint_dir);
  ckpt->restore = absl::GetFlag(FLAGS_restore);
  ckpt->servers_file = absl::GetFlag(FLAGS_servers_file);
  const double every = absl::GetFlag(FLAGS_checkpoint_every_seconds);
  const double timeout = absl::GetFlag(FLAGS_checkpoint_timeout_seconds);
  ckpt->every_clocks = absl::GetFlag(FLAGS_checkpoint_every_clocks);
  ckpt->on_exit = absl::GetFlag(FLAGS_checkpoint_on_exit);
  ckpt->keep = absl::GetFlag(FLAGS_checkpoint_keep);
  ckpt->full_every = absl::GetFlag(FLAGS_checkpoint_incremental);
  if (!(every >= 0) || !(timeout > 0) || timeout > 3600) {
    return absl::InvalidArgumentError(
        absl::StrCat("--checkpoint_every_seconds=", every,
                     " must be >= 0 and --checkpoint_timeout_seconds=", timeout, " in (0, 3600]"));
  }
  if (ckpt->keep < 1 || ckpt->full_every < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--checkpoint_keep=", ckpt->keep,
                     " must be >= 1 and --checkpoint_incremental=", ckpt->full_every, " >= 0"));
  }
  ckpt->every = absl::Seconds(every);
  ckpt->write_timeout = absl::Seconds(timeout);
  if (ckpt->dir.empty() && (ckpt->restore || every > 0 || ckpt->every_clocks > 0)) {
    return absl::InvalidArgumentError(
        "--restore, --checkpoint_every_seconds and --checkpoint_every_clocks need "
        "--checkpoint_dir");
  }
  return absl::OkStatus();
}

// With --etcd: membership through `kv`, which the caller keeps alive.
absl::Status ReplicationFromFlags(const ps::ConnectionFlags& connection, ps::KvStore* kv,
                                  ps::ServerOptions* options) {
  ps::ServerReplicationOptions& r = options->replication;
  r.kv = kv;
  r.cluster = connection.cluster;
  const int id = absl::GetFlag(FLAGS_server_id);
  r.server_id = static_cast<uint32_t>(id >= 0 ? id : options->server_index);
  r.num_shards =
      absl::GetFlag(FLAGS_shards) > 0 ? absl::GetFlag(FLAGS_shards) : options->num_servers;
  // The first ring's servers: --num_servers of them, holding --shards
  // logical shards (more shards than servers: room to grow).
  r.num_servers = std::min(options->num_servers, r.num_shards);
  r.replicas = absl::GetFlag(FLAGS_replicas);
  const double lease_s = absl::GetFlag(FLAGS_lease_seconds);
  if (r.replicas < 1 || !(lease_s >= 1) || lease_s > 600 || r.cluster.empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--replicas=", r.replicas,
                                                   " must be >= 1, --lease_seconds=", lease_s,
                                                   " in [1, 600] and --cluster non-empty"));
  }
  r.lease = absl::Seconds(lease_s);
  const double grace_s = absl::GetFlag(FLAGS_rejoin_grace_seconds);
  if (!(grace_s >= 0) || grace_s > 86400) {
    return absl::InvalidArgumentError(
        absl::StrCat("--rejoin_grace_seconds=", grace_s, " must be in [0, 86400]"));
  }
  r.rejoin_grace = absl::Seconds(grace_s);
  r.advertise_address = absl::GetFlag(FLAGS_advertise);
  r.standby = absl::GetFlag(FLAGS_standby);
  return absl::OkStatus();
}

// TLS for the listener, the identity of this server's own calls to the
// others (the same certificate and CA, and its token: an admin's), and the
// accepted tokens, kept in `authorizer`.
absl::Status SecurityFromFlags(const ps::ConnectionFlags& connection, ps::ServerOptions* options,
                               std::unique_ptr<ps::Authorizer>* authorizer) {
  if (connection.tls.enabled()) {
    auto credentials = ps::ServerTlsCredentials(connection.tls);
    if (!credentials.ok()) return credentials.status();
    options->credentials = *std::move(credentials);
  }
  if (absl::Status s = ps::SetPeerSecurityFromFlags(connection); !s.ok()) return s;
  if (const std::string f = absl::GetFlag(FLAGS_tokens_file); !f.empty()) {
    auto parsed = ps::Authorizer::FromFile(f);
    if (!parsed.ok()) return parsed.status();
    *authorizer = *std::move(parsed);
    options->authorizer = authorizer->get();
  }
  return absl::OkStatus();
}

// The host of a listen address (host:port, [v6]:port).
std::string ListenHost(const std::string& listen) {
  const size_t colon = listen.rfind(':');
  std::string host = colon == std::string::npos ? listen : listen.substr(0, colon);
  if (host.size() > 1 && host.front() == '[') host = host.substr(1, host.size() - 2);
  return host;
}

// Everything from the flags that needs no thread: names the wrong flag.
absl::Status OptionsFromFlags(const ps::ConnectionFlags& connection, ps::ServerOptions* options,
                              std::string* budget_source, std::unique_ptr<ps::KvStore>* kv) {
  if (absl::Status s = LimitsFromFlags(options, budget_source); !s.ok()) return s;
  if (absl::Status s = ClusterFromFlags(connection, options); !s.ok()) return s;
  if (absl::Status s = CheckpointFromFlags(&options->checkpoint); !s.ok()) return s;
  options->grpc_reflection = absl::GetFlag(FLAGS_grpc_reflection);
  if (connection.etcd.empty()) return absl::OkStatus();
  *kv = std::make_unique<ps::EtcdKvStore>(ps::EtcdOptions{connection.etcd});
  return ReplicationFromFlags(connection, kv->get(), options);
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Parameter-server shard. See docs/guide/training.md.");
  absl::ParseCommandLine(argc, argv);
  ps::TuneProcessForDataPath();
  const ps::ConnectionFlags connection = ps::GetConnectionFlags();

  ps::ServerOptions options;
  std::string budget_source;
  std::unique_ptr<ps::KvStore> kv;
  if (absl::Status s = OptionsFromFlags(connection, &options, &budget_source, &kv); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  const absl::StatusOr<int> metrics_port = ps::MetricsPortFromFlags();
  if (!metrics_port.ok()) return Fail(std::string(metrics_port.status().message()));

  // Block the stop signals before gRPC starts its threads, so only the
  // waiter below receives them.
  sigset_t stop_signals;
  sigemptyset(&stop_signals);
  sigaddset(&stop_signals, SIGTERM);
  sigaddset(&stop_signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop_signals, nullptr);
  std::unique_ptr<ps::Authorizer> authorizer;
  if (absl::Status s = SecurityFromFlags(connection, &options, &authorizer); !s.ok()) {
    return Fail(std::string(s.message()));
  }
  // Declared before the server: its collector reads the server, and the
  // HTTP endpoint (declared after it) stops first.
  ps::MetricsRegistry metrics;
  if (*metrics_port >= 0) {
    options.metrics = &metrics;
    ps::RecordPeerCallsIn(&metrics);
  }
  auto server = ps::PsServer::Start(options);
  if (!server.ok()) return Fail(std::string(server.status().message()));
  ps::PsServer* const started_server = server->get();
  // The web UI on the metrics port: the page, and the cluster as this
  // server reads it (its peers' Stats, the ring, the checkpoints).
  ps::ClusterReaderOptions ui;
  ui.source = absl::StrCat("ps_server ", options.server_index, " ", (*server)->address());
  ui.servers = options.checkpoint.servers;
  ui.servers_file = options.checkpoint.servers_file;
  ui.self = (*server)->address();
  ui.kv = kv.get();
  ui.cluster = connection.cluster;
  ui.checkpoint_dir = options.checkpoint.dir;
  ui.placement = options.placement;
  ps::ClusterReader cluster_reader(ui);
  auto metrics_http = ps::StartMetricsFromFlags(
      *metrics_port, ListenHost(options.listen_address), &metrics,
      [started_server] { return started_server->Readiness(); },
      ps::UiHttpOptions(
          &cluster_reader,
          authorizer == nullptr
              ? std::function<absl::Status(const std::string&)>()
              : [auth = authorizer.get()](const std::string& authorization) {
                  return auth->CheckAuthorization(authorization, ps::Role::kWorker, "the web UI");
                },
          connection.tls));
  if (!metrics_http.ok()) return Fail(std::string(metrics_http.status().message()));
  if (const std::string f = absl::GetFlag(FLAGS_port_file); !f.empty()) {
    if (absl::Status w = ps::WritePortFile(f, (*server)->port(), "--port_file"); !w.ok()) {
      return Fail(std::string(w.message()));
    }
  }

  const std::string self =
      absl::StrCat("ps_server ", options.server_index, " ", (*server)->address());
  ps::LogEvent(self, absl::StrCat("memory budget ", options.limits.memory_budget_bytes >> 20,
                                  " MiB (", budget_source, ")"));
  std::thread waiter([&] {
    int signal_number = 0;
    sigwait(&stop_signals, &signal_number);
    ps::LogEvent(self, absl::StrCat("received ", signal_number == SIGTERM ? "SIGTERM" : "SIGINT",
                                    ", shutting down"));
    (*server)->Shutdown();
  });
  (*server)->Wait();
  waiter.join();
  return 0;
}
