#include "server/rpc/ps_service.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/protocol.h"
#include "common/raw_message.h"
#include "proto/ps.grpc.pb.h"

namespace ps {
namespace {

// Splits a raw request into its parsed small fields and its raw fields.
template <typename Request>
absl::Status ParseRaw(const grpc::ByteBuffer& buffer, absl::Span<const int> raw_fields,
                      std::vector<grpc::Slice>* slices, Request* header, SplitFields* fields) {
  if (!buffer.Dump(slices).ok()) return absl::InternalError("could not read the request bytes");
  if (absl::Status s = SplitMessage(*slices, raw_fields, fields); !s.ok()) return s;
  if (!header->ParseFromString(fields->header)) {
    return absl::InvalidArgumentError("malformed request: header fields do not parse");
  }
  return absl::OkStatus();
}

grpc::ByteBuffer SerializeToBuffer(const google::protobuf::MessageLite& message) {
  grpc::Slice slice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

// When a parked call gives up: a little before the client's deadline, so
// that our DEADLINE_EXCEEDED (which names the slowest worker) reaches it.
absl::Time WaitDeadline(const grpc::ServerContextBase& ctx) {
  const absl::Time client = absl::FromChrono(ctx.deadline());
  const absl::Time now = absl::Now();
  if (client == absl::InfiniteFuture() || client - now > absl::Hours(24)) {
    return now + absl::Hours(24);
  }
  return client - std::min(absl::Seconds(1), (client - now) / 10);
}

// A data call's parsed request, shared by its handler and its completion
// callbacks (the core's args view the request's slices).
struct CallState {
  std::vector<grpc::Slice> slices;  // the request's bytes; args views point here
  SplitFields fields;
  PushArgs push;
  PullArgs pull;
  grpc::Slice payload;  // a pull's values
};

// A call the core parked (id != 0) is released in the core when the client
// cancels it or goes away.
void CancelParkedOnCancel(DataCall* call, const std::shared_ptr<PsCore>& core, PsCore::CallId id) {
  if (id != 0) call->OnCancel([core, id] { core->Cancel(id); });
}

}  // namespace

PsService::PsService(ShardHost* host, const Authorizer* authorizer, const MetricsRegistry* metrics)
    : host_(host),
      authorizer_(authorizer),
      metrics_(metrics),
      admin_thread_([this] { AdminLoop(); }) {}

void PsService::Register(DataCallQueue* queue) {
  const std::string prefix = absl::StrCat("/", proto::ParameterServer::service_full_name(), "/");
  const std::pair<const char*, void (PsService::*)(DataCall*)> methods[] = {
      {"CreateTable", &PsService::CreateTable},
      {"Push", &PsService::Push},
      {"Pull", &PsService::Pull},
      {"PushPull", &PsService::PushPull},
      {"PushBatch", &PsService::PushBatch},
      {"Info", &PsService::Info},
      {"Heartbeat", &PsService::Heartbeat},
      {"Stats", &PsService::Stats},
      {"ReportProgress", &PsService::ReportProgress},
      {"VectorOps", &PsService::VectorOps}};
  for (const auto& [name, method] : methods) {
    queue->Handle(prefix + name,
                  [this, method = method](DataCall* call) { (this->*method)(call); });
  }
}

absl::StatusOr<std::shared_ptr<PsCore>> PsService::CoreFor(const grpc::ServerContextBase& ctx,
                                                           absl::string_view what,
                                                           int* shard_out) const {
  if (absl::Status s = Authorize(authorizer_, ctx, Role::kWorker, what); !s.ok()) return s;
  int shard = -1;
  const auto& metadata = ctx.client_metadata();
  auto it = metadata.find(kShardMetadataKey);
  if (it != metadata.end()) {
    const std::string value(it->second.data(), it->second.size());
    if (!absl::SimpleAtoi(value, &shard) || shard < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("metadata ", kShardMetadataKey, " is '", value, "'; want a shard number"));
    }
  }
  if (shard_out != nullptr) *shard_out = shard;
  return host_->ForWorker(shard);
}

PsService::~PsService() {
  {
    absl::MutexLock lock(&admin_mu_);
    stopping_ = true;
  }
  admin_thread_.join();
}

void PsService::AdminLoop() {
  while (true) {
    std::function<void()> task;
    {
      absl::MutexLock lock(&admin_mu_);
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(admin_mu_) {
        return stopping_ || !admin_tasks_.empty();
      };
      admin_mu_.Await(absl::Condition(&ready));
      if (admin_tasks_.empty()) return;
      task = std::move(admin_tasks_.front());
      admin_tasks_.pop_front();
    }
    task();
  }
}

void PsService::CreateTable(DataCall* call) {
  auto request = std::make_shared<proto::CreateTableRequest>();
  if (!call->ParseRequest(request.get())) return;
  absl::StatusOr<std::shared_ptr<PsCore>> core = CoreFor(call->context(), "CreateTable");
  if (!core.ok()) return call->Finish(core.status());
  // Initializing a large table takes seconds: never on the queue's thread.
  absl::MutexLock lock(&admin_mu_);
  admin_tasks_.push_back([core = *std::move(core), call, request] {
    absl::StatusOr<proto::CreateTableResponse> reply = core->CreateTable(*request);
    if (!reply.ok()) return call->Finish(reply.status());
    core->AfterReplicated(
        [call, reply = *std::move(reply)](absl::Status s) { call->Reply(s, reply); });
  });
}

namespace {

// Parses a raw push (Push or PushPull) into state->push.
absl::Status ParsePush(const grpc::ByteBuffer& req, KeyListCache* key_lists, CallState* state) {
  proto::PushRequest header;
  absl::Status parsed =
      ParseRaw(req, {kPushKeyListField, kPushValuesField}, &state->slices, &header, &state->fields);
  if (!parsed.ok()) return parsed;
  return DecodePush(header, state->fields.Raw(kPushKeyListField),
                    state->fields.Raw(kPushValuesField), key_lists, &state->push);
}

// Where a pull's values go: a slice the reply is then built around.
PsCore::Allocate AllocatePayload(CallState* s) {
  return [s](size_t n) {
    s->payload = grpc::Slice(n);
    return reinterpret_cast<char*>(const_cast<uint8_t*>(s->payload.begin()));
  };
}

}  // namespace

void PsService::Push(DataCall* call) {
  absl::StatusOr<std::shared_ptr<PsCore>> found = CoreFor(call->context(), "Push");
  if (!found.ok()) return call->Finish(found.status());
  std::shared_ptr<PsCore> core = *std::move(found);
  auto state = std::make_shared<CallState>();
  absl::Status parsed = ParsePush(call->request(), &core->key_lists(), state.get());
  if (!parsed.ok()) return call->Finish(parsed);
  PsCore::CallId id =
      core->Push(&state->push, WaitDeadline(call->context()),
                 [call, state, core](absl::StatusOr<proto::PushResponse> reply) {
                   if (!reply.ok()) return call->Finish(reply.status());
                   // Acknowledged once the chain's tail has it (and the state, whose
                   // views the forwarded entry was built from, is no longer needed).
                   core->AfterReplicated([call, state, out = SerializeToBuffer(*reply)](
                                             absl::Status s) { call->Finish(s, out); });
                 });
  CancelParkedOnCancel(call, core, id);
}

void PsService::Pull(DataCall* call) {
  absl::StatusOr<std::shared_ptr<PsCore>> found = CoreFor(call->context(), "Pull");
  if (!found.ok()) return call->Finish(found.status());
  std::shared_ptr<PsCore> core = *std::move(found);
  auto state = std::make_shared<CallState>();
  proto::PullRequest header;
  absl::Status parsed =
      ParseRaw(call->request(), {kPullKeyListField}, &state->slices, &header, &state->fields);
  if (parsed.ok()) {
    parsed =
        DecodePull(header, state->fields.Raw(kPullKeyListField), &core->key_lists(), &state->pull);
  }
  if (!parsed.ok()) return call->Finish(parsed);
  PsCore::CallId id = core->Pull(
      &state->pull, WaitDeadline(call->context()),
      // The values are copied from the store straight into the reply's slice.
      AllocatePayload(state.get()), [call, state](absl::StatusOr<proto::PullResponse> reply) {
        if (!reply.ok()) return call->Finish(reply.status());
        call->Finish(absl::OkStatus(),
                     BuildMessage(*reply, kPullReplyValuesField, std::move(state->payload)));
      });
  CancelParkedOnCancel(call, core, id);
}

void PsService::PushPull(DataCall* call) {
  // Never parks; with replication, answered once the chain's tail has it.
  absl::StatusOr<std::shared_ptr<PsCore>> core = CoreFor(call->context(), "PushPull");
  if (!core.ok()) return call->Finish(core.status());
  auto state = std::make_shared<CallState>();
  proto::PushPullRequest header;
  absl::Status status =
      ParseRaw(call->request(), {kPushPullValuesField}, &state->slices, &header, &state->fields);
  if (!status.ok()) return call->Finish(status);
  absl::StatusOr<proto::PushPullResponse> reply = (*core)->PushPullMany(
      header, state->fields.Raw(kPushPullValuesField), AllocatePayload(state.get()));
  if (!reply.ok()) return call->Finish(reply.status());
  (*core)->AfterReplicated(
      [call, state,
       out = BuildMessage(*reply, kPushPullReplyValuesField, std::move(state->payload))](
          absl::Status s) { call->Finish(s, out); });
}

void PsService::PushBatch(DataCall* call) {
  absl::StatusOr<std::shared_ptr<PsCore>> core = CoreFor(call->context(), "PushBatch");
  if (!core.ok()) return call->Finish(core.status());
  proto::PushBatchRequest request;
  if (!call->ParseRequest(&request)) return;
  (*core)->AfterReplicated([call, out = SerializeToBuffer((*core)->PushBatch(request))](
                               absl::Status s) { call->Finish(s, out); });
}

template <typename Request, typename Reply>
void PsService::AnswerFromCore(DataCall* call, const char* what,
                               absl::StatusOr<Reply> (PsCore::*method)(const Request&)) {
  Request request;
  if (!call->ParseRequest(&request)) return;
  absl::StatusOr<std::shared_ptr<PsCore>> core = CoreFor(call->context(), what);
  if (!core.ok()) return call->Finish(core.status());
  absl::StatusOr<Reply> reply = ((**core).*method)(request);
  if (!reply.ok()) return call->Finish(reply.status());
  call->Reply(absl::OkStatus(), *reply);
}

void PsService::Info(DataCall* call) { AnswerFromCore(call, "Info", &PsCore::Info); }

void PsService::Heartbeat(DataCall* call) { AnswerFromCore(call, "Heartbeat", &PsCore::Heartbeat); }

void PsService::VectorOps(DataCall* call) { AnswerFromCore(call, "VectorOps", &PsCore::VectorOps); }

void PsService::Stats(DataCall* call) {
  proto::StatsRequest request;
  if (!call->ParseRequest(&request)) return;
  int shard = -1;
  absl::StatusOr<std::shared_ptr<PsCore>> core = CoreFor(call->context(), "Stats", &shard);
  if (!core.ok()) return call->Finish(core.status());
  proto::StatsResponse reply = (*core)->Stats();
  if (std::optional<ReplicaLink::Stats> link = host_->LinkStats(shard)) {
    proto::ReplicationStats* r = reply.mutable_replication();
    r->set_entries_forwarded(link->entries_sent);
    r->set_batches(link->batches);
    r->set_batches_resent(link->batches_resent);
    r->set_entries_resent(link->entries_resent);
    r->set_snapshots(link->snapshots);
    r->set_snapshot_bytes(link->snapshot_bytes);
    r->set_catch_ups(link->catch_ups);
    r->set_catch_up_entries(link->catch_up_entries);
    r->set_pending(link->pending);
  }
  progress_.Snapshot(absl::Now(), reply.mutable_workers());
  if (metrics_ != nullptr) {
    // Labels are method="ParameterServer/Push": the data methods' calls.
    for (const auto& [labels, h] : metrics_->ReadHistograms("ps_grpc_server_handling_seconds")) {
      for (const auto& [key, value] : labels) {
        constexpr absl::string_view kPrefix = "ParameterServer/";
        if (key != "method" || !absl::StartsWith(value, kPrefix)) continue;
        proto::CallStats* c = reply.add_calls();
        c->set_method(value.substr(kPrefix.size()));
        c->set_count(h.cumulative.empty() ? 0 : h.cumulative.back());
        c->set_seconds_total(h.sum);
      }
    }
  }
  call->Reply(absl::OkStatus(), reply);
}

void PsService::ReportProgress(DataCall* call) {
  proto::ReportProgressRequest request;
  if (!call->ParseRequest(&request)) return;
  if (absl::Status s = Authorize(authorizer_, call->context(), Role::kWorker, "ReportProgress");
      !s.ok()) {
    return call->Finish(s);
  }
  if (absl::Status s = progress_.Report(request, absl::Now()); !s.ok()) return call->Finish(s);
  call->Reply(absl::OkStatus(), proto::ReportProgressResponse());
}

}  // namespace ps
