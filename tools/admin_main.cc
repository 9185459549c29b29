// ps_admin: administers a running cluster.
//
//   ps_admin checkpoint --servers=h0:p0,h1:p1
//       asks server 0 (started with --checkpoint_dir) to take a checkpoint
//       now, and prints it; --full: a full one even when an incremental one
//       could be taken.
//   ps_admin checkpoint --servers=... --checkpoint_dir=DIR [--incremental=N]
//       coordinates the checkpoint itself, into DIR (a directory every
//       server can write to), with up to N incremental checkpoints between
//       full ones.
//   ps_admin checkpoint --etcd=HOST:PORT --cluster=NAME [--checkpoint_dir=DIR]
//       the same for a replicated cluster: asks the primary of shard 0
//       (started with --checkpoint_dir) to take one, or with DIR takes it
//       from here, calling each shard's primary in the ring.
//
//   ps_admin ring --etcd=HOST:PORT --cluster=NAME
//       prints a replicated cluster's ring: each shard's chain and the
//       members' addresses.
//   ps_admin add-server --etcd=... --cluster=NAME --server_id=N
//       gives a running server (ps_server --etcd --server_id=N) its share of
//       the shards, and waits until it holds them.
//   ps_admin drain --etcd=... --cluster=NAME --server_id=N
//       moves every copy off server N, and waits until it holds none (it may
//       then be stopped).
//
// Exits 0 when done (a checkpoint: its MANIFEST written), 1 when it failed
// (the message names the server and what went wrong), 2 on bad usage.
#include <csignal>
#include <cstdio>
#include <fstream>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "common/checkpoint_request.h"
#include "common/cluster_spec.h"
#include "common/connection_flags.h"
#include "common/etcd_kv_store.h"
#include "common/grpc_channels.h"
#include "common/metrics_http.h"
#include "common/peer_security.h"
#include "server/checkpoint/checkpoint_coordinator.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_peer.h"
#include "server/replication/cluster_admin.h"
#include "server/replication/cluster_status.h"
#include "server/ui/cluster_reader.h"
#include "server/ui/ui_http.h"

ABSL_FLAG(std::string, servers, "", "cluster spec: comma-separated host:port of every server");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "coordinate the checkpoint from here, into this directory (default: ask server 0)");
ABSL_FLAG(bool, full, false, "a full checkpoint, not an incremental one");
ABSL_FLAG(int, incremental, 0,
          "with --checkpoint_dir: up to this many incremental checkpoints between full ones");
ABSL_FLAG(int, keep, 3, "with --checkpoint_dir: complete checkpoints kept");
ABSL_FLAG(double, timeout_seconds, 60,
          "checkpoint: how long the servers may wait for the workers to finish the rounds "
          "before the cut; add-server, drain: how long to wait for the ring to settle");
ABSL_FLAG(int, server_id, -1, "add-server, drain: the server's id");
ABSL_FLAG(uint64_t, slice_size, 4096, "keys per slice, recorded in the manifest");
ABSL_FLAG(std::string, ui_host, "127.0.0.1", "ui: the address the web UI listens on");
ABSL_FLAG(int, ui_port, 8080, "ui: the web UI's port (0: a free one, printed)");
ABSL_FLAG(int, virtual_nodes, 512, "virtual nodes per server, recorded in the manifest");

