#include "server/rpc/ps_service.h"

#include <algorithm>
#include <memory>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/protocol.h"
#include "common/raw_message.h"

namespace ps {
namespace {

grpc::ServerUnaryReactor* Finish(grpc::CallbackServerContext* ctx, const absl::Status& status) {
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  reactor->Finish(ToGrpcStatus(status));
  return reactor;
}

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
absl::Time WaitDeadline(grpc::CallbackServerContext* ctx) {
  const absl::Time client = absl::FromChrono(ctx->deadline());
  const absl::Time now = absl::Now();
  if (client == absl::InfiniteFuture() || client - now > absl::Hours(24)) {
    return now + absl::Hours(24);
  }
  return client - std::min(absl::Seconds(1), (client - now) / 10);
}

// A data call's state, shared by its reactor and its completion callback.
struct CallState {
  std::vector<grpc::Slice> slices;  // the request's bytes; args views point here
  SplitFields fields;
  PushArgs push;
  PullArgs pull;
  grpc::Slice payload;  // a pull's values
  absl::Mutex mu;
  PsCore::CallId parked ABSL_GUARDED_BY(mu) = 0;
  bool cancelled ABSL_GUARDED_BY(mu) = false;
};

}  // namespace

// A unary reactor for calls the core may park. OnCancel releases the parked
// call in the core (its callback then finishes the call with CANCELLED);
// OnDone deletes the reactor, which gRPC calls once after Finish.
class PsService::Reactor final : public grpc::ServerUnaryReactor {
 public:
  Reactor(std::shared_ptr<PsCore> core, std::shared_ptr<CallState> state)
      : core_(std::move(core)), state_(std::move(state)) {}

  // Records the core's id of the parked call, or releases it at once when
  // the client already went away.
  static void Park(PsCore* core, CallState& state, PsCore::CallId id) {
    if (id == 0) return;
    bool cancelled;
    {
      absl::MutexLock lock(&state.mu);
      state.parked = id;
      cancelled = state.cancelled;
    }
    if (cancelled) core->Cancel(id);
  }

  void OnCancel() override {
    PsCore::CallId id;
    {
      absl::MutexLock lock(&state_->mu);
      state_->cancelled = true;
      id = state_->parked;
    }
    if (id != 0) core_->Cancel(id);
  }
  void OnDone() override { delete this; }

