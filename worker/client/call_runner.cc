#include "worker/client/call_runner.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/log.h"

namespace ps {

namespace {

// Threads of this process waiting in CallRunner::Run, whatever the client:
// spinning is worth it only for a lone waiter, since the cores are the
// process's (deliberately process-wide state; a count, never a lock).
std::atomic<int>& ThreadsWaiting() {
  static std::atomic<int> waiting{0};
  return waiting;
}

}  // namespace

void CallRunner::Countdown::Done() {
  if (remaining_.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  absl::MutexLock lock(&mu_);
  done_ = true;
}

void CallRunner::Countdown::Wait(absl::Duration spin) {
  // Spinning briefly saves the sleep and wake-up of a call that answers
  // within `spin` (a small request's round trip), at the cost of that much
  // CPU when it does not.
  if (spin > absl::ZeroDuration()) {
    const absl::Time until = absl::Now() + spin;
    for (int i = 0; remaining_.load(std::memory_order_acquire) != 0; ++i) {
      if ((i & 63) == 0 && absl::Now() >= until) break;
#if defined(__x86_64__)
      __builtin_ia32_pause();
#endif
    }
  }
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(&done_));
}

bool IsRetryable(const absl::Status& status) {
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded;
}

std::vector<absl::Status> CallRunner::Run(absl::Span<const int> servers, absl::string_view rpc,
                                          const CallPolicy& policy, const Issue& issue) const {
  std::vector<absl::Status> final_status(servers.size());
  std::vector<absl::Status> attempt_status(servers.size());
  std::vector<size_t> pending(servers.size());
  std::iota(pending.begin(), pending.end(), 0);
  for (int attempt = 1; !pending.empty(); ++attempt) {
    {
      // Owned by the callbacks too: the last one may still be leaving it
      // when the wait below returns.
      auto waiter = std::make_shared<Countdown>(static_cast<int>(pending.size()));
      const absl::Time deadline = clock_->Now() + policy.timeout;
      for (size_t i : pending) {
        issue(i, deadline, [waiter, &attempt_status, i](absl::Status s) {
          attempt_status[i] = std::move(s);
          waiter->Done();
        });
      }
      std::atomic<int>& waiting = ThreadsWaiting();
      const bool alone = waiting.fetch_add(1, std::memory_order_relaxed) == 0;
      waiter->Wait(alone ? policy.spin : absl::ZeroDuration());
      waiting.fetch_sub(1, std::memory_order_relaxed);
    }
    std::vector<size_t> retry;
    for (size_t i : pending) {
      const absl::Status& status = attempt_status[i];
      if (status.ok()) continue;
      const std::string name = transport_->ServerName(servers[i]);
      if (IsRetryable(status) && attempt < policy.max_attempts) {
        LogEvent(log_source_, absl::StrCat(rpc, " to ", name, " attempt ", attempt, " failed (",
                                           status.message(), "); retrying"));
        retry.push_back(i);
      } else if (IsRetryable(status)) {
        final_status[i] = absl::Status(
            status.code(),
            absl::StrCat(name, ": ", rpc, " failed after ", attempt, " attempt(s) of ",
                         absl::FormatDuration(policy.timeout), " each (", status.message(),
                         "); is it running? see --servers"));
      } else {
        final_status[i] =
            absl::Status(status.code(), absl::StrCat(name, ": ", rpc, ": ", status.message()));
      }
    }
    if (!retry.empty()) clock_->SleepFor(policy.backoff * attempt);
    pending = std::move(retry);
  }
  return final_status;
}

absl::Status CallRunner::FirstError(absl::Span<const absl::Status> statuses) {
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace ps