namespace {

int Usage(const std::string& why) {
  std::fprintf(stderr,
               "ps_admin: %s\nusage: ps_admin checkpoint --servers=h:p,... | --etcd=h:p "
               "--cluster=NAME [--checkpoint_dir=DIR]\n"
               "       ps_admin ring --etcd=h:p --cluster=NAME\n"
               "       ps_admin add-server|drain --etcd=h:p --cluster=NAME --server_id=N\n"
               "       ps_admin status --servers=h:p,... | --etcd=h:p --cluster=NAME "
               "[--checkpoint_dir=DIR]\n"
               "       ps_admin ui --servers=h:p,... | --etcd=h:p --cluster=NAME "
               "[--checkpoint_dir=DIR] [--ui_port=8080]\n"
               "(see --help)\n",
               why.c_str());
  return 2;
}

void Print(const std::string& path, uint64_t sequence, uint64_t base, uint64_t cut, uint64_t bytes,
           absl::Duration took) {
  std::printf("checkpoint %s: sequence %llu, cut %llu, %s, %.1f MiB in %.3f s\n", path.c_str(),
              static_cast<unsigned long long>(sequence), static_cast<unsigned long long>(cut),
              base == 0 ? "full" : absl::StrCat("incremental on ", base).c_str(), bytes / 1048576.0,
              absl::ToDoubleSeconds(took));
}

int Failed(const std::string& what, const absl::Status& status) {
  std::fprintf(stderr, "ps_admin: %s failed: %s\n", what.c_str(),
               std::string(status.message()).c_str());
  return 1;
}

void PrintRing(const ps::ShardRing& ring) {
  std::printf("%s\n", ring.Describe().c_str());
  const auto& members = ring.record().members();
  std::map<uint32_t, ps::proto::MemberRecord> sorted(members.begin(), members.end());
  for (const auto& [id, member] : sorted) {
    std::printf("  server %u at %s (incarnation %llu)\n", id, member.address().c_str(),
                static_cast<unsigned long long>(member.incarnation()));
  }
}

// ring, add-server and drain: the replicated cluster's records in etcd.
int Membership(const std::string& command, const ps::ConnectionFlags& connection) {
  const std::string& endpoint = connection.etcd;
  if (endpoint.empty()) return Usage(absl::StrCat(command, " needs --etcd=host:port"));
  const double timeout = absl::GetFlag(FLAGS_timeout_seconds);
  if (!(timeout > 0) || timeout > 86400) {
    return Usage(absl::StrCat("--timeout_seconds=", timeout, " must be in (0, 86400]"));
  }
  ps::EtcdKvStore kv(ps::EtcdOptions{endpoint});
  const std::string& cluster = connection.cluster;
  if (command == "ring") {
    absl::StatusOr<ps::ShardRing> ring = ps::ReadRing(kv, cluster);
    if (!ring.ok()) return Failed("reading the ring", ring.status());
    PrintRing(*ring);
    return 0;
  }
  const int id = absl::GetFlag(FLAGS_server_id);
  if (id < 0) return Usage(absl::StrCat(command, " needs --server_id=N (>= 0); got ", id));
  ps::ClusterAdminOptions options;
  options.kv = &kv;
  options.cluster = cluster;
  options.timeout = absl::Seconds(timeout);
  options.progress = [](const std::string& line) {
    std::printf("%s\n", line.c_str());
    std::fflush(stdout);
  };
  const uint32_t server = static_cast<uint32_t>(id);
  if (command == "add-server") {
    absl::StatusOr<std::vector<int>> shards = ps::AddServer(options, server);
    if (!shards.ok()) return Failed(absl::StrCat("adding server ", id), shards.status());
    std::printf("server %d added: it holds shards %s\n", id, absl::StrJoin(*shards, ", ").c_str());
    return 0;
  }
  absl::Status drained = ps::DrainServer(options, server);
  if (!drained.ok()) return Failed(absl::StrCat("draining server ", id), drained);
  std::printf("server %d drained: it holds no shard and may be stopped\n", id);
  return 0;
}

// status: each shard's Stats from its primary, and the newest checkpoint.
int Status(const ps::ConnectionFlags& connection) {
  const double timeout = absl::GetFlag(FLAGS_timeout_seconds);
  if (!(timeout > 0) || timeout > 3600) {
    return Usage(absl::StrCat("--timeout_seconds=", timeout, " must be in (0, 3600]"));
  }
  // Declared before the reader, whose directory reads the ring from it.
  std::unique_ptr<ps::EtcdKvStore> kv;
  ps::ClusterReaderOptions options;
  options.timeout = absl::Seconds(std::min(timeout, 10.0));
  options.connect_timeout = absl::Seconds(timeout);
  options.placement.slice_size = absl::GetFlag(FLAGS_slice_size);
  options.placement.virtual_nodes = absl::GetFlag(FLAGS_virtual_nodes);
  if (const std::string& endpoint = connection.etcd; !endpoint.empty()) {
    kv = std::make_unique<ps::EtcdKvStore>(ps::EtcdOptions{endpoint});
    options.kv = kv.get();
    options.cluster = connection.cluster;
  } else {
    auto spec = ps::ClusterSpec::Parse(absl::GetFlag(FLAGS_servers));
    if (!spec.ok())
      return Usage(absl::StrCat("status needs --servers or --etcd: ", spec.status().message()));
    options.servers = spec->servers;
  }
  ps::ClusterReader reader(options);
  ps::ClusterShards cluster;
  if (absl::Status s = reader.ReadShards(&cluster); !s.ok()) {
    return Failed("reading the cluster", s);
  }
  if (cluster.ring) std::printf("%s\n", cluster.ring->Describe().c_str());
  std::printf("%s", ps::FormatClusterStatus(cluster.shards).c_str());
  if (const std::string dir = absl::GetFlag(FLAGS_checkpoint_dir); !dir.empty()) {
    absl::StatusOr<ps::FoundCheckpoint> newest = ps::FindNewestValidCheckpoint(dir, nullptr);
    if (!newest.ok()) {
      std::printf("checkpoints: %s\n", std::string(newest.status().message()).c_str());
    } else {
      std::printf("newest checkpoint: %s (cut %llu)\n", newest->path.c_str(),
                  static_cast<unsigned long long>(newest->manifest.cut()));
    }
  }
  return 0;
}

// checkpoint: of a static cluster (--servers) or a replicated one (--etcd).
int Checkpoint(const ps::ConnectionFlags& connection) {
  const double timeout = absl::GetFlag(FLAGS_timeout_seconds);
  if (!(timeout > 0) || timeout > 3600) {
    return Usage(absl::StrCat("--timeout_seconds=", timeout, " must be in (0, 3600]"));
  }
  // Replicated: the ring names each shard's primary; the primary of shard 0
  // coordinates when asked.
  std::optional<ps::ShardRing> ring;
  std::string coordinator_address;
  if (const std::string& endpoint = connection.etcd; !endpoint.empty()) {
    ps::EtcdKvStore kv(ps::EtcdOptions{endpoint});
    absl::StatusOr<ps::ShardRing> read = ps::ReadRing(kv, connection.cluster);
    if (!read.ok()) return Failed("reading the ring", read.status());
    ring = *std::move(read);
    std::optional<uint32_t> primary = ring->Primary(0);
    if (!primary) {
      return Failed("checkpoint", absl::UnavailableError(absl::StrCat(
                                      "shard 0 has no primary in ring version ", ring->version())));
    }
    coordinator_address = ring->Address(*primary);
  } else {
    auto spec = ps::ClusterSpec::Parse(absl::GetFlag(FLAGS_servers));
    if (!spec.ok()) {
      return Usage(absl::StrCat("checkpoint needs --servers or --etcd: --servers: ",
                                spec.status().message()));
    }
    coordinator_address = spec->servers[0];
  }
  const std::string dir = absl::GetFlag(FLAGS_checkpoint_dir);
  if (dir.empty()) {
    absl::StatusOr<ps::proto::CheckpointResponse> reply = ps::RequestCheckpoint(
        coordinator_address, absl::GetFlag(FLAGS_full), absl::Seconds(timeout));
    if (!reply.ok()) {
      std::fprintf(stderr, "ps_admin: checkpoint failed: %s\n",
                   std::string(reply.status().message()).c_str());
      return 1;
    }
    Print(reply->path(), reply->sequence(), reply->base_sequence(), reply->cut(), reply->bytes(),
          absl::Microseconds(reply->micros()));
    return 0;
  }
  ps::CoordinatorOptions options;
  options.root = dir;
  options.keep = absl::GetFlag(FLAGS_keep);
  options.full_every = absl::GetFlag(FLAGS_incremental);
  options.write_timeout = absl::Seconds(timeout);
  options.slice_size = absl::GetFlag(FLAGS_slice_size);
  options.virtual_nodes = static_cast<uint32_t>(absl::GetFlag(FLAGS_virtual_nodes));
  if (options.keep < 1 || options.full_every < 0) {
    return Usage(absl::StrCat("--keep=", options.keep,
                              " must be >= 1 and --incremental=", options.full_every, " >= 0"));
  }
  std::vector<std::unique_ptr<ps::CheckpointPeer>> peers;
  if (ring) {
    auto shard_peers = ps::NewShardCheckpointPeers(*ring);
    if (!shard_peers.ok()) return Failed("checkpoint", shard_peers.status());
    peers = *std::move(shard_peers);
  } else {
    const std::vector<std::string> servers =
        ps::ClusterSpec::Parse(absl::GetFlag(FLAGS_servers))->servers;
    for (size_t i = 0; i < servers.size(); ++i) {
      peers.push_back(ps::NewGrpcCheckpointPeer(static_cast<int>(i), servers[i]));
    }
  }
  ps::CheckpointCoordinator coordinator(std::move(peers), options);
  absl::StatusOr<ps::CheckpointResult> result = coordinator.Take(absl::GetFlag(FLAGS_full));
  if (!result.ok()) {
    std::fprintf(stderr, "ps_admin: checkpoint failed: %s\n",
                 std::string(result.status().message()).c_str());
    return 1;
  }
  Print(result->path, result->sequence, result->base_sequence, result->cut, result->bytes,
        result->took);
  return 0;
}

// ui: the web UI for a whole cluster, served until SIGINT or SIGTERM; with
// a token (--token_file) the page needs it (/?token=T), with a certificate
// and key (--tls_cert, --tls_key) it is HTTPS.
int Ui(const ps::ConnectionFlags& connection) {
  std::unique_ptr<ps::EtcdKvStore> kv;
  ps::ClusterReaderOptions reader_options;
  reader_options.source = "ps_admin ui";
  reader_options.placement.slice_size = absl::GetFlag(FLAGS_slice_size);
  reader_options.placement.virtual_nodes = absl::GetFlag(FLAGS_virtual_nodes);
  reader_options.checkpoint_dir = absl::GetFlag(FLAGS_checkpoint_dir);
  if (!connection.etcd.empty()) {
    kv = std::make_unique<ps::EtcdKvStore>(ps::EtcdOptions{connection.etcd});
    reader_options.kv = kv.get();
    reader_options.cluster = connection.cluster;
  } else {
    auto spec = ps::ClusterSpec::Parse(absl::GetFlag(FLAGS_servers));
    if (!spec.ok()) {
      return Usage(absl::StrCat("ui needs --servers or --etcd: ", spec.status().message()));
    }
    reader_options.servers = spec->servers;
  }
  std::string token;
  if (!connection.token_file.empty()) {
    std::ifstream in(connection.token_file);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) return Failed("reading --token_file", absl::NotFoundError(connection.token_file));
    token = std::string(absl::StripAsciiWhitespace(text.str()));
  }
  // Block the stop signals before any thread starts: the wait below takes them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  ps::ClusterReader reader(reader_options);
  std::function<absl::Status(const std::string&)> check;
  if (!token.empty()) {
    check = [expected = absl::StrCat("Bearer ", token)](const std::string& authorization) {
      return authorization == expected
                 ? absl::OkStatus()
                 : absl::UnauthenticatedError(
                       "the web UI needs this cluster's token: open /?token=T");
    };
  }
  auto http = ps::MetricsHttpServer::Start(absl::GetFlag(FLAGS_ui_host),
                                           absl::GetFlag(FLAGS_ui_port), nullptr, nullptr,
                                           ps::UiHttpOptions(&reader, check, connection.tls));
  if (!http.ok()) return Failed("starting the web UI", http.status());
  const bool https = !connection.tls.cert.empty() && !connection.tls.key.empty();
  std::printf("ps_admin ui: %s://%s:%d/%s\n", https ? "https" : "http",
              absl::GetFlag(FLAGS_ui_host).c_str(), (*http)->port(),
              token.empty() ? "" : "?token=...");
  std::fflush(stdout);
  int signal_number = 0;
  sigwait(&stop, &signal_number);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Administers a parameter-server cluster. See docs/guide/tools.md.");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const ps::ConnectionFlags connection = ps::GetConnectionFlags();
  if (absl::Status s = ps::SetPeerSecurityFromFlags(connection); !s.ok()) {
    return Usage(std::string(s.message()));
  }
  const std::string command = args.size() == 2 ? args[1] : "";
  if (command == "ring" || command == "add-server" || command == "drain") {
    return Membership(command, connection);
  }
  if (command == "status") return Status(connection);
  if (command == "ui") return Ui(connection);
  if (command != "checkpoint") {
    return Usage("expected one command: checkpoint, status, ui, ring, add-server or drain");
  }
  return Checkpoint(connection);
}
