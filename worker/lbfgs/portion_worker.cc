#include "worker/lbfgs/portion_worker.h"

#include <algorithm>
#include <cstdio>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_channels.h"
#include "common/grpc_status.h"
#include "proto/lbfgs.grpc.pb.h"

namespace ps::lbfgs {
namespace {

// One RPC to the coordinator, retried while it is unreachable, up to the
// timeout. Other errors are returned at once.
template <typename Call>
absl::Status CallCoordinator(const PortionWorkerOptions& options, const char* what, Call call) {
  const absl::Time give_up = absl::Now() + options.coordinator_timeout;
  absl::Duration backoff = absl::Milliseconds(50);
  while (true) {
    grpc::ClientContext context;
    context.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    const grpc::Status s = call(&context);
    if (s.ok()) return absl::OkStatus();
    const bool retry = s.error_code() == grpc::StatusCode::UNAVAILABLE ||
                       s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED;
    if (!retry || absl::Now() >= give_up) {
      const absl::Status status = FromGrpcStatus(s);
      return absl::Status(status.code(),
                          absl::StrCat(what, " to the coordinator at ", options.coordinator,
                                       " failed: ", status.message(),
                                       retry ? " (is ps_lbfgs running? see --coordinator)" : ""));
    }
    absl::SleepFor(backoff);
    backoff = std::min(backoff * 2, absl::Seconds(1));
  }
}

}  // namespace

absl::StatusOr<PortionWorkerStats> RunPortionWorker(const PortionWorkerOptions& options,
                                                    PsClient* client, const LrData& data) {
  std::unique_ptr<proto::LbfgsCoordinator::Stub> stub =
      proto::LbfgsCoordinator::NewStub(NewPeerChannel(options.coordinator));
  PortionWorkerStats stats;
  // Plans by portion, for the current number of portions.
  std::map<uint32_t, PortionPlan> plans;
  uint32_t planned_portions = 0;
  const absl::Time start = absl::Now();
  absl::Time next_progress = start + options.progress_every;
  std::vector<float> weights;
  while (true) {
    proto::TaskRequest request;
    request.set_worker_id(options.worker_id);
    proto::Task task;
    if (absl::Status s = CallCoordinator(
            options, "NextTask",
            [&](grpc::ClientContext* context) { return stub->NextTask(context, request, &task); });
        !s.ok()) {
      return s;
    }
    if (task.kind() == proto::Task::DONE) break;
    if (task.kind() != proto::Task::PORTION) continue;
    if (task.num_portions() == 0 || task.portion() >= task.num_portions() ||
        task.num_portions() > data.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("coordinator ", options.coordinator, " asked for portion ", task.portion(),
                       " of ", task.num_portions(), ", but this worker's data has ", data.size(),
                       " examples (more portions than examples?)"));
    }
    if (task.num_portions() != planned_portions) {
      plans.clear();
      planned_portions = task.num_portions();
    }
    auto [it, fresh] = plans.try_emplace(task.portion());
    if (fresh) {
      const uint64_t bias_key = task.bias_key();
      absl::StatusOr<PortionPlan> plan =
          PlanPortion(data, PortionBegin(data.size(), planned_portions, task.portion()),
                      PortionBegin(data.size(), planned_portions, task.portion() + 1),
                      task.has_bias() ? &bias_key : nullptr);
      if (!plan.ok()) {
        plans.erase(it);
        return plan.status();
      }
      it->second = *std::move(plan);
    }
    const PortionPlan& plan = it->second;
    proto::TaskResult result;
    result.set_worker_id(options.worker_id);
    result.set_evaluation(task.evaluation());
    result.set_portion(task.portion());
    result.set_examples(plan.end - plan.begin);
    result.set_data_examples(data.size());
    weights.assign(plan.keys.size(), 0.0f);
    absl::Status status = client->PullKeys(task.table(), plan.keys, 1, absl::MakeSpan(weights));
    PortionResult portion;
    if (status.ok()) {
      portion = LogisticPortion(data, plan, weights);
      status = client->PushKeysAs({task.push_worker_id(), task.first_request_id()}, task.table(),
                                  plan.keys, 1, portion.gradient, task.evaluation());
    }
    result.set_loss(portion.loss);
    if (status.ok() && options.straggle > absl::ZeroDuration()) {
      std::printf("lbfgs worker=%u straggling evaluation=%llu portion=%u (pushed, not reported)\n",
                  options.worker_id, static_cast<unsigned long long>(task.evaluation()),
                  task.portion());
      std::fflush(stdout);
      absl::SleepFor(options.straggle);
    }
    if (!status.ok()) {
      result.set_failed(true);
      result.set_error(std::string(status.message()));
    }
    proto::TaskAck ack;
    if (absl::Status s = CallCoordinator(
            options, "FinishTask",
            [&](grpc::ClientContext* context) { return stub->FinishTask(context, result, &ack); });
        !s.ok()) {
      return s;
    }
    if (!status.ok()) return status;
    ++stats.portions;
    stats.kept += ack.kept() ? 1 : 0;
    stats.backups += task.backup() ? 1 : 0;
    stats.examples += static_cast<int64_t>(plan.end - plan.begin);
    stats.bytes_pulled += plan.keys.size() * sizeof(float);
    stats.bytes_pushed += plan.keys.size() * sizeof(float);
    if (options.progress_every > absl::ZeroDuration() && absl::Now() >= next_progress) {
      const double seconds = absl::ToDoubleSeconds(absl::Now() - start);
      std::printf("lbfgs worker=%u evaluation=%llu portions=%lld backups=%lld examples/s=%.0f\n",
                  options.worker_id, static_cast<unsigned long long>(task.evaluation()),
                  static_cast<long long>(stats.portions), static_cast<long long>(stats.backups),
                  static_cast<double>(stats.examples) / std::max(seconds, 1e-9));
      std::fflush(stdout);
      next_progress = absl::Now() + options.progress_every;
    }
  }
  return stats;
}

}  // namespace ps::lbfgs
