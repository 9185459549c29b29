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
//
// Exits 0 when the checkpoint is complete (its MANIFEST written), 1 when it
// failed (the message names the server and what went wrong), 2 on bad usage.
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/time/time.h"
#include "common/cluster_spec.h"
#include "server/checkpoint_coordinator.h"
#include "server/checkpoint_peer.h"

ABSL_FLAG(std::string, servers, "", "cluster spec: comma-separated host:port of every server");
ABSL_FLAG(std::string, checkpoint_dir, "",
          "coordinate the checkpoint from here, into this directory (default: ask server 0)");
ABSL_FLAG(bool, full, false, "a full checkpoint, not an incremental one");
ABSL_FLAG(int, incremental, 0,
          "with --checkpoint_dir: up to this many incremental checkpoints between full ones");
ABSL_FLAG(int, keep, 3, "with --checkpoint_dir: complete checkpoints kept");
ABSL_FLAG(double, timeout_seconds, 60,
          "how long the servers may wait for the workers to finish the rounds before the cut");
ABSL_FLAG(uint64_t, slice_size, 4096, "keys per slice, recorded in the manifest");
ABSL_FLAG(int, virtual_nodes, 512, "virtual nodes per server, recorded in the manifest");

namespace {

int Usage(const std::string& why) {
  std::fprintf(stderr, "ps_admin: %s\nusage: ps_admin checkpoint --servers=h:p,... (see --help)\n",
               why.c_str());
  return 2;
}

void Print(const std::string& path, uint64_t sequence, uint64_t base, uint64_t cut,
           uint64_t bytes, absl::Duration took) {
  std::printf("checkpoint %s: sequence %llu, cut %llu, %s, %.1f MiB in %.3f s\n", path.c_str(),
              static_cast<unsigned long long>(sequence), static_cast<unsigned long long>(cut),
              base == 0 ? "full" : absl::StrCat("incremental on ", base).c_str(),
              bytes / 1048576.0, absl::ToDoubleSeconds(took));
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("Administers a parameter-server cluster. See the README.");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (args.size() != 2 || std::string(args[1]) != "checkpoint") {
    return Usage("expected one command: checkpoint");
  }
  auto spec = ps::ClusterSpec::Parse(absl::GetFlag(FLAGS_servers));
  if (!spec.ok()) return Usage(absl::StrCat("--servers: ", spec.status().message()));
  const double timeout = absl::GetFlag(FLAGS_timeout_seconds);
  if (!(timeout > 0) || timeout > 3600) {
    return Usage(absl::StrCat("--timeout_seconds=", timeout, " must be in (0, 3600]"));
  }
  const std::string dir = absl::GetFlag(FLAGS_checkpoint_dir);
  if (dir.empty()) {
    ps::proto::CheckpointRequest request;
    request.set_action(ps::proto::CHECKPOINT_COORDINATE);
    request.set_full(absl::GetFlag(FLAGS_full));
    absl::StatusOr<ps::proto::CheckpointResponse> reply =
        ps::NewGrpcCheckpointPeer(0, spec->servers[0])
            ->Call(request, absl::Seconds(timeout) + absl::Seconds(30));
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
    return Usage(absl::StrCat("--keep=", options.keep, " must be >= 1 and --incremental=",
                              options.full_every, " >= 0"));
  }
  std::vector<std::unique_ptr<ps::CheckpointPeer>> peers;
  for (size_t i = 0; i < spec->servers.size(); ++i) {
    peers.push_back(ps::NewGrpcCheckpointPeer(static_cast<int>(i), spec->servers[i]));
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
