// ProgressBoard: the newest progress points of the workers that report to a
// server (ReportProgress), for the web UI and the Stats RPC. Bounded: at
// most kMaxWorkers workers (the one heard from longest ago makes room) and
// kMaxPoints points each; a worker not heard from in kForget is dropped.
// Thread-safe.
#ifndef PS_SERVER_CORE_PROGRESS_BOARD_H_
#define PS_SERVER_CORE_PROGRESS_BOARD_H_

#include <cstdint>
#include <deque>
#include <string>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "google/protobuf/repeated_field.h"
#include "proto/ps.pb.h"

namespace ps {

class ProgressBoard {
 public:
  static constexpr size_t kMaxWorkers = 256;
  static constexpr size_t kMaxPoints = 600;
  static constexpr absl::Duration kForget = absl::Minutes(10);

  // Keeps the point (at `now`). Errors: INVALID_ARGUMENT naming the worker
  // and the field for a value that is not finite or is negative, or a job
  // name over 256 bytes; nothing is kept then.
  absl::Status Report(const proto::ReportProgressRequest& request, absl::Time now);
  // Every worker heard from within kForget of `now`, by worker id.
  void Snapshot(absl::Time now, google::protobuf::RepeatedPtrField<proto::WorkerProgress>* out);

 private:
  struct Worker {
    std::string job;
    absl::Time last;
    std::deque<proto::ProgressPoint> points;
  };
  void ForgetLocked(absl::Time now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  absl::Mutex mu_;
  absl::flat_hash_map<uint32_t, Worker> workers_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ps

#endif  // PS_SERVER_CORE_PROGRESS_BOARD_H_
