#include "server/ui/cluster_reader.h"

#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <system_error>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/cluster_spec.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/replication/cluster_admin.h"
#include "server/ui/cluster_view.h"

namespace ps {
namespace {

// The newest valid checkpoint under `dir`: its path, cut, time and bytes.
void ReadCheckpoint(const std::string& dir, ClusterViewInput* view) {
  absl::StatusOr<FoundCheckpoint> found = FindNewestValidCheckpoint(dir, nullptr);
  if (!found.ok()) {
    view->checkpoint_error = std::string(found.status().message());
    return;
  }
  ClusterViewInput::Checkpoint c;
  c.path = found->path;
  c.cut = found->manifest.cut();
  std::error_code ec;
  c.time = absl::FromUnixSeconds(0);
  const auto mtime = std::filesystem::last_write_time(found->path, ec);
  if (!ec) {
    c.time = absl::FromChrono(std::chrono::system_clock::now() +
                              std::chrono::duration_cast<std::chrono::system_clock::duration>(
                                  mtime - std::filesystem::file_time_type::clock::now()));
  }
  for (const auto& entry : std::filesystem::recursive_directory_iterator(found->path, ec)) {
    if (entry.is_regular_file(ec)) c.bytes += entry.file_size(ec);
  }
  view->checkpoint = c;
}

}  // namespace

absl::Status ClusterReader::ConnectLocked() {
  PsClientOptions options;
  options.timeout = options_.timeout;
  options.connect_timeout = options_.connect_timeout;
  options.placement = options_.placement;
  if (options_.kv != nullptr) {
    if (directory_ == nullptr) {
      auto directory =
          EtcdShardDirectory::Start(options_.kv, options_.cluster, options_.connect_timeout);
      if (!directory.ok()) return directory.status();
      directory_ = std::shared_ptr<const ShardDirectory>(std::move(*directory));
    }
    options.directory = directory_;
  } else {
    servers_ = options_.servers;
    if (servers_.empty() && !options_.servers_file.empty()) {
      std::ifstream in(options_.servers_file);
      std::stringstream text;
      text << in.rdbuf();
      absl::StatusOr<ClusterSpec> spec =
          ClusterSpec::Parse(std::string(absl::StripAsciiWhitespace(text.str())));
      if (!in || !spec.ok()) {
        return absl::UnavailableError(
            absl::StrCat("the cluster spec in ", options_.servers_file, " is not there yet",
                         spec.ok() ? "" : absl::StrCat(": ", spec.status().message())));
      }
      servers_ = spec->servers;
    }
    if (servers_.empty()) servers_ = {options_.self};
    options.servers = servers_;
  }
  absl::StatusOr<std::unique_ptr<PsClient>> client = PsClient::Connect(options);
  if (!client.ok()) return client.status();
  client_ = *std::move(client);
  return absl::OkStatus();
}

absl::Status ClusterReader::ReadShards(ClusterShards* out) {
  absl::Status status;
  if (options_.kv != nullptr) {
    absl::StatusOr<ShardRing> ring = ReadRing(*options_.kv, options_.cluster);
    if (ring.ok()) {
      out->ring = *std::move(ring);
    } else {
      status = absl::Status(ring.status().code(),
                            absl::StrCat("reading the ring: ", ring.status().message()));
    }
  }
  absl::MutexLock lock(&mu_);
  absl::Status s = client_ != nullptr ? absl::OkStatus() : ConnectLocked();
  absl::StatusOr<std::vector<ServerStats>> stats =
      s.ok() ? client_->Stats() : absl::StatusOr<std::vector<ServerStats>>(s);
  if (!stats.ok()) {
    client_.reset();  // connect again next time
    return status.ok() ? stats.status() : status;
  }
  for (ServerStats& st : *stats) {
    std::string name;
    if (out->ring) {
      std::optional<uint32_t> primary = out->ring->Primary(st.server);
      name = primary ? absl::StrCat("server ", *primary, " (", out->ring->Address(*primary), ")")
                     : std::string("no primary");
    } else {
      name = absl::StrCat("server ", st.server, " (", servers_[st.server], ")");
    }
    out->shards.push_back({st.server, name, std::move(st.stats)});
  }
  return status;
}

std::string ClusterReader::ReadJson() {
  ClusterViewInput view;
  view.source = options_.source;
  view.now = absl::Now();
  ClusterShards read;
  if (absl::Status s = ReadShards(&read); !s.ok()) view.stats_error = std::string(s.message());
  view.ring = std::move(read.ring);
  view.shards = std::move(read.shards);
  if (options_.kv == nullptr && options_.servers.empty() && options_.servers_file.empty()) {
    view.stats_error =
        "this server was not told its peers (--servers or --servers_file): "
        "it shows itself only";
  }
  if (!options_.checkpoint_dir.empty()) ReadCheckpoint(options_.checkpoint_dir, &view);
  return ClusterViewJson(view);
}

}  // namespace ps
