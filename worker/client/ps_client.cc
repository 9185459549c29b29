#include "worker/client/ps_client.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/log.h"
#include "common/raw_message.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"
#include "worker/client/ps_client_calls.h"

namespace ps {

namespace {

// One request's worth of a dense op: ranges on one server, at most
// max_values values in all (a range longer than that is cut).
struct RangeChunk {
  int server = 0;
  std::vector<std::pair<uint64_t, uint64_t>> ranges;
};

std::vector<RangeChunk> PlanRanges(const Placement& placement, const std::string& table,
                                   uint64_t begin, uint64_t end, uint64_t width,
                                   uint64_t max_values) {
  const uint64_t max_keys = std::max<uint64_t>(1, max_values / width);
  std::vector<std::vector<RangePart>> by_server(placement.num_servers());
  for (const RangePart& part : placement.SplitRange(table, begin, end)) {
    by_server[part.owner].push_back(part);
  }
  std::vector<RangeChunk> chunks;
  for (int s = 0; s < placement.num_servers(); ++s) {
    uint64_t keys_in_chunk = max_keys;  // forces a new chunk first
    for (const RangePart& part : by_server[s]) {
      uint64_t k = part.begin;
      while (k < part.end) {
        if (keys_in_chunk == max_keys) {
          chunks.push_back({s, {}});
          keys_in_chunk = 0;
        }
        const uint64_t e = std::min(part.end, k + (max_keys - keys_in_chunk));
        chunks.back().ranges.emplace_back(k, e);
        keys_in_chunk += e - k;
        k = e;
      }
    }
  }
  return chunks;
}

// Values per key of a dense op: 0 for an empty range. INVALID_ARGUMENT for a
// reversed range or a value count that is not a multiple of the key count.
absl::StatusOr<uint64_t> RangeWidth(const char* what, const std::string& table, uint64_t begin,
                                    uint64_t end, size_t values) {
  if (end < begin) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " table '", table, "': range [", begin, ", ", end, ") is reversed"));
  }
  const uint64_t n = end - begin;
  if (n == 0) return 0;
  if (values % n != 0 || values == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, " table '", table, "': ", values,
                                                   " values for ", n,
                                                   " keys is not a whole number per key"));
  }
  return values / n;
}

void RecordVersion(Versions* versions, size_t op, int num_servers, int server, uint64_t v) {
  if (versions == nullptr) return;
  uint64_t& slot = (*versions)[op * num_servers + server];
  slot = std::max(slot, v);
}

}  // namespace

PsClient::PsClient(const PsClientOptions& options)
    : options_(options),
      placement_(static_cast<int>(options.servers.size()), options.placement),
      // Request ids start from the wall clock so that a restarted worker with
      // the same id never reuses an id the servers have already seen.
      next_request_id_(static_cast<uint64_t>(absl::ToUnixMicros(absl::Now())) << 8) {}

PsClient::~PsClient() { Leave(); }

std::string PsClient::ServerName(int server) const {
  return absl::StrCat("server ", server, " (", options_.servers[server], ")");
}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(const PsClientOptions& options) {
  if (options.servers.empty()) {
    return absl::InvalidArgumentError("no servers given; see --servers");
  }
  std::unique_ptr<PsClient> client(new PsClient(options));
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(-1);
  args.SetMaxSendMessageSize(-1);
  // PsClient retries by itself, with the same request id.
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  for (const std::string& address : options.servers) {
    auto channel = grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args);
    client->stubs_.push_back(proto::ParameterServer::NewStub(channel));
    client->generic_stubs_.push_back(std::make_unique<grpc::GenericStub>(channel));
    client->batchers_.push_back(std::make_unique<ServerBatcher>());
  }

  using InfoCall = Call<proto::InfoRequest, proto::InfoResponse>;
  std::vector<InfoCall> calls(options.servers.size());
  for (size_t s = 0; s < calls.size(); ++s) calls[s].server = static_cast<int>(s);
  // Servers may still be starting: wait for them, up to connect_timeout.
  absl::BlockingCounter countdown(static_cast<int>(calls.size()));
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  for (InfoCall& call : calls) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_wait_for_ready(true);
    contexts.back()->set_deadline(ps_client_internal::Deadline(options.connect_timeout));
    client->stubs_[call.server]->async()->Info(contexts.back().get(), &call.request, &call.response,
                                               [&countdown, c = &call](grpc::Status s) {
                                                 c->status = std::move(s);
                                                 countdown.DecrementCount();
                                               });
  }
  countdown.Wait();
  for (const InfoCall& call : calls) {
    const std::string name = client->ServerName(call.server);
    if (!call.status.ok()) {
      return absl::Status(
          FromGrpcStatus(call.status).code(),
          absl::StrCat(name, " did not answer within ",
                       absl::FormatDuration(options.connect_timeout), " (",
                       call.status.error_message(), "); is it running? see --servers"));
    }
    const proto::InfoResponse& info = call.response;
    if (info.server_index() != static_cast<uint32_t>(call.server) ||
        info.num_servers() != options.servers.size() ||
        info.slice_size() != options.placement.slice_size ||
        info.virtual_nodes() != static_cast<uint32_t>(options.placement.virtual_nodes)) {
      return absl::FailedPreconditionError(absl::StrCat(
          name, " reports shard ", info.server_index(), " of ", info.num_servers(), " (slice_size ",
          info.slice_size(), ", virtual_nodes ", info.virtual_nodes(),
          ") but this worker expects shard ", call.server, " of ", options.servers.size(),
          " (slice_size ", options.placement.slice_size, ", virtual_nodes ",
          options.placement.virtual_nodes, "); start every process with the same --servers"));
    }
  }
  if (options.lease > absl::ZeroDuration()) {
    // Registered everywhere before the first pull, then renewed in the background.
    absl::StatusOr<int> live = client->HeartbeatAll(/*leaving=*/false);
    if (!live.ok()) return live.status();
    client->heartbeat_thread_ = std::thread([c = client.get()] { c->HeartbeatLoop(); });
  }
  return client;
}

