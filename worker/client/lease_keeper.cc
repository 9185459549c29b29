#include "worker/client/lease_keeper.h"

#include <algorithm>
#include <limits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/log.h"

namespace ps {

LeaseKeeper::LeaseKeeper(const Options& options, Transport* transport, const CallRunner* runner,
                         Clock* clock)
    : options_(options),
      transport_(transport),
      runner_(runner),
      clock_(clock),
      log_source_(absl::StrCat("ps_client worker ", options.worker_id)) {}

LeaseKeeper::~LeaseKeeper() { Leave(); }

absl::Status LeaseKeeper::Start() {
  if (options_.lease <= absl::ZeroDuration()) return absl::OkStatus();
  // Registered everywhere before the first pull, then renewed in the
  // background. ALREADY_EXISTS (another live process with this worker id)
  // is not retried.
  absl::StatusOr<int> live = HeartbeatAll(/*leaving=*/false);
  if (!live.ok()) {
    if (live.status().code() == absl::StatusCode::kAlreadyExists) {
      // The server's message names the other process and --worker_index.
      // No leaving heartbeat: this worker id belongs to the other process.
      absl::MutexLock lock(&mu_);
      left_ = true;
    }
    return live.status();
  }
  renewals_ = std::thread([this] { RenewLoop(); });
  return absl::OkStatus();
}

absl::StatusOr<int> LeaseKeeper::HeartbeatAll(bool leaving) {
  const int n = transport_->num_servers();
  std::vector<int> servers(n);
  std::vector<proto::HeartbeatResponse> replies(n);
  proto::HeartbeatRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_clock(rounds_pushed_.load());
  request.set_lease_ms(static_cast<uint32_t>(absl::ToInt64Milliseconds(options_.lease)));
  request.set_leaving(leaving);
  request.set_incarnation(options_.incarnation);
  for (int s = 0; s < n; ++s) servers[s] = s;
  const CallPolicy policy = {std::min(options_.timeout, options_.lease / 2), 1,
                             options_.retry_backoff, absl::ZeroDuration()};
  absl::Status status = CallRunner::FirstError(runner_->Run(
      servers, "Heartbeat", policy, [&](size_t i, absl::Time deadline, Transport::Done done) {
        replies[i].Clear();
        transport_->Heartbeat(servers[i], request, deadline, &replies[i], std::move(done));
      }));
  if (!status.ok()) return status;
  int live = std::numeric_limits<int>::max();
  for (const proto::HeartbeatResponse& reply : replies) {
    live = std::min(live, static_cast<int>(reply.live_workers()));
  }
  return live;
}

void LeaseKeeper::RenewLoop() {
  const absl::Duration period = options_.lease / 4;
  while (true) {
    {
      absl::MutexLock lock(&mu_);
      if (clock_->AwaitWithTimeout(&mu_, absl::Condition(&stop_), period)) return;
    }
    // A missed heartbeat is retried at the next period; the lease allows 3.
    absl::StatusOr<int> live = HeartbeatAll(/*leaving=*/false);
    if (live.status().code() == absl::StatusCode::kAlreadyExists) {
      // Another process took this worker id over (this one's lease had
      // expired): say so, the renewals will keep failing.
      LogEvent(log_source_, live.status().message());
    }
  }
}

void LeaseKeeper::Leave() {
  {
    absl::MutexLock lock(&mu_);
    if (left_ || options_.lease <= absl::ZeroDuration()) return;
    left_ = true;
    stop_ = true;
  }
  if (renewals_.joinable()) renewals_.join();
  (void)HeartbeatAll(/*leaving=*/true);
}

absl::Status LeaseKeeper::WaitForWorkers(int n, absl::Duration timeout) {
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

}  // namespace ps
