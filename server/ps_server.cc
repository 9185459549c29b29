#include "server/ps_server.h"

#include <algorithm>
#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server_builder.h"

namespace ps {

absl::StatusOr<std::unique_ptr<PsServer>> PsServer::Start(const ServerOptions& options) {
  if (options.num_servers < 1 || options.server_index < 0 ||
      options.server_index >= options.num_servers) {
    return absl::InvalidArgumentError(
        absl::StrCat("server index ", options.server_index, " is outside [0, ", options.num_servers,
                     "); check --index against the number of servers in --servers"));
  }
  std::unique_ptr<PsServer> server(new PsServer());
  server->options_ = options;
  PsCoreOptions core_options;
  core_options.server_index = options.server_index;
  core_options.num_servers = options.num_servers;
  core_options.placement = options.placement;
  core_options.limits = options.limits;
  core_options.clock = options.clock;
  server->core_ = std::make_unique<PsCore>(core_options);
  server->service_ = std::make_unique<PsService>(server->core_.get());

  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen_address, grpc::InsecureServerCredentials(),
                           &server->port_);
  builder.RegisterService(server->service_.get());
  // Requests may carry the limit plus framing; responses are checked by the service.
  builder.SetMaxReceiveMessageSize(static_cast<int>(
      std::min<uint64_t>(options.limits.max_message_bytes + (1 << 16), INT32_MAX)));
  builder.SetMaxSendMessageSize(-1);
  // gRPC sets SO_REUSEPORT by default: a second server on the same port
  // would silently share its traffic. A taken port must be an error.
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  server->server_ = builder.BuildAndStart();
  if (server->server_ == nullptr || server->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("could not listen on ", options.listen_address,
                     "; is the port in use or the address not local? see --listen"));
  }
  const std::string& listen = options.listen_address;
  const size_t colon = listen.rfind(':');
  server->address_ = absl::StrCat(listen.substr(0, colon), ":", server->port_);
  server->core_->set_address(server->address_);
  server->ticker_ = std::thread([s = server.get()] { s->TickLoop(); });
  LogEvent(absl::StrCat("ps_server ", options.server_index, " ", server->address_),
           absl::StrCat("started: shard ", options.server_index, " of ", options.num_servers,
                        ", slice_size ", options.placement.slice_size, ", virtual_nodes ",
                        options.placement.virtual_nodes));
  return server;
}

PsServer::~PsServer() { Shutdown(); }

void PsServer::TickLoop() {
  const std::string who = absl::StrCat("ps_server ", options_.server_index, " ", address_);
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&shut_down_), options_.tick_interval)) return;
    }
    for (const std::string& event : core_->Tick()) LogEvent(who, event);
  }
}

void PsServer::Shutdown() {
  {
    absl::MutexLock lock(&mu_);
    if (shut_down_) return;
    shut_down_ = true;
  }
  if (ticker_.joinable()) ticker_.join();
  if (server_ == nullptr) return;  // Start failed before the server ran
  // Parked pulls and pushes end now, and new ones fail at once, so that the
  // server can drain.
  core_->Close(absl::UnavailableError(
      absl::StrCat("server ", options_.server_index, " (", address_, ") is shutting down")));
  server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(5));
  LogEvent(absl::StrCat("ps_server ", options_.server_index, " ", address_), "shut down");
}

void PsServer::Wait() { server_->Wait(); }

}  // namespace ps
