#include "server/server_ticker.h"

#include <optional>
#include <utility>

#include "common/log.h"

namespace ps {

ServerTicker::ServerTicker(ServerTickerOptions options, ShardHost* host,
                           ServerCheckpoints* checkpoints,
                           std::function<void(bool serving)> set_serving,
                           std::function<absl::Status()> readiness)
    : options_(std::move(options)),
      host_(host),
      checkpoints_(checkpoints),
      set_serving_(std::move(set_serving)),
      readiness_(std::move(readiness)),
      thread_([this] { Loop(); }) {}

ServerTicker::~ServerTicker() { Stop(); }

void ServerTicker::Stop() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

void ServerTicker::Loop() {
  std::optional<bool> serving;  // as last told to the health service
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.interval)) return;
    }
    for (auto& core : host_->Cores()) {
      for (const std::string& event : core->Tick()) LogEvent(options_.who, event);
    }
    checkpoints_->Sweep();
    const bool ready = readiness_().ok();
    if (serving != ready) {
      set_serving_(ready);
      serving = ready;
    }
  }
}

}  // namespace ps