absl::Status PsClient::RunRaw(std::vector<RawCall>& calls, const char* rpc_name,
                              const std::string& path) {
  return RunCalls(calls, rpc_name, DataPolicy(),
                  [this, &path](int server, grpc::ClientContext* ctx, const grpc::ByteBuffer* req,
                                grpc::ByteBuffer* resp, std::function<void(grpc::Status)> done) {
                    generic_stubs_[server]->UnaryCall(ctx, path, grpc::StubOptions(), req, resp,
                                                      std::move(done));
                  });
}

absl::Status PsClient::CreateTable(const proto::TableDef& def) {
  using CreateCall = Call<proto::CreateTableRequest, proto::CreateTableResponse>;
  std::vector<CreateCall> calls(stubs_.size());
  for (size_t s = 0; s < calls.size(); ++s) {
    calls[s].server = static_cast<int>(s);
    *calls[s].request.mutable_table() = def;
  }
  return RunCalls(calls, "CreateTable", DataPolicy(),
                  [this](int server, grpc::ClientContext* ctx, const auto* req, auto* resp,
                         std::function<void(grpc::Status)> done) {
                    stubs_[server]->async()->CreateTable(ctx, req, resp, std::move(done));
                  });
}

namespace {

const std::string kPushMethod = "/ps.proto.ParameterServer/Push";
const std::string kPullMethod = "/ps.proto.ParameterServer/Pull";
constexpr int kPushValuesField = 4;
constexpr int kPullReplyValuesField = 1;

grpc::ByteBuffer SerializeToBuffer(const google::protobuf::MessageLite& message) {
  grpc::Slice slice(message.SerializeAsString());
  return grpc::ByteBuffer(&slice, 1);
}

template <typename Header>
void AddRange(Header* header, uint64_t begin, uint64_t end) {
  proto::KeyRange* r = header->add_ranges();
  r->set_begin(begin);
  r->set_end(end);
}

}  // namespace

absl::Status PsClient::ScatterPullReplies(const std::vector<RawCall>& calls, size_t num_ops,
                                          PullInfo* info) {
  Versions* versions = info != nullptr ? &info->versions : nullptr;
  if (info != nullptr) {
    info->versions.assign(num_ops * stubs_.size(), 0);
    info->params_clock = std::numeric_limits<uint64_t>::max();
    info->waited = absl::ZeroDuration();
  }
  std::vector<grpc::Slice> slices;
  SplitFields fields;
  proto::PullResponse header;
  for (const RawCall& call : calls) {
    const std::string name = ServerName(call.server);
    if (!call.response.Dump(&slices).ok()) {
      return absl::InternalError(absl::StrCat(name, ": pull reply could not be read"));
    }
    absl::Status s = SplitMessage(slices, {kPullReplyValuesField}, &fields);
    if (!s.ok()) return absl::InternalError(absl::StrCat(name, ": pull reply: ", s.message()));
    if (!header.ParseFromString(fields.header)) {
      return absl::InternalError(absl::StrCat(name, ": pull reply does not parse"));
    }
    const SegmentedBytes& values = fields.Raw(kPullReplyValuesField);
    uint64_t expected = 0;
    for (const auto& [dst, n] : call.targets) expected += n;
    if (values.size() != expected * sizeof(float)) {
      return absl::InternalError(absl::StrCat(name, ": pull reply has ", values.size(),
                                              " bytes, expected ", expected * sizeof(float)));
    }
    SegmentedBytes::Reader reader(values);
    for (const auto& [dst, n] : call.targets) {
      reader.Read(n * sizeof(float), reinterpret_cast<char*>(dst));
    }
    RecordVersion(versions, call.op, num_servers(), call.server, header.version());
    if (info != nullptr) {
      info->params_clock = std::min(info->params_clock, header.params_clock());
      info->waited = std::max(info->waited, absl::Microseconds(header.wait_us()));
    }
  }
  return absl::OkStatus();
}

