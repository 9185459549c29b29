// CallRunner: the parallel, retrying fan-out of a set of calls over a
// Transport. All pending calls are issued at once; once all have answered,
// those that failed with UNAVAILABLE or DEADLINE_EXCEEDED are issued again
// (the caller reuses the same request, so the same request id) after a
// backoff of `backoff * attempt` on the clock, up to max_attempts. Other
// errors are final at once. Every call gets its own final status, so a
// caller can tell which of its requests were applied.
//
// RunAsync does it without a waiting thread (backoffs wait on the runner's
// Timer); Run is RunAsync and a wait.
//
// Used by PsClient only. Thread-safe (Run may be called concurrently). The
// runner must outlive every RunAsync's finish.
#ifndef PS_WORKER_CLIENT_CALL_RUNNER_H_
#define PS_WORKER_CLIENT_CALL_RUNNER_H_

#include <atomic>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/clock.h"
#include "worker/client/timer.h"
#include "worker/client/transport.h"

namespace ps {

// Deadline of each attempt, how many attempts a call gets, and the backoff
// unit between rounds of attempts.
struct CallPolicy {
  absl::Duration timeout;
  int max_attempts = 1;
  absl::Duration backoff;
  // The caller spins this long for its calls before sleeping, when no other
  // thread of this process is waiting for calls (a lone small call's round
  // trip is shorter than a sleep and a wake-up; several spinning threads
  // would take the cores the replies need).
  absl::Duration spin;
};

// The longest wait between two attempts (backoff * attempt grows up to it):
// a client that waits for a failover retries at least this often.
constexpr absl::Duration kMaxBackoff = absl::Milliseconds(250);

// Whether a failure may be transient (and the request may have been applied
// without the reply arriving): UNAVAILABLE, DEADLINE_EXCEEDED, CANCELLED (a
// stopping server ends the calls it has not answered).
bool IsRetryable(const absl::Status& status);

class CallRunner {
 public:
  // Issues one attempt of call `i` with the attempt's deadline; must arrange
  // for `done` to run exactly once (Transport's contract). It should clear
  // the call's reply first: a retry reuses it.
  using Issue = std::function<void(size_t i, absl::Time deadline, Transport::Done done)>;
  // Gets one final status per call.
  using Finish = std::function<void(std::vector<absl::Status> statuses)>;

  // `log_source` names the client in retry log lines ("ps_client worker 3").
  CallRunner(const Transport* transport, Clock* clock, std::string log_source)
      : transport_(transport),
        clock_(clock),
        log_source_(std::move(log_source)),
        timer_(std::make_unique<Timer>(clock)) {}

  // Runs call i to servers[i] for every i. Returns one status per call: OK,
  // or its final error naming the server and `rpc`: "server 1 (addr): Pull:
  // <server's message>", or for a retryable code "server 1 (addr): Pull
  // failed after 3 attempt(s) of 10s each (<message>); is it running? see
  // --servers". Codes are kept.
  std::vector<absl::Status> Run(absl::Span<const int> servers, absl::string_view rpc,
                                const CallPolicy& policy, const Issue& issue) const;

  // Run without waiting: returns at once, and `finish` runs exactly once
  // with the statuses Run would return, on a transport thread, the timer's
  // thread (after a backoff) or this one (when the transport answers at
  // once). `issue` is kept until then.
  void RunAsync(std::vector<int> servers, std::string rpc, const CallPolicy& policy, Issue issue,
                Finish finish) const;

  // Calls start(done) and returns once `done` has run (on any thread). The
  // caller spins up to `spin` first when no other thread of this process is
  // waiting here (see CallPolicy::spin), then sleeps.
  static void StartAndWait(absl::Duration spin,
                           const std::function<void(std::function<void()> done)>& start);

  // The first error of `statuses` (in call order), or OK.
  static absl::Status FirstError(absl::Span<const absl::Status> statuses);

 private:
  struct AsyncRun;
  void StartAttempt(const std::shared_ptr<AsyncRun>& run) const;
  void EndAttempt(const std::shared_ptr<AsyncRun>& run) const;

  // Counts the calls of one attempt down; Wait returns once all are done.
  class Countdown {
   public:
    explicit Countdown(int n) : remaining_(n), done_(n == 0) {}
    void Done();
    void Wait(absl::Duration spin);

   private:
    std::atomic<int> remaining_;
    absl::Mutex mu_;
    bool done_ ABSL_GUARDED_BY(mu_);
  };

  const Transport* const transport_;
  Clock* const clock_;
  const std::string log_source_;
  const std::unique_ptr<Timer> timer_;
};

}  // namespace ps

#endif  // PS_WORKER_CLIENT_CALL_RUNNER_H_
