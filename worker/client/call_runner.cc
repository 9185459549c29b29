#include "worker/client/call_runner.h"

#include <numeric>

#include "absl/strings/str_cat.h"
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
  // CANCELLED: the client never cancels its own calls, so the server did
  // (a server stopping ends the calls it has not answered); the retry
  // carries the same request id, which makes it safe.
  return status.code() == absl::StatusCode::kUnavailable ||
         status.code() == absl::StatusCode::kDeadlineExceeded ||
         status.code() == absl::StatusCode::kCancelled;
}

struct CallRunner::AsyncRun {
  std::vector<int> servers;
  std::string rpc;
  CallPolicy policy;
  Issue issue;
  Finish finish;
  std::vector<absl::Status> final_status;
  std::vector<absl::Status> attempt_status;
  std::vector<size_t> pending;  // calls of the current attempt
  int attempt = 0;
  std::atomic<size_t> remaining{0};  // of the current attempt's calls
};

void CallRunner::RunAsync(std::vector<int> servers, std::string rpc, const CallPolicy& policy,
                          Issue issue, Finish finish) const {
  auto run = std::make_shared<AsyncRun>();
  run->final_status.resize(servers.size());
  run->attempt_status.resize(servers.size());
  run->pending.resize(servers.size());
  std::iota(run->pending.begin(), run->pending.end(), 0);
  run->servers = std::move(servers);
  run->rpc = std::move(rpc);
  run->policy = policy;
  run->issue = std::move(issue);
  run->finish = std::move(finish);
  if (run->pending.empty()) {
    run->finish(std::move(run->final_status));
    return;
  }
  StartAttempt(run);
}

void CallRunner::StartAttempt(const std::shared_ptr<AsyncRun>& run) const {
  ++run->attempt;
  // The last call to answer may end the attempt (and start the next) while
  // this loop is still issuing: it walks its own copy.
  const std::vector<size_t> calls = run->pending;
  run->remaining.store(calls.size(), std::memory_order_relaxed);
  const absl::Time deadline = clock_->Now() + run->policy.timeout;
  for (size_t i : calls) {
    run->issue(i, deadline, [this, run, i](absl::Status s) {
      run->attempt_status[i] = std::move(s);
      if (run->remaining.fetch_sub(1, std::memory_order_acq_rel) == 1) EndAttempt(run);
    });
  }
}

void CallRunner::EndAttempt(const std::shared_ptr<AsyncRun>& run) const {
  std::vector<size_t> retry;
  for (size_t i : run->pending) {
    const absl::Status& status = run->attempt_status[i];
    if (status.ok()) continue;
    const std::string name = transport_->ServerName(run->servers[i]);
    if (IsRetryable(status) && run->attempt < run->policy.max_attempts) {
      LogEvent(log_source_, absl::StrCat(run->rpc, " to ", name, " attempt ", run->attempt,
                                         " failed (", status.message(), "); retrying"));
      retry.push_back(i);
    } else if (IsRetryable(status)) {
      run->final_status[i] = absl::Status(
          status.code(),
          absl::StrCat(name, ": ", run->rpc, " failed after ", run->attempt, " attempt(s) of ",
                       absl::FormatDuration(run->policy.timeout), " each (", status.message(),
                       "); is it running? see --servers"));
    } else {
      run->final_status[i] =
          absl::Status(status.code(), absl::StrCat(name, ": ", run->rpc, ": ", status.message()));
    }
  }
  run->pending = std::move(retry);
  if (run->pending.empty()) {
    // Moved out first: `finish` may release the last reference to the run.
    Finish finish = std::move(run->finish);
    finish(std::move(run->final_status));
    return;
  }
  timer_->RunAfter(std::min(run->policy.backoff * run->attempt, kMaxBackoff),
                   [this, run] { StartAttempt(run); });
}

void CallRunner::StartAndWait(absl::Duration spin,
                              const std::function<void(std::function<void()> done)>& start) {
  // Owned by the callback too: it may still be leaving Done() when Wait
  // returns.
  auto waiter = std::make_shared<Countdown>(1);
  std::atomic<int>& waiting = ThreadsWaiting();
  const bool alone = waiting.fetch_add(1, std::memory_order_relaxed) == 0;
  start([waiter] { waiter->Done(); });
  waiter->Wait(alone ? spin : absl::ZeroDuration());
  waiting.fetch_sub(1, std::memory_order_relaxed);
}

std::vector<absl::Status> CallRunner::Run(absl::Span<const int> servers, absl::string_view rpc,
                                          const CallPolicy& policy, const Issue& issue) const {
  std::vector<absl::Status> result;
  StartAndWait(policy.spin, [&](std::function<void()> done) {
    RunAsync(std::vector<int>(servers.begin(), servers.end()), std::string(rpc), policy, issue,
             [&result, done = std::move(done)](std::vector<absl::Status> statuses) {
               result = std::move(statuses);
               done();
             });
  });
  return result;
}

absl::Status CallRunner::FirstError(absl::Span<const absl::Status> statuses) {
  for (const absl::Status& s : statuses) {
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace ps
