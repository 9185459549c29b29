// PsClient: registration, leases and statistics (see ps_client.h).
#include <algorithm>
#include <limits>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "worker/client/ps_client.h"
#include "worker/client/ps_client_calls.h"

namespace ps {

absl::StatusOr<int> PsClient::HeartbeatAll(bool leaving) {
  using HeartbeatCall = Call<proto::HeartbeatRequest, proto::HeartbeatResponse>;
  std::vector<HeartbeatCall> calls(stubs_.size());
  for (size_t s = 0; s < calls.size(); ++s) {
    calls[s].server = static_cast<int>(s);
    calls[s].request.set_worker_id(options_.worker_id);
    calls[s].request.set_clock(clock_.load());
    calls[s].request.set_lease_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(options_.lease)));
    calls[s].request.set_leaving(leaving);
  }
  absl::Status status =
      RunCalls(calls, "Heartbeat", HeartbeatPolicy(),
               [this](int server, grpc::ClientContext* ctx, const auto* req, auto* resp,
                      std::function<void(grpc::Status)> done) {
                 stubs_[server]->async()->Heartbeat(ctx, req, resp, std::move(done));
               });
  if (!status.ok()) return status;
  int live = std::numeric_limits<int>::max();
  for (const HeartbeatCall& call : calls) {
    live = std::min(live, static_cast<int>(call.response.live_workers()));
  }
  absl::MutexLock lock(&heartbeat_mu_);
  live_workers_ = live;
  return live;
}

void PsClient::HeartbeatLoop() {
  const absl::Duration period = options_.lease / 4;
  while (true) {
    {
      absl::MutexLock lock(&heartbeat_mu_);
      if (heartbeat_mu_.AwaitWithTimeout(absl::Condition(&stop_heartbeats_), period)) return;
    }
    // A missed heartbeat is retried at the next period; the lease allows 3.
    (void)HeartbeatAll(/*leaving=*/false);
  }
}

void PsClient::Leave() {
  {
    absl::MutexLock lock(&heartbeat_mu_);
    if (left_ || options_.lease <= absl::ZeroDuration()) return;
    left_ = true;
    stop_heartbeats_ = true;
  }
  if (heartbeat_thread_.joinable()) heartbeat_thread_.join();
  (void)HeartbeatAll(/*leaving=*/true);
}

absl::Status PsClient::WaitForWorkers(int n, absl::Duration timeout) {
  if (options_.lease <= absl::ZeroDuration()) {
    return absl::FailedPreconditionError("WaitForWorkers needs heartbeats (PsClientOptions.lease)");
  }
  const absl::Time deadline = absl::Now() + timeout;
  int live = 0;
  while (true) {
    // A failed round of heartbeats is retried until the deadline.
    absl::StatusOr<int> count = HeartbeatAll(/*leaving=*/false);
    if (count.ok()) live = *count;
    if (count.ok() && live >= n) return absl::OkStatus();
    if (absl::Now() >= deadline) break;
    absl::SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("only ", live, " of ", n, " workers registered with every server within ",
                   absl::FormatDuration(timeout), "; are the other workers running?"));
}

absl::StatusOr<std::vector<ServerStats>> PsClient::Stats() {
  using StatsCall = Call<proto::StatsRequest, proto::StatsResponse>;
  std::vector<StatsCall> calls(stubs_.size());
  for (size_t s = 0; s < calls.size(); ++s) calls[s].server = static_cast<int>(s);
  absl::Status status = RunCalls(calls, "Stats", DataPolicy(),
                                 [this](int server, grpc::ClientContext* ctx, const auto* req,
                                        auto* resp, std::function<void(grpc::Status)> done) {
                                   stubs_[server]->async()->Stats(ctx, req, resp, std::move(done));
                                 });
  if (!status.ok()) return status;
  std::vector<ServerStats> out;
  for (StatsCall& call : calls) out.push_back({call.server, std::move(call.response)});
  return out;
}

}  // namespace ps