absl::Status PsClient::Pull(absl::Span<const PullRange> ops, uint64_t clock, PullInfo* info) {
  std::vector<RawCall> calls;
  for (size_t i = 0; i < ops.size(); ++i) {
    const PullRange& op = ops[i];
    absl::StatusOr<uint64_t> width =
        RangeWidth("pull of", op.table, op.begin, op.end, op.out.size());
    if (!width.ok()) return width.status();
    if (*width == 0) continue;
    for (RangeChunk& chunk : PlanRanges(placement_, op.table, op.begin, op.end, *width,
                                        options_.max_values_per_request)) {
      RawCall& call = calls.emplace_back();
      call.server = chunk.server;
      call.op = i;
      proto::PullRequest header;
      header.set_table(op.table);
      header.set_worker_id(options_.worker_id);
      header.set_clock(clock);
      header.set_consistency(options_.consistency);
      header.set_staleness(options_.staleness);
      for (const auto& [b, e] : chunk.ranges) {
        AddRange(&header, b, e);
        call.targets.emplace_back(op.out.data() + (b - op.begin) * *width, (e - b) * *width);
      }
      call.request = SerializeToBuffer(header);
    }
  }
  if (absl::Status s = RunRaw(calls, "Pull", kPullMethod); !s.ok()) return s;
  return ScatterPullReplies(calls, ops.size(), info);
}

absl::Status PsClient::Push(absl::Span<const PushRange> ops, uint64_t clock, Versions* versions) {
  // Plan every request first: the number of payload pieces gRPC will hold
  // references to must be known before the first is handed over.
  struct Planned {
    int server;
    size_t op;
    proto::PushRequest header;
    std::vector<absl::string_view> pieces;  // into the caller's gradients
  };
  std::vector<Planned> planned;
  size_t num_pieces = 0;
  for (size_t i = 0; i < ops.size(); ++i) {
    const PushRange& op = ops[i];
    absl::StatusOr<uint64_t> width =
        RangeWidth("push to", op.table, op.begin, op.end, op.grads.size());
    if (!width.ok()) return width.status();
    if (*width == 0) continue;
    const std::vector<RangeChunk> chunks =
        PlanRanges(placement_, op.table, op.begin, op.end, *width, options_.max_values_per_request);
    // The server advances this worker's clock for the table once all of its
    // parts of the round are in.
    std::vector<int> parts_per_server(stubs_.size(), 0);
    for (const RangeChunk& chunk : chunks) ++parts_per_server[chunk.server];
    for (const RangeChunk& chunk : chunks) {
      Planned& p = planned.emplace_back();
      p.server = chunk.server;
      p.op = i;
      p.header.set_table(op.table);
      p.header.set_worker_id(options_.worker_id);
      p.header.set_clock(clock);
      p.header.set_request_id(next_request_id_.fetch_add(1));
      p.header.set_consistency(options_.consistency);
      p.header.set_staleness(options_.staleness);
      p.header.set_round_parts(static_cast<uint32_t>(parts_per_server[chunk.server]));
      for (const auto& [b, e] : chunk.ranges) {
        AddRange(&p.header, b, e);
        p.pieces.emplace_back(
            reinterpret_cast<const char*>(op.grads.data() + (b - op.begin) * *width),
            (e - b) * *width * sizeof(float));
      }
      num_pieces += p.pieces.size();
    }
  }
  if (planned.size() == 1 && options_.consistency == proto::CONSISTENCY_ASYNC &&
      options_.batch_max_values > 0) {
    Planned& p = planned[0];
    uint64_t bytes = 0;
    for (absl::string_view piece : p.pieces) bytes += piece.size();
    if (bytes <= options_.batch_max_values * sizeof(float)) {
      BatchItem item;
      item.request = std::move(p.header);
      std::string* values = item.request.mutable_values();
      values->reserve(bytes);
      for (absl::string_view piece : p.pieces) values->append(piece.data(), piece.size());
      SubmitBatched(p.server, &item);
      if (!item.status.ok()) return item.status;
      if (versions != nullptr) {
        versions->assign(ops.size() * stubs_.size(), 0);
        RecordVersion(versions, p.op, num_servers(), p.server, item.response.version());
      }
      NotePushed(clock);
      return absl::OkStatus();
    }
  }
  // gRPC decrements this once per piece when it lets go of it; the
  // gradients are sent from the caller's memory, so Push returns only after.
  absl::BlockingCounter released(static_cast<int>(num_pieces));
  absl::Status status;
  {
    std::vector<RawCall> calls;
    for (Planned& p : planned) {
      RawCall& call = calls.emplace_back();
      call.server = p.server;
      call.op = p.op;
      call.request = BuildMessage(
          p.header, kPushValuesField, p.pieces,
          [](void* counter) { static_cast<absl::BlockingCounter*>(counter)->DecrementCount(); },
          &released);
    }
    status = RunRaw(calls, "Push", kPushMethod);
    if (status.ok()) status = RecordPushVersions(calls, ops.size(), versions);
  }
  // `calls` is gone; wait until gRPC has dropped its references too.
  released.Wait();
  if (status.ok()) NotePushed(clock);
  return status;
}

