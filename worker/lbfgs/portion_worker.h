// A Sandblaster L-BFGS worker (ps_worker --algorithm=lbfgs): asks the
// coordinator for data portions, and for each pulls the weights of the
// portion's keys, computes its logistic loss and gradient (lr_portions.h),
// pushes the gradient to the servers' accumulator as the portion
// (PsClient::PushKeysAs: a backup's copy of a part is dropped by the server
// that has the first) and reports the loss. Runs until the coordinator says
// the job is done. One thread; the client and data are not owned.
#ifndef PS_WORKER_LBFGS_PORTION_WORKER_H_
#define PS_WORKER_LBFGS_PORTION_WORKER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "worker/client/ps_client.h"
#include "worker/lbfgs/lr_portions.h"

namespace ps::lbfgs {

struct PortionWorkerOptions {
  std::string coordinator;  // host:port of ps_lbfgs
  uint32_t worker_id = 0;
  // How long the coordinator may be unreachable before the worker gives up.
  absl::Duration coordinator_timeout = absl::Seconds(60);
  // Straggler injection (tests, the backup experiment): waits this long
  // after each portion's push before reporting it.
  absl::Duration straggle = absl::ZeroDuration();
  // Progress line every this often (0: none).
  absl::Duration progress_every = absl::Seconds(5);
};

struct PortionWorkerStats {
  int64_t portions = 0;  // computed and pushed
  int64_t kept = 0;      // of those, the portion's first result
  int64_t backups = 0;   // of those, handed out as backups
  int64_t examples = 0;
  uint64_t bytes_pulled = 0;  // values pulled and pushed (payload bytes)
  uint64_t bytes_pushed = 0;
};

// Works until the coordinator answers DONE. Errors: UNAVAILABLE naming the
// coordinator when it did not answer for options.coordinator_timeout;
// INVALID_ARGUMENT when a task names portions this data cannot have; a
// pull's or push's error naming the server (the portion is reported failed
// to the coordinator first, so another worker takes it).
absl::StatusOr<PortionWorkerStats> RunPortionWorker(const PortionWorkerOptions& options,
                                                    PsClient* client, const LrData& data);

}  // namespace ps::lbfgs

#endif  // PS_WORKER_LBFGS_PORTION_WORKER_H_
