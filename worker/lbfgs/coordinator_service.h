// CoordinatorService: the LbfgsCoordinator RPCs (proto/lbfgs.proto) over a
// PortionScheduler: hands workers their portions with the identity their
// gradient push carries, and takes their results (the first of a portion is
// kept). Refuses a result from a worker whose data set differs in size from
// the first one seen. Thread-safe (gRPC's threads); the scheduler is not
// owned.
#ifndef PS_WORKER_LBFGS_COORDINATOR_SERVICE_H_
#define PS_WORKER_LBFGS_COORDINATOR_SERVICE_H_

#include <cstdint>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "proto/lbfgs.grpc.pb.h"
#include "worker/lbfgs/portion_scheduler.h"

namespace ps::lbfgs {

struct CoordinatorOptions {
  std::string table;
  int num_portions = 16;
  // The worker id portion pushes carry on the servers (PsClient::PushIdentity):
  // one per job, as the servers remember pushed request ids per worker id
  // and every job numbers its portions alike (PortionRequestId).
  uint32_t push_worker_id = 0xFFFFFF00u;
  // A constant feature at this key in every example (the model's bias).
  bool has_bias = true;
  uint64_t bias_key = ~uint64_t{0};
  // How long NextTask waits for a task before answering WAIT.
  absl::Duration wait = absl::Seconds(1);
};

class CoordinatorService final : public proto::LbfgsCoordinator::Service {
 public:
  CoordinatorService(const CoordinatorOptions& options, PortionScheduler* scheduler);

  grpc::Status NextTask(grpc::ServerContext* context, const proto::TaskRequest* request,
                        proto::Task* task) override;
  grpc::Status FinishTask(grpc::ServerContext* context, const proto::TaskResult* result,
                          proto::TaskAck* ack) override;

  // The job is over: NextTask answers DONE from now on (and the scheduler
  // stops). Then waits, up to `timeout`, until every worker that asked for
  // a task was told so.
  void Finish(absl::Duration timeout);

 private:
  const CoordinatorOptions options_;
  PortionScheduler* const scheduler_;
  absl::Mutex mu_;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t data_examples_ ABSL_GUARDED_BY(mu_) = 0;             // of the first result (0: none yet)
  absl::flat_hash_set<uint32_t> workers_ ABSL_GUARDED_BY(mu_);  // not yet told DONE
};

}  // namespace ps::lbfgs

#endif  // PS_WORKER_LBFGS_COORDINATOR_SERVICE_H_