void PsClient::NotePushed(uint64_t clock) {
  uint64_t seen = clock_.load();
  while (seen < clock + 1 && !clock_.compare_exchange_weak(seen, clock + 1)) {
  }
}

void PsClient::SubmitBatched(int server, BatchItem* item) {
  ServerBatcher& b = *batchers_[server];
  {
    absl::MutexLock lock(&b.mu);
    b.queue.push_back(item);
  }
  while (true) {
    std::vector<BatchItem*> batch;
    {
      absl::MutexLock lock(&b.mu);
      auto ready = [item, &b]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(b.mu) { return item->done || !b.in_flight; };
      b.mu.Await(absl::Condition(&ready));
      if (item->done) return;
      // Lead: send everything queued, this item included.
      b.in_flight = true;
      batch.swap(b.queue);
    }
    SendBatch(server, batch);
    absl::MutexLock lock(&b.mu);
    for (BatchItem* done : batch) done->done = true;
    b.in_flight = false;
  }
}

void PsClient::SendBatch(int server, const std::vector<BatchItem*>& batch) {
  using BatchCall = Call<proto::PushBatchRequest, proto::PushBatchResponse>;
  std::vector<BatchCall> calls(1);
  calls[0].server = server;
  for (BatchItem* item : batch) *calls[0].request.add_pushes() = item->request;
  absl::Status status = RunCalls(calls, "PushBatch", DataPolicy(),
                                 [this](int s, grpc::ClientContext* ctx, const auto* req,
                                        auto* resp, std::function<void(grpc::Status)> done) {
                                   stubs_[s]->async()->PushBatch(ctx, req, resp, std::move(done));
                                 });
  const proto::PushBatchResponse& reply = calls[0].response;
  for (size_t i = 0; i < batch.size(); ++i) {
    if (!status.ok()) {
      batch[i]->status = status;
    } else if (i >= static_cast<size_t>(reply.results_size())) {
      batch[i]->status = absl::InternalError(
          absl::StrCat(ServerName(server), ": PushBatch reply has ", reply.results_size(),
                       " results for ", batch.size(), " pushes"));
    } else if (reply.results(i).code() != 0) {
      batch[i]->status =
          absl::Status(static_cast<absl::StatusCode>(reply.results(i).code()),
                       absl::StrCat(ServerName(server), ": Push: ", reply.results(i).message()));
    } else {
      batch[i]->response = reply.results(i);
    }
  }
}

absl::Status PsClient::RecordPushVersions(const std::vector<RawCall>& calls, size_t num_ops,
                                          Versions* versions) {
  if (versions == nullptr) return absl::OkStatus();
  versions->assign(num_ops * stubs_.size(), 0);
  proto::PushResponse reply;
  for (const RawCall& call : calls) {
    grpc::Slice flat;
    if (!call.response.DumpToSingleSlice(&flat).ok() ||
        !reply.ParseFromArray(flat.begin(), static_cast<int>(flat.size()))) {
      return absl::InternalError(
          absl::StrCat(ServerName(call.server), ": push reply does not parse"));
    }
    RecordVersion(versions, call.op, num_servers(), call.server, reply.version());
  }
  return absl::OkStatus();
}

