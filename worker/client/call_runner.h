// CallRunner: the parallel, retrying fan-out of a set of calls over a
// Transport. All pending calls are issued at once; once all have answered,
// those that failed with UNAVAILABLE or DEADLINE_EXCEEDED are issued again
// (the caller reuses the same request, so the same request id) after a
// backoff of `backoff * attempt` on the clock, up to max_attempts. Other
// errors are final at once. Every call gets its own final status, so a
// caller can tell which of its requests were applied.
//
// Used by PsClient only. Thread-safe (Run may be called concurrently).
#ifndef PS_WORKER_CLIENT_CALL_RUNNER_H_
#define PS_WORKER_CLIENT_CALL_RUNNER_H_

#include <functional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/clock.h"
#include "worker/client/transport.h"

namespace ps {

// Deadline of each attempt, how many attempts a call gets, and the backoff
// unit between rounds of attempts.
struct CallPolicy {
  absl::Duration timeout;
  int max_attempts = 1;
  absl::Duration backoff;
};

// Whether a failure may be transient (and the request may have been applied
// without the reply arriving): UNAVAILABLE, DEADLINE_EXCEEDED.
bool IsRetryable(const absl::Status& status);

class CallRunner {
 public:
  // Issues one attempt of call `i` with the attempt's deadline; must arrange
  // for `done` to run exactly once (Transport's contract). It should clear
  // the call's reply first: a retry reuses it.
  using Issue = std::function<void(size_t i, absl::Time deadline, Transport::Done done)>;

  // `log_source` names the client in retry log lines ("ps_client worker 3").
  CallRunner(const Transport* transport, Clock* clock, std::string log_source)
      : transport_(transport), clock_(clock), log_source_(std::move(log_source)) {}

  // Runs call i to servers[i] for every i. Returns one status per call: OK,
  // or its final error naming the server and `rpc`: "server 1 (addr): Pull:
  // <server's message>", or for a retryable code "server 1 (addr): Pull
  // failed after 3 attempt(s) of 10s each (<message>); is it running? see
  // --servers". Codes are kept.
  std::vector<absl::Status> Run(absl::Span<const int> servers, absl::string_view rpc,
                                const CallPolicy& policy, const Issue& issue) const;

  // The first error of `statuses` (in call order), or OK.
  static absl::Status FirstError(absl::Span<const absl::Status> statuses);

 private:
  const Transport* const transport_;
  Clock* const clock_;
  const std::string log_source_;
};

}  // namespace ps

#endif  // PS_WORKER_CLIENT_CALL_RUNNER_H_
