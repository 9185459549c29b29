// What the kinds of ps_worker runs share (worker/run_worker.cc,
// worker/run_partition.cc): the worker's connection to the servers, its
// tables, where a resumed run continues, and how its progress is told.
// Internal to //worker.
#ifndef PS_WORKER_RUN_COMMON_H_
#define PS_WORKER_RUN_COMMON_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "proto/ps.pb.h"
#include "worker/client/ps_client.h"
#include "worker/run_worker.h"
#include "worker/train/progress.h"
#include "worker/train/training_observer.h"
#include "worker/worker_config.h"

namespace ps {

// Progress lines, flushed (the scripts stream them).
void PrintLine(const std::string& line);

// `status` with `prefix` before its message.
absl::Status Prefixed(const std::string& prefix, const absl::Status& status);

// `base` (config.client, or the sparse models' options) with where the
// cluster is (the servers, or the ring's directory) and the worker's id
// (this process's, or one of its local workers').
PsClientOptions ClientOptions(const WorkerConfig& config, const WorkerEnv& env,
                              PsClientOptions base, int worker_id);

// The observer's sink (curves, gauges; null: none), with each point also
// sent to the servers (their web UI and Stats show the workers' progress)
// off the training thread (ProgressReporter: a server that does not answer
// never holds a step up; a failed report is said once). The sink's last copy
// waits for the last report: `client` must outlive it.
ProgressSink ReportingSink(TrainingObserver* observer, PsClient* client, const std::string& job);

// Connects and creates the tables (the errors of either).
absl::StatusOr<std::unique_ptr<PsClient>> ConnectAndCreate(
    const PsClientOptions& options, const std::vector<proto::TableDef>& tables);

// The clock to resume at: the smallest of this worker's restored clocks on
// the model's tables (0 when the servers restored nothing); says which.
absl::StatusOr<uint64_t> ResumeClock(PsClient& client, const std::vector<proto::TableDef>& tables,
                                     const std::string& who);

}  // namespace ps

#endif  // PS_WORKER_RUN_COMMON_H_