namespace {

// Groups key indices by owning server, each group cut into chunks.
std::vector<std::pair<int, std::vector<size_t>>> GroupKeys(const Placement& placement,
                                                           const std::string& table,
                                                           absl::Span<const uint64_t> keys,
                                                           uint64_t keys_per_chunk) {
  std::vector<std::vector<size_t>> by_server(placement.num_servers());
  for (size_t i = 0; i < keys.size(); ++i) {
    by_server[placement.OwnerOfKey(table, keys[i])].push_back(i);
  }
  std::vector<std::pair<int, std::vector<size_t>>> groups;
  for (int s = 0; s < placement.num_servers(); ++s) {
    const auto& idx = by_server[s];
    for (size_t b = 0; b < idx.size(); b += keys_per_chunk) {
      const size_t e = std::min(idx.size(), b + keys_per_chunk);
      groups.emplace_back(s, std::vector<size_t>(idx.begin() + b, idx.begin() + e));
    }
  }
  return groups;
}

absl::Status CheckKeyOp(const char* what, const std::string& table, size_t keys, uint32_t width,
                        size_t values) {
  if (width == 0 || values != keys * width) {
    return absl::InvalidArgumentError(absl::StrCat(what, " table '", table, "': ", values,
                                                   " values for ", keys, " keys of width ", width,
                                                   " (expected ", keys * width, ")"));
  }
  return absl::OkStatus();
}

// The keys at `positions`, packed for the wire.
std::string PackKeys(absl::Span<const uint64_t> keys, const std::vector<size_t>& positions) {
  std::string packed(positions.size() * sizeof(uint64_t), '\0');
  for (size_t j = 0; j < positions.size(); ++j) {
    std::memcpy(&packed[j * sizeof(uint64_t)], &keys[positions[j]], sizeof(uint64_t));
  }
  return packed;
}

}  // namespace

absl::Status PsClient::PullKeys(const std::string& table, absl::Span<const uint64_t> keys,
                                uint32_t width, absl::Span<float> out) {
  if (absl::Status s = CheckKeyOp("pull of", table, keys.size(), width, out.size()); !s.ok()) {
    return s;
  }
  std::vector<RawCall> calls;
  const uint64_t keys_per_chunk = std::max<uint64_t>(1, options_.max_values_per_request / width);
  for (auto& [server, positions] : GroupKeys(placement_, table, keys, keys_per_chunk)) {
    RawCall& call = calls.emplace_back();
    call.server = server;
    proto::PullRequest header;
    header.set_table(table);
    header.set_worker_id(options_.worker_id);
    header.set_key_list(PackKeys(keys, positions));
    call.request = SerializeToBuffer(header);
    call.targets.reserve(positions.size());
    for (size_t p : positions) call.targets.emplace_back(out.data() + p * width, width);
  }
  if (absl::Status s = RunRaw(calls, "Pull", kPullMethod); !s.ok()) return s;
  return ScatterPullReplies(calls, 1, nullptr);
}

absl::Status PsClient::PushKeys(const std::string& table, absl::Span<const uint64_t> keys,
                                uint32_t width, absl::Span<const float> grads, uint64_t clock) {
  if (absl::Status s = CheckKeyOp("push to", table, keys.size(), width, grads.size()); !s.ok()) {
    return s;
  }
  std::vector<RawCall> calls;
  const uint64_t keys_per_chunk = std::max<uint64_t>(1, options_.max_values_per_request / width);
  auto groups = GroupKeys(placement_, table, keys, keys_per_chunk);
  std::vector<int> parts_per_server(stubs_.size(), 0);
  for (const auto& group : groups) ++parts_per_server[group.first];
  for (auto& [server, positions] : groups) {
    RawCall& call = calls.emplace_back();
    call.server = server;
    proto::PushRequest header;
    header.set_round_parts(static_cast<uint32_t>(parts_per_server[server]));
    header.set_table(table);
    header.set_key_list(PackKeys(keys, positions));
    header.set_worker_id(options_.worker_id);
    header.set_clock(clock);
    header.set_request_id(next_request_id_.fetch_add(1));
    // Gather this server's rows straight into the slice that is sent.
    grpc::Slice values(positions.size() * width * sizeof(float));
    float* dst = reinterpret_cast<float*>(const_cast<uint8_t*>(values.begin()));
    for (size_t j = 0; j < positions.size(); ++j) {
      std::memcpy(dst + j * width, grads.data() + positions[j] * width, width * sizeof(float));
    }
    call.request = BuildMessage(header, kPushValuesField, std::move(values));
  }
  return RunRaw(calls, "Push", kPushMethod);
}

}  // namespace ps
