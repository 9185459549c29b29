// A running parameter-server shard: a PsCore served over gRPC.
//
// Used by the ps_server daemon and by in-process integration tests (several
// shards in one process, each on port 0). Start() returns once the port is
// bound; Shutdown() stops accepting calls, lets in-flight calls finish, and
// is idempotent. Thread-safe.
#ifndef PS_SERVER_PS_SERVER_H_
#define PS_SERVER_PS_SERVER_H_

#include <cstdint>
#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "common/placement.h"
#include "grpcpp/server.h"
#include "common/clock.h"
#include "server/ps_core.h"
#include "server/ps_service.h"
#include "server/server_limits.h"

namespace ps {

struct ServerOptions {
  std::string listen_address = "127.0.0.1:0";  // port 0: pick a free port
  int server_index = 0;
  int num_servers = 1;
  PlacementConfig placement;
  ServerLimits limits;
  // How often worker leases and the deadlines of waiting pulls are checked.
  absl::Duration tick_interval = absl::Milliseconds(20);
  Clock* clock = Clock::Real();
};

class PsServer {
 public:
  // Errors: INVALID_ARGUMENT (index outside [0, num_servers)), UNAVAILABLE
  // (the address could not be bound; the message names it).
  static absl::StatusOr<std::unique_ptr<PsServer>> Start(const ServerOptions& options);
  ~PsServer();

  // host:port actually bound.
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  PsCore& core() { return *core_; }
  ShardStore& store() { return core_->store(); }
  ClockTracker& clocks() { return core_->clocks(); }

  void Shutdown();
  // Blocks until Shutdown() has been called and the server has stopped.
  void Wait();

 private:
  PsServer() = default;
  // Runs ClockTracker::Tick every tick_interval and logs its events, until
  // Shutdown.
  void TickLoop();

  ServerOptions options_;
  std::string address_;
  int port_ = 0;
  std::unique_ptr<PsCore> core_;
  std::unique_ptr<PsService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::thread ticker_;

  absl::Mutex mu_;
  bool shut_down_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ps

#endif  // PS_SERVER_PS_SERVER_H_
