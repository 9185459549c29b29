// ServerTicker: a server's tick loop on its own thread: ticks every core of the ShardHost and
// logs their events, sweeps the checkpoint side, sets the gRPC health status when readiness
// changes. PsServer owns it; what it is given must outlive it. Stop() from one thread at a time.
#ifndef PS_SERVER_SERVER_TICKER_H_
#define PS_SERVER_SERVER_TICKER_H_

#include <functional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/server.h"
#include "server/replication/shard_host.h"
#include "server/server_checkpoints.h"

namespace ps {

struct ServerTickerOptions {
  absl::Duration interval = absl::Milliseconds(20);  // ServerOptions::tick_interval
  std::string who;                                   // names the server in the cores' log lines
};

class ServerTicker {
 public:
  // Starts the thread; the first tick comes one interval from now.
  // `readiness` (PsServer::Readiness) and `set_serving` (the health
  // service's status, told when readiness changes) run on the ticker's
  // thread. `host` and `checkpoints` must outlive this.
  ServerTicker(ServerTickerOptions options, ShardHost* host, ServerCheckpoints* checkpoints,
               std::function<void(bool serving)> set_serving,
               std::function<absl::Status()> readiness);
  // Stop().
  ~ServerTicker();

  // Ends the loop (a tick under way finishes) and joins the thread.
  // Idempotent; not to be called from two threads at once.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  void Loop() ABSL_LOCKS_EXCLUDED(mu_);

  const ServerTickerOptions options_;
  ShardHost* const host_;
  ServerCheckpoints* const checkpoints_;
  const std::function<void(bool serving)> set_serving_;
  const std::function<absl::Status()> readiness_;

  absl::Mutex mu_;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: starts after the fields it uses
};

}  // namespace ps

#endif  // PS_SERVER_SERVER_TICKER_H_
