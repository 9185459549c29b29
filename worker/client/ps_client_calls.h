// Implementation detail of PsClient, shared by its .cc files: one RPC to
// one server (Call) and the parallel, retrying fan-out of a batch of them
// (RunCalls). Not for use outside worker/ps_client*.cc.
#ifndef PS_WORKER_CLIENT_PS_CLIENT_CALLS_H_
#define PS_WORKER_CLIENT_PS_CLIENT_CALLS_H_

#include <chrono>
#include <functional>
#include <memory>
#include <numeric>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "grpcpp/client_context.h"
#include "worker/client/ps_client.h"

namespace ps {

// One RPC to one server, with what the caller needs to use its answer.
template <typename Request, typename Response>
struct PsClient::Call {
  int server = 0;
  size_t op = 0;  // index of the op it belongs to (for Versions)
  Request request;
  Response response;
  grpc::Status status;
  // Pulls: where the reply's values go, in order (pointer, number of floats).
  std::vector<std::pair<float*, uint64_t>> targets;
};

namespace ps_client_internal {

inline bool Retryable(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED;
}

inline std::chrono::system_clock::time_point Deadline(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

}  // namespace ps_client_internal

template <typename Request, typename Response, typename Method>
absl::Status PsClient::RunCalls(std::vector<Call<Request, Response>>& calls, const char* rpc_name,
                                const CallPolicy& policy, Method method) {
  std::vector<size_t> pending(calls.size());
  std::iota(pending.begin(), pending.end(), 0);
  for (int attempt = 1; !pending.empty(); ++attempt) {
    // Legal to destroy once Wait() returns, even if a callback is still
    // leaving DecrementCount.
    absl::BlockingCounter countdown(static_cast<int>(pending.size()));
    std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
    contexts.reserve(pending.size());
    for (size_t i : pending) {
      Call<Request, Response>& call = calls[i];
      contexts.push_back(std::make_unique<grpc::ClientContext>());
      contexts.back()->set_deadline(ps_client_internal::Deadline(policy.timeout));
      call.response.Clear();
      method(call.server, contexts.back().get(), &call.request, &call.response,
             [&countdown, &call](grpc::Status s) {
               call.status = std::move(s);
               countdown.DecrementCount();
             });
    }
    countdown.Wait();
    std::vector<size_t> retry;
    for (size_t i : pending) {
      const grpc::Status& status = calls[i].status;
      if (status.ok()) continue;
      if (ps_client_internal::Retryable(status.error_code()) && attempt < policy.max_attempts) {
        LogEvent(absl::StrCat("ps_client worker ", options_.worker_id),
                 absl::StrCat(rpc_name, " to ", ServerName(calls[i].server), " attempt ", attempt,
                              " failed (", status.error_message(), "); retrying"));
        retry.push_back(i);
        continue;
      }
      const std::string name = ServerName(calls[i].server);
      if (ps_client_internal::Retryable(status.error_code())) {
        return absl::Status(
            FromGrpcStatus(status).code(),
            absl::StrCat(name, ": ", rpc_name, " failed after ", attempt, " attempt(s) of ",
                         absl::FormatDuration(policy.timeout), " each (", status.error_message(),
                         "); is it running? see --servers"));
      }
      return absl::Status(FromGrpcStatus(status).code(),
                          absl::StrCat(name, ": ", rpc_name, ": ", status.error_message()));
    }
    if (!retry.empty()) absl::SleepFor(options_.retry_backoff * attempt);
    pending = std::move(retry);
  }
  return absl::OkStatus();
}

}  // namespace ps

#endif  // PS_WORKER_CLIENT_PS_CLIENT_CALLS_H_
