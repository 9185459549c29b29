#include "worker/lbfgs/coordinator_service.h"

#include <optional>

#include "absl/strings/str_cat.h"
#include "worker/lbfgs/portion_objective.h"

namespace ps::lbfgs {

CoordinatorService::CoordinatorService(const CoordinatorOptions& options,
                                       PortionScheduler* scheduler)
    : options_(options), scheduler_(scheduler) {}

grpc::Status CoordinatorService::NextTask(grpc::ServerContext* /*context*/,
                                          const proto::TaskRequest* request, proto::Task* task) {
  {
    absl::MutexLock lock(&mu_);
    if (done_) {
      workers_.erase(request->worker_id());
      task->set_kind(proto::Task::DONE);
      return grpc::Status::OK;
    }
    workers_.insert(request->worker_id());
  }
  std::optional<PortionScheduler::Task> next =
      scheduler_->Next(request->worker_id(), options_.wait);
  if (!next.has_value()) {
    absl::MutexLock lock(&mu_);
    if (done_) workers_.erase(request->worker_id());
    task->set_kind(done_ ? proto::Task::DONE : proto::Task::WAIT);
    return grpc::Status::OK;
  }
  task->set_kind(proto::Task::PORTION);
  task->set_evaluation(next->evaluation);
  task->set_portion(static_cast<uint32_t>(next->portion));
  task->set_num_portions(static_cast<uint32_t>(options_.num_portions));
  task->set_table(options_.table);
  task->set_push_worker_id(options_.push_worker_id);
  task->set_first_request_id(PortionRequestId(next->evaluation, next->portion));
  task->set_backup(next->backup);
  task->set_has_bias(options_.has_bias);
  task->set_bias_key(options_.bias_key);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::FinishTask(grpc::ServerContext* /*context*/,
                                            const proto::TaskResult* result, proto::TaskAck* ack) {
  {
    absl::MutexLock lock(&mu_);
    if (data_examples_ == 0) data_examples_ = result->data_examples();
    if (result->data_examples() != data_examples_) {
      const std::string message =
          absl::StrCat("worker ", result->worker_id(), " read ", result->data_examples(),
                       " examples, but the first worker's data set has ", data_examples_,
                       ": every L-BFGS worker must read the same --train_data");
      scheduler_->Fail(result->worker_id(), result->evaluation(),
                       static_cast<int>(result->portion()));
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION, message);
    }
  }
  const int portion = static_cast<int>(result->portion());
  if (result->failed()) {
    scheduler_->Fail(result->worker_id(), result->evaluation(), portion);
    ack->set_kept(false);
    return grpc::Status::OK;
  }
  ack->set_kept(scheduler_->Finish(result->worker_id(), result->evaluation(), portion,
                                   result->loss(), result->examples()));
  return grpc::Status::OK;
}

void CoordinatorService::Finish(absl::Duration timeout) {
  absl::MutexLock lock(&mu_);
  done_ = true;
  scheduler_->Stop();
  mu_.AwaitWithTimeout(absl::Condition(
                           +[](absl::flat_hash_set<uint32_t>* w) { return w->empty(); }, &workers_),
                       timeout);
}

}  // namespace ps::lbfgs
