// PsClient: registration, leases and statistics (see ps_client.h).
#include <algorithm>
#include <limits>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"
#include "worker/client/ps_client.h"

namespace ps {

absl::StatusOr<int> PsClient::HeartbeatAll(bool leaving) {
  const int n = num_servers();
  std::vector<int> servers(n);
  std::vector<proto::HeartbeatResponse> replies(n);
  proto::HeartbeatRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_clock(clock_value_.load());
  request.set_lease_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(options_.lease)));
  request.set_leaving(leaving);
  request.set_incarnation(incarnation_);
  for (int s = 0; s < n; ++s) servers[s] = s;
  absl::Status status = CallRunner::FirstError(
      RunCalls(servers, "Heartbeat", HeartbeatPolicy(),
               [&](size_t i, absl::Time deadline, Transport::Done done) {
                 replies[i].Clear();
                 transport_->Heartbeat(servers[i], request, deadline, &replies[i],
                                       std::move(done));
               }));
  if (!status.ok()) return status;
  int live = std::numeric_limits<int>::max();
  for (const proto::HeartbeatResponse& reply : replies) {
    live = std::min(live, static_cast<int>(reply.live_workers()));
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
      if (clock_->AwaitWithTimeout(&heartbeat_mu_, absl::Condition(&stop_heartbeats_), period)) {
        return;
      }
    }
    // A missed heartbeat is retried at the next period; the lease allows 3.
    absl::StatusOr<int> live = HeartbeatAll(/*leaving=*/false);
    if (live.status().code() == absl::StatusCode::kAlreadyExists) {
      // Another process took this worker id over (this one's lease had
      // expired): say so, the renewals will keep failing.
      LogEvent(absl::StrCat("ps_client worker ", options_.worker_id), live.status().message());
    }
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
  const absl::Time deadline = clock_->Now() + timeout;
  int live = 0;
  while (true) {
    // A failed round of heartbeats is retried until the deadline.
    absl::StatusOr<int> count = HeartbeatAll(/*leaving=*/false);
    if (count.ok()) live = *count;
    if (count.ok() && live >= n) return absl::OkStatus();
    if (clock_->Now() >= deadline) break;
    clock_->SleepFor(absl::Milliseconds(50));
  }
  return absl::DeadlineExceededError(
      absl::StrCat("only ", live, " of ", n, " workers registered with every server within ",
                   absl::FormatDuration(timeout), "; are the other workers running?"));
}

absl::StatusOr<std::vector<ServerStats>> PsClient::Stats() {
  const int n = num_servers();
  std::vector<int> servers(n);
  std::vector<proto::StatsResponse> replies(n);
  const proto::StatsRequest request;
  for (int s = 0; s < n; ++s) servers[s] = s;
  absl::Status status = CallRunner::FirstError(
      RunCalls(servers, "Stats", DataPolicy(),
               [&](size_t i, absl::Time deadline, Transport::Done done) {
                 replies[i].Clear();
                 transport_->Stats(servers[i], request, deadline, &replies[i], std::move(done));
               }));
  if (!status.ok()) return status;
  std::vector<ServerStats> out;
  for (int s = 0; s < n; ++s) out.push_back({s, std::move(replies[s])});
  return out;
}

}  // namespace ps
