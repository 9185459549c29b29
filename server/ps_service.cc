#include "server/ps_service.h"

#include <limits>
#include <memory>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/raw_message.h"
#include "common/table_def.h"
#include "common/wire.h"

namespace ps {
namespace {

// Field numbers of the large bytes fields (see proto/ps.proto).
constexpr int kPushKeyList = 3, kPushValues = 4;
constexpr int kPullKeyList = 3;
constexpr int kPullReplyValues = 1;
constexpr uint64_t kNoLiveWorkers = std::numeric_limits<uint64_t>::max();

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

// The keys of a request: its ranges, or its packed key list (viewed in place
// when aligned, else copied into *storage).
template <typename Request>
absl::StatusOr<KeySpec> KeysOf(const Request& header, const SegmentedBytes& key_list,
                               std::string* flat, std::vector<uint64_t>* storage) {
  if (!key_list.empty()) {
    if (header.ranges_size() > 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("request for table '", header.table(), "' has both ranges and key_list"));
    }
    auto keys = DecodeArray<uint64_t>(key_list.Flatten(flat), storage, "key_list");
    if (!keys.ok()) return keys.status();
    return KeySpec::List(*keys);
  }
  if (header.ranges_size() == 0) {
    return absl::InvalidArgumentError(absl::StrCat("request for table '", header.table(),
                                                   "' names no keys (ranges or key_list)"));
  }
  std::vector<KeySpec::Range> ranges;
  ranges.reserve(header.ranges_size());
  for (const proto::KeyRange& r : header.ranges()) ranges.push_back({r.begin(), r.end()});
  return KeySpec::Ranges(std::move(ranges));
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

bool IsBsp(proto::Consistency consistency, uint32_t staleness) {
  return consistency == proto::CONSISTENCY_BOUNDED && staleness == 0;
}

}  // namespace

// A push's keys and values, decoded. The views in `keys` and `values` point
// into the request's bytes or the storage fields, so the object is never
// moved once decoded.
struct PsService::PushBody {
  std::string flat_keys, flat_values;
  std::vector<uint64_t> key_storage;
  std::vector<float> value_storage;
  bool clock_only = false;  // neither keys nor values: only advances the clock
  KeySpec keys;
  absl::Span<const float> values;
};

// A raw push, parsed; `body` points into `slices`.
struct PsService::PushCall {
  grpc::ServerUnaryReactor* reactor = nullptr;
  grpc::ByteBuffer* resp = nullptr;
  std::vector<grpc::Slice> slices;
  proto::PushRequest header;
  SplitFields fields;
  PushBody body;
};

struct PsService::PullCall {
  grpc::ServerUnaryReactor* reactor = nullptr;
  grpc::ByteBuffer* resp = nullptr;
  std::vector<grpc::Slice> slices;
  proto::PullRequest header;
  SplitFields fields;
  std::string flat_keys;
  std::vector<uint64_t> key_storage;
  KeySpec keys;
  absl::Time arrived;
};

PsService::PsService(ShardStore* store, ClockTracker* clocks, PullStats* stats,
                     int64_t max_message_bytes)
    : store_(store), clocks_(clocks), stats_(stats), max_message_bytes_(max_message_bytes) {}

grpc::ServerUnaryReactor* PsService::CreateTable(grpc::CallbackServerContext* ctx,
                                                 const proto::CreateTableRequest* req,
                                                 proto::CreateTableResponse* resp) {
  return Finish(ctx, DoCreateTable(*req, resp));
}

absl::Status PsService::DoCreateTable(const proto::CreateTableRequest& req,
                                      proto::CreateTableResponse* resp) {
  absl::StatusOr<bool> created = store_->CreateTable(req.table());
  if (!created.ok()) return created.status();
  resp->set_created(*created);
  if (*created) {
    LogEvent(absl::StrCat("ps_server ", store_->server_index(), " ", address_),
             absl::StrCat("table created: ", TableDefSummary(req.table())));
  }
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* PsService::Push(grpc::CallbackServerContext* ctx,
                                          const grpc::ByteBuffer* req, grpc::ByteBuffer* resp) {
  auto call = std::make_shared<PushCall>();
  call->reactor = ctx->DefaultReactor();
  call->resp = resp;
  absl::Status parsed =
      ParseRaw(*req, {kPushKeyList, kPushValues}, &call->slices, &call->header, &call->fields);
  const proto::PushRequest& h = call->header;
  if (parsed.ok()) {
    parsed =
        DecodePush(h, call->fields.Raw(kPushKeyList), call->fields.Raw(kPushValues), &call->body);
  }
  if (!parsed.ok()) {
    call->reactor->Finish(ToGrpcStatus(parsed));
    return call->reactor;
  }
  grpc::ServerUnaryReactor* reactor = call->reactor;
  if (!IsBsp(h.consistency(), h.staleness())) {
    reactor->Finish(ToGrpcStatus(ApplyPush(*call)));
    return reactor;
  }
  // BSP: apply once everyone has read this round's parameters.
  clocks_->WhenPushReady(h.table(), h.worker_id(), h.clock(), WaitDeadline(ctx),
                         [this, call](absl::Status status, uint64_t) {
                           if (status.ok()) status = ApplyPush(*call);
                           call->reactor->Finish(ToGrpcStatus(status));
                         });
  return reactor;
}

absl::Status PsService::DecodePush(const proto::PushRequest& h, const SegmentedBytes& key_list,
                                   const SegmentedBytes& values, PushBody* body) const {
  body->clock_only = h.ranges_size() == 0 && key_list.empty() && values.empty();
  if (body->clock_only) return store_->GetTableDef(h.table()).status();
  absl::StatusOr<KeySpec> keys = KeysOf(h, key_list, &body->flat_keys, &body->key_storage);
  if (!keys.ok()) return keys.status();
  body->keys = *std::move(keys);
  auto decoded = DecodeArray<float>(values.Flatten(&body->flat_values), &body->value_storage,
                                    absl::StrCat("push values for table '", h.table(), "'"));
  if (!decoded.ok()) return decoded.status();
  body->values = *decoded;
  return absl::OkStatus();
}

absl::Status PsService::ApplyPush(PushCall& call) {
  absl::StatusOr<proto::PushResponse> reply = Apply(call.header, call.body);
  if (!reply.ok()) return reply.status();
  *call.resp = SerializeToBuffer(*reply);
  return absl::OkStatus();
}

absl::StatusOr<proto::PushResponse> PsService::Apply(const proto::PushRequest& h,
                                                     const PushBody& body) {
  proto::PushResponse reply;
  if (!body.clock_only) {
    auto result = store_->Push(h.table(), body.keys, body.values, h.worker_id(), h.request_id());
    if (!result.ok()) return result.status();
    reply.set_duplicate(result->duplicate);
    reply.set_version(result->version);
  }
  if (!reply.duplicate()) {
    clocks_->PushApplied(h.table(), h.worker_id(), h.clock(), h.round_parts());
  }
  return reply;
}

grpc::ServerUnaryReactor* PsService::PushBatch(grpc::CallbackServerContext* ctx,
                                               const proto::PushBatchRequest* req,
                                               proto::PushBatchResponse* resp) {
  for (const proto::PushRequest& push : req->pushes()) {
    absl::StatusOr<proto::PushResponse> reply = ApplyBatched(push);
    proto::PushResponse* out = resp->add_results();
    if (reply.ok()) {
      *out = *std::move(reply);
    } else {
      out->set_code(static_cast<int32_t>(reply.status().code()));
      out->set_message(std::string(reply.status().message()));
    }
  }
  return Finish(ctx, absl::OkStatus());
}

absl::StatusOr<proto::PushResponse> PsService::ApplyBatched(const proto::PushRequest& push) {
  if (IsBsp(push.consistency(), push.staleness())) {
    return absl::InvalidArgumentError(
        absl::StrCat("push to table '", push.table(),
                     "': BSP pushes wait for other workers and cannot be batched"));
  }
  SegmentedBytes key_list, values;
  key_list.Append(push.key_list());
  values.Append(push.values());
  PushBody body;
  if (absl::Status s = DecodePush(push, key_list, values, &body); !s.ok()) return s;
  return Apply(push, body);
}

grpc::ServerUnaryReactor* PsService::Pull(grpc::CallbackServerContext* ctx,
                                          const grpc::ByteBuffer* req, grpc::ByteBuffer* resp) {
  auto call = std::make_shared<PullCall>();
  call->reactor = ctx->DefaultReactor();
  call->resp = resp;
  call->arrived = absl::Now();
  absl::Status parsed = ParseRaw(*req, {kPullKeyList}, &call->slices, &call->header, &call->fields);
  if (parsed.ok()) {
    absl::StatusOr<KeySpec> keys =
        KeysOf(call->header, call->fields.Raw(kPullKeyList), &call->flat_keys, &call->key_storage);
    parsed = keys.status();
    if (keys.ok()) call->keys = *std::move(keys);
  }
  grpc::ServerUnaryReactor* reactor = call->reactor;
  if (!parsed.ok()) {
    reactor->Finish(ToGrpcStatus(parsed));
    return reactor;
  }
  const proto::PullRequest& h = call->header;
  if (h.consistency() == proto::CONSISTENCY_ASYNC) {
    reactor->Finish(ToGrpcStatus(ServePull(*call, clocks_->ParamsClock(h.table()))));
    return reactor;
  }
  clocks_->WhenPullReady(h.table(), h.worker_id(), h.clock(), h.staleness(), WaitDeadline(ctx),
                         [this, call](absl::Status status, uint64_t params_clock) {
                           if (status.ok()) status = ServePull(*call, params_clock);
                           call->reactor->Finish(ToGrpcStatus(status));
                         });
  return reactor;
}

absl::Status PsService::ServePull(PullCall& call, uint64_t params_clock) {
  const proto::PullRequest& h = call.header;
  auto def = store_->GetTableDef(h.table());
  if (!def.ok()) return def.status();
  const uint64_t bytes = call.keys.size() * def->width() * sizeof(float);
  if (bytes > static_cast<uint64_t>(max_message_bytes_)) {
    return absl::ResourceExhaustedError(
        absl::StrCat("pull of ", call.keys.size(), " keys of table '", h.table(), "' is ", bytes,
                     " bytes, over this server's message limit of ", max_message_bytes_,
                     " bytes (ps_server --max_message_mb); split the request"));
  }
  // The values are copied from the store straight into the reply's slice.
  grpc::Slice payload;
  auto version = store_->Pull(h.table(), call.keys, [&payload](size_t n) {
    payload = grpc::Slice(n);
    return reinterpret_cast<char*>(const_cast<uint8_t*>(payload.begin()));
  });
  if (!version.ok()) return version.status();
  const absl::Duration waited = absl::Now() - call.arrived;
  clocks_->PullServed(h.table(), h.worker_id(), h.clock());
  // Without live workers nothing is tracked: the parameters are current.
  // Staleness as the server sees it: its clock for the table (the furthest
  // any worker has completed) minus the clock of the parameters returned.
  const uint64_t server_clock = clocks_->ServerClock(h.table());
  const uint64_t clock =
      params_clock == kNoLiveWorkers ? std::max(h.clock(), server_clock) : params_clock;
  stats_->Record(h.table(), server_clock > clock ? server_clock - clock : 0, waited);
  proto::PullResponse reply;
  reply.set_version(*version);
  reply.set_params_clock(clock);
  reply.set_wait_us(static_cast<uint64_t>(absl::ToInt64Microseconds(waited)));
  *call.resp = BuildMessage(reply, kPullReplyValues, std::move(payload));
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* PsService::Info(grpc::CallbackServerContext* ctx,
                                          const proto::InfoRequest*, proto::InfoResponse* resp) {
  resp->set_server_index(store_->server_index());
  resp->set_num_servers(store_->placement().num_servers());
  resp->set_virtual_nodes(store_->placement().config().virtual_nodes);
  resp->set_slice_size(store_->placement().config().slice_size);
  resp->set_address(address_);
  return Finish(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* PsService::Heartbeat(grpc::CallbackServerContext* ctx,
                                               const proto::HeartbeatRequest* req,
                                               proto::HeartbeatResponse* resp) {
  if (req->leaving()) {
    clocks_->Leave(req->worker_id());
  } else {
    const absl::Duration lease =
        req->lease_ms() > 0 ? absl::Milliseconds(req->lease_ms()) : absl::Seconds(5);
    resp->set_live_workers(clocks_->Heartbeat(req->worker_id(), req->clock(), lease));
  }
  return Finish(ctx, absl::OkStatus());
}

grpc::ServerUnaryReactor* PsService::Stats(grpc::CallbackServerContext* ctx,
                                           const proto::StatsRequest*, proto::StatsResponse* resp) {
  for (proto::TableStats& t : stats_->Snapshot()) {
    t.set_server_clock(clocks_->ServerClock(t.table()));
    *resp->add_tables() = std::move(t);
  }
  return Finish(ctx, absl::OkStatus());
}

}  // namespace ps