 private:
  const std::shared_ptr<PsCore> core_;
  const std::shared_ptr<CallState> state_;
};

PsService::PsService(ShardHost* host, const Authorizer* authorizer)
    : host_(host), authorizer_(authorizer), admin_thread_([this] { AdminLoop(); }) {}

absl::StatusOr<std::shared_ptr<PsCore>> PsService::CoreFor(grpc::CallbackServerContext* ctx,
                                                           absl::string_view what,
                                                           int* shard_out) const {
  if (absl::Status s = Authorize(authorizer_, *ctx, Role::kWorker, what); !s.ok()) return s;
  int shard = -1;
  const auto& metadata = ctx->client_metadata();
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

grpc::ServerUnaryReactor* PsService::CreateTable(grpc::CallbackServerContext* ctx,
                                                 const proto::CreateTableRequest* req,
                                                 proto::CreateTableResponse* resp) {
  absl::StatusOr<std::shared_ptr<PsCore>> core = CoreFor(ctx, "CreateTable");
  if (!core.ok()) return Finish(ctx, core.status());
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  // Initializing a large table takes seconds: never on a gRPC thread.
  absl::MutexLock lock(&admin_mu_);
  admin_tasks_.push_back([core = *std::move(core), reactor, req, resp] {
    absl::StatusOr<proto::CreateTableResponse> reply = core->CreateTable(*req);
    if (!reply.ok()) {
      reactor->Finish(ToGrpcStatus(reply.status()));
      return;
    }
    *resp = *std::move(reply);
    core->AfterReplicated([reactor](absl::Status s) { reactor->Finish(ToGrpcStatus(s)); });
  });
  return reactor;
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

grpc::ServerUnaryReactor* PsService::Push(grpc::CallbackServerContext* ctx,
                                          const grpc::ByteBuffer* req, grpc::ByteBuffer* resp) {
  absl::StatusOr<std::shared_ptr<PsCore>> found = CoreFor(ctx, "Push");
  if (!found.ok()) return Finish(ctx, found.status());
  std::shared_ptr<PsCore> core = *std::move(found);
  auto state = std::make_shared<CallState>();
  auto* reactor = new Reactor(core, state);
  absl::Status parsed = ParsePush(*req, &core->key_lists(), state.get());
  if (!parsed.ok()) {
    reactor->Finish(ToGrpcStatus(parsed));
    return reactor;
  }
  PsCore::CallId id =
      core->Push(&state->push, WaitDeadline(ctx),
                 [reactor, resp, state, core](absl::StatusOr<proto::PushResponse> reply) {
                   if (!reply.ok()) {
                     reactor->Finish(ToGrpcStatus(reply.status()));
                     return;
                   }
                   *resp = SerializeToBuffer(*reply);
                   // Acknowledged once the chain's tail has it (and the state, whose
                   // views the forwarded entry was built from, is no longer needed).
                   core->AfterReplicated(
                       [reactor, state](absl::Status s) { reactor->Finish(ToGrpcStatus(s)); });
                 });
  Reactor::Park(core.get(), *state, id);
  return reactor;
}

grpc::ServerUnaryReactor* PsService::Pull(grpc::CallbackServerContext* ctx,
                                          const grpc::ByteBuffer* req, grpc::ByteBuffer* resp) {
  absl::StatusOr<std::shared_ptr<PsCore>> found = CoreFor(ctx, "Pull");
  if (!found.ok()) return Finish(ctx, found.status());
  std::shared_ptr<PsCore> core = *std::move(found);
  auto state = std::make_shared<CallState>();
  auto* reactor = new Reactor(core, state);
  proto::PullRequest header;
  absl::Status parsed =
      ParseRaw(*req, {kPullKeyListField}, &state->slices, &header, &state->fields);
  if (parsed.ok()) {
    parsed =
        DecodePull(header, state->fields.Raw(kPullKeyListField), &core->key_lists(), &state->pull);
  }
  if (!parsed.ok()) {
    reactor->Finish(ToGrpcStatus(parsed));
    return reactor;
  }
  PsCore::CallId id =
      core->Pull(&state->pull, WaitDeadline(ctx),
                 // The values are copied from the store straight into the reply's slice.
                 AllocatePayload(state.get()),
                 [reactor, resp, state](absl::StatusOr<proto::PullResponse> reply) {
                   if (reply.ok()) {
                     *resp = BuildMessage(*reply, kPullReplyValuesField, std::move(state->payload));
                   }
                   reactor->Finish(ToGrpcStatus(reply.status()));
                 });
  Reactor::Park(core.get(), *state, id);
  return reactor;
}

grpc::ServerUnaryReactor* PsService::PushPull(grpc::CallbackServerContext* ctx,
                                              const grpc::ByteBuffer* req, grpc::ByteBuffer* resp) {
  // Never parks; with replication, answered once the chain's tail has it.
  absl::StatusOr<std::shared_ptr<PsCore>> core = CoreFor(ctx, "PushPull");
  if (!core.ok()) return Finish(ctx, core.status());
  auto state = std::make_shared<CallState>();
  proto::PushPullRequest header;
  absl::Status status =
      ParseRaw(*req, {kPushPullValuesField}, &state->slices, &header, &state->fields);
  if (status.ok()) {
    absl::StatusOr<proto::PushPullResponse> reply = (*core)->PushPullMany(
        header, state->fields.Raw(kPushPullValuesField), AllocatePayload(state.get()));
    status = reply.status();
    if (reply.ok()) {
      *resp = BuildMessage(*reply, kPushPullReplyValuesField, std::move(state->payload));
    }
  }
  if (!status.ok()) return Finish(ctx, status);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  (*core)->AfterReplicated([reactor, state](absl::Status s) { reactor->Finish(ToGrpcStatus(s)); });
  return reactor;
}

grpc::ServerUnaryReactor* PsService::PushBatch(grpc::CallbackServerContext* ctx,
                                               const proto::PushBatchRequest* req,
                                               proto::PushBatchResponse* resp) {
  absl::StatusOr<std::shared_ptr<PsCore>> core = CoreFor(ctx, "PushBatch");
  if (!core.ok()) return Finish(ctx, core.status());
  *resp = (*core)->PushBatch(*req);
  grpc::ServerUnaryReactor* reactor = ctx->DefaultReactor();
  (*core)->AfterReplicated([reactor](absl::Status s) { reactor->Finish(ToGrpcStatus(s)); });
  return reactor;
}

grpc::ServerUnaryReactor* PsService::Info(grpc::CallbackServerContext* ctx,
                                          const proto::InfoRequest* req,
                                          proto::InfoResponse* resp) {
  absl::StatusOr<std::shared_ptr<PsCore>> core = CoreFor(ctx, "Info");
  if (!core.ok()) return Finish(ctx, core.status());
  absl::StatusOr<proto::InfoResponse> reply = (*core)->Info(*req);
  if (reply.ok()) *resp = std::move(*reply);
  return Finish(ctx, reply.status());
}

grpc::ServerUnaryReactor* PsService::Heartbeat(grpc::CallbackServerContext* ctx,
                                               const proto::HeartbeatRequest* req,
                                               proto::HeartbeatResponse* resp) {
  absl::StatusOr<std::shared_ptr<PsCore>> core = CoreFor(ctx, "Heartbeat");
  if (!core.ok()) return Finish(ctx, core.status());
  absl::StatusOr<proto::HeartbeatResponse> reply = (*core)->Heartbeat(*req);
  if (reply.ok()) *resp = std::move(*reply);
  return Finish(ctx, reply.status());
}

grpc::ServerUnaryReactor* PsService::Stats(grpc::CallbackServerContext* ctx,
                                           const proto::StatsRequest*, proto::StatsResponse* resp) {
  int shard = -1;
  absl::StatusOr<std::shared_ptr<PsCore>> core = CoreFor(ctx, "Stats", &shard);
  if (!core.ok()) return Finish(ctx, core.status());
  *resp = (*core)->Stats();
  if (std::optional<ReplicaLink::Stats> link = host_->LinkStats(shard)) {
    proto::ReplicationStats* r = resp->mutable_replication();
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
  return Finish(ctx, absl::OkStatus());
}

}  // namespace ps
