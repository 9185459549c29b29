#include "worker/client/call_runner.h"

#include <numeric>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/log.h"

namespace ps {

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
      // Legal to destroy once Wait() returns, even if a callback is still
      // leaving DecrementCount.
      absl::BlockingCounter countdown(static_cast<int>(pending.size()));
      const absl::Time deadline = clock_->Now() + policy.timeout;
      for (size_t i : pending) {
        issue(i, deadline, [&countdown, &attempt_status, i](absl::Status s) {
          attempt_status[i] = std::move(s);
          countdown.DecrementCount();
        });
      }
      countdown.Wait();
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
