#include "worker/ps_client.h"

#include <algorithm>
#include <cstring>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "common/grpc_status.h"
#include "common/wire.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/support/channel_arguments.h"

namespace ps {

// One RPC to one server, with what the caller needs to use its answer.
template <typename Request, typename Response>
struct PsClient::Call {
  int server = 0;
  size_t op = 0;  // index of the op it belongs to (for Versions)
  Request request;
  Response response;
  grpc::Status status;
  absl::Span<float> out;          // pull: the op's output span
  std::vector<size_t> positions;  // per range: its first key's index in the op;
                                  // per key (key-list ops): index in the caller's list
};

namespace {

bool Retryable(grpc::StatusCode code) {
  return code == grpc::StatusCode::UNAVAILABLE || code == grpc::StatusCode::DEADLINE_EXCEEDED;
}

std::chrono::system_clock::time_point Deadline(absl::Duration d) {
  return absl::ToChronoTime(absl::Now() + d);
}

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

PsClient::~PsClient() = default;

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
  for (const std::string& address : options.servers) {
    client->stubs_.push_back(proto::ParameterServer::NewStub(
        grpc::CreateCustomChannel(address, grpc::InsecureChannelCredentials(), args)));
  }

  using InfoCall = Call<proto::InfoRequest, proto::InfoResponse>;
  std::vector<InfoCall> calls(options.servers.size());
  for (size_t s = 0; s < calls.size(); ++s) calls[s].server = static_cast<int>(s);
  // Servers may still be starting: wait for them, up to connect_timeout.
  absl::Mutex mu;
  size_t remaining = calls.size();
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
  for (InfoCall& call : calls) {
    contexts.push_back(std::make_unique<grpc::ClientContext>());
    contexts.back()->set_wait_for_ready(true);
    contexts.back()->set_deadline(Deadline(options.connect_timeout));
    client->stubs_[call.server]->async()->Info(contexts.back().get(), &call.request, &call.response,
                                               [&, c = &call](grpc::Status s) {
                                                 c->status = std::move(s);
                                                 absl::MutexLock lock(&mu);
                                                 --remaining;
                                               });
  }
  {
    absl::MutexLock lock(&mu);
    mu.Await(absl::Condition(
        +[](size_t* r) { return *r == 0; }, &remaining));
  }
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
  return client;
}

template <typename Request, typename Response, typename Method>
absl::Status PsClient::RunCalls(std::vector<Call<Request, Response>>& calls, const char* rpc_name,
                                Method method) {
  std::vector<size_t> pending(calls.size());
  std::iota(pending.begin(), pending.end(), 0);
  for (int attempt = 1; !pending.empty(); ++attempt) {
    absl::Mutex mu;
    size_t remaining = pending.size();
    std::vector<std::unique_ptr<grpc::ClientContext>> contexts;
    contexts.reserve(pending.size());
    for (size_t i : pending) {
      Call<Request, Response>& call = calls[i];
      contexts.push_back(std::make_unique<grpc::ClientContext>());
      contexts.back()->set_deadline(Deadline(options_.timeout));
      call.response.Clear();
      method(stubs_[call.server].get(), contexts.back().get(), &call.request, &call.response,
             [&mu, &remaining, &call](grpc::Status s) {
               call.status = std::move(s);
               absl::MutexLock lock(&mu);
               --remaining;
             });
    }
    {
      absl::MutexLock lock(&mu);
      mu.Await(absl::Condition(
          +[](size_t* r) { return *r == 0; }, &remaining));
    }
    std::vector<size_t> retry;
    for (size_t i : pending) {
      const grpc::Status& status = calls[i].status;
      if (status.ok()) continue;
      if (Retryable(status.error_code()) && attempt < options_.max_attempts) {
        retry.push_back(i);
        continue;
      }
      const std::string name = ServerName(calls[i].server);
      if (Retryable(status.error_code())) {
        return absl::Status(
            FromGrpcStatus(status).code(),
            absl::StrCat(name, ": ", rpc_name, " failed after ", attempt, " attempt(s) of ",
                         absl::FormatDuration(options_.timeout), " each (", status.error_message(),
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

absl::Status PsClient::CreateTable(const proto::TableDef& def) {
  using CreateCall = Call<proto::CreateTableRequest, proto::CreateTableResponse>;
  std::vector<CreateCall> calls(stubs_.size());
  for (size_t s = 0; s < calls.size(); ++s) {
    calls[s].server = static_cast<int>(s);
    *calls[s].request.mutable_table() = def;
  }
  return RunCalls(calls, "CreateTable",
                  [](auto* stub, auto* ctx, auto* req, auto* resp, auto done) {
                    stub->async()->CreateTable(ctx, req, resp, std::move(done));
                  });
}

absl::Status PsClient::Pull(absl::Span<const PullRange> ops, Versions* versions) {
  using PullCall = Call<proto::PullRequest, proto::PullResponse>;
  std::vector<PullCall> calls;
  for (size_t i = 0; i < ops.size(); ++i) {
    const PullRange& op = ops[i];
    absl::StatusOr<uint64_t> width =
        RangeWidth("pull of", op.table, op.begin, op.end, op.out.size());
    if (!width.ok()) return width.status();
    if (*width == 0) continue;
    for (RangeChunk& chunk : PlanRanges(placement_, op.table, op.begin, op.end, *width,
                                        options_.max_values_per_request)) {
      PullCall& call = calls.emplace_back();
      call.server = chunk.server;
      call.op = i;
      call.request.set_table(op.table);
      call.request.set_worker_id(options_.worker_id);
      for (const auto& [b, e] : chunk.ranges) {
        proto::KeyRange* r = call.request.add_ranges();
        r->set_begin(b);
        r->set_end(e);
        call.positions.push_back(b - op.begin);
      }
      call.out = op.out;
    }
  }
  absl::Status status =
      RunCalls(calls, "Pull", [](auto* stub, auto* ctx, auto* req, auto* resp, auto done) {
        stub->async()->Pull(ctx, req, resp, std::move(done));
      });
  if (!status.ok()) return status;
  if (versions != nullptr) versions->assign(ops.size() * stubs_.size(), 0);
  for (PullCall& call : calls) {
    // Values come back range after range; scatter them to the op's span.
    const std::string& bytes = call.response.values();
    const uint64_t width = call.out.size() / (ops[call.op].end - ops[call.op].begin);
    uint64_t expected = 0;
    for (const proto::KeyRange& r : call.request.ranges())
      expected += (r.end() - r.begin()) * width;
    if (bytes.size() != expected * sizeof(float)) {
      return absl::InternalError(absl::StrCat(ServerName(call.server), " pull reply has ",
                                              bytes.size(), " bytes, expected ",
                                              expected * sizeof(float)));
    }
    uint64_t at = 0;
    for (int j = 0; j < call.request.ranges_size(); ++j) {
      const proto::KeyRange& r = call.request.ranges(j);
      const uint64_t n = (r.end() - r.begin()) * width;
      std::memcpy(call.out.data() + call.positions[j] * width, bytes.data() + at * sizeof(float),
                  n * sizeof(float));
      at += n;
    }
    RecordVersion(versions, call.op, num_servers(), call.server, call.response.version());
  }
  return absl::OkStatus();
}

absl::Status PsClient::Push(absl::Span<const PushRange> ops, uint64_t clock, Versions* versions) {
  using PushCall = Call<proto::PushRequest, proto::PushResponse>;
  std::vector<PushCall> calls;
  for (size_t i = 0; i < ops.size(); ++i) {
    const PushRange& op = ops[i];
    absl::StatusOr<uint64_t> width =
        RangeWidth("push to", op.table, op.begin, op.end, op.grads.size());
    if (!width.ok()) return width.status();
    if (*width == 0) continue;
    for (RangeChunk& chunk : PlanRanges(placement_, op.table, op.begin, op.end, *width,
                                        options_.max_values_per_request)) {
      PushCall& call = calls.emplace_back();
      call.server = chunk.server;
      call.op = i;
      call.request.set_table(op.table);
      uint64_t values = 0;
      for (const auto& [b, e] : chunk.ranges) values += (e - b) * *width;
      std::string* bytes = call.request.mutable_values();
      bytes->resize(values * sizeof(float));
      uint64_t at = 0;
      for (const auto& [b, e] : chunk.ranges) {
        proto::KeyRange* r = call.request.add_ranges();
        r->set_begin(b);
        r->set_end(e);
        const uint64_t n = (e - b) * *width;
        std::memcpy(&(*bytes)[at * sizeof(float)], op.grads.data() + (b - op.begin) * *width,
                    n * sizeof(float));
        at += n;
      }
      call.request.set_worker_id(options_.worker_id);
      call.request.set_clock(clock);
      call.request.set_request_id(next_request_id_.fetch_add(1));
    }
  }
  absl::Status status =
      RunCalls(calls, "Push", [](auto* stub, auto* ctx, auto* req, auto* resp, auto done) {
        stub->async()->Push(ctx, req, resp, std::move(done));
      });
  if (!status.ok()) return status;
  if (versions != nullptr) {
    versions->assign(ops.size() * stubs_.size(), 0);
    for (const PushCall& call : calls) {
      RecordVersion(versions, call.op, num_servers(), call.server, call.response.version());
    }
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

}  // namespace

absl::Status PsClient::PullKeys(const std::string& table, absl::Span<const uint64_t> keys,
                                uint32_t width, absl::Span<float> out) {
  if (absl::Status s = CheckKeyOp("pull of", table, keys.size(), width, out.size()); !s.ok()) {
    return s;
  }
  using PullCall = Call<proto::PullRequest, proto::PullResponse>;
  std::vector<PullCall> calls;
  const uint64_t keys_per_chunk = std::max<uint64_t>(1, options_.max_values_per_request / width);
  for (auto& [server, positions] : GroupKeys(placement_, table, keys, keys_per_chunk)) {
    PullCall& call = calls.emplace_back();
    call.server = server;
    call.request.set_table(table);
    call.request.set_worker_id(options_.worker_id);
    std::vector<uint64_t> part(positions.size());
    for (size_t j = 0; j < positions.size(); ++j) part[j] = keys[positions[j]];
    EncodeArray<uint64_t>(part, call.request.mutable_key_list());
    call.positions = std::move(positions);
  }
  absl::Status status =
      RunCalls(calls, "Pull", [](auto* stub, auto* ctx, auto* req, auto* resp, auto done) {
        stub->async()->Pull(ctx, req, resp, std::move(done));
      });
  if (!status.ok()) return status;
  std::vector<float> values;
  for (PullCall& call : calls) {
    values.resize(call.positions.size() * width);
    absl::Status s = DecodeArrayInto<float>(call.response.values(), absl::MakeSpan(values),
                                            absl::StrCat(ServerName(call.server), " pull reply"));
    if (!s.ok()) return s;
    for (size_t j = 0; j < call.positions.size(); ++j) {
      std::copy_n(values.data() + j * width, width, out.data() + call.positions[j] * width);
    }
  }
  return absl::OkStatus();
}

absl::Status PsClient::PushKeys(const std::string& table, absl::Span<const uint64_t> keys,
                                uint32_t width, absl::Span<const float> grads, uint64_t clock) {
  if (absl::Status s = CheckKeyOp("push to", table, keys.size(), width, grads.size()); !s.ok()) {
    return s;
  }
  using PushCall = Call<proto::PushRequest, proto::PushResponse>;
  std::vector<PushCall> calls;
  const uint64_t keys_per_chunk = std::max<uint64_t>(1, options_.max_values_per_request / width);
  for (auto& [server, positions] : GroupKeys(placement_, table, keys, keys_per_chunk)) {
    PushCall& call = calls.emplace_back();
    call.server = server;
    call.request.set_table(table);
    std::vector<uint64_t> part(positions.size());
    std::vector<float> values(positions.size() * width);
    for (size_t j = 0; j < positions.size(); ++j) {
      part[j] = keys[positions[j]];
      std::copy_n(grads.data() + positions[j] * width, width, values.data() + j * width);
    }
    EncodeArray<uint64_t>(part, call.request.mutable_key_list());
    EncodeArray<float>(values, call.request.mutable_values());
    call.request.set_worker_id(options_.worker_id);
    call.request.set_clock(clock);
    call.request.set_request_id(next_request_id_.fetch_add(1));
  }
  return RunCalls(calls, "Push", [](auto* stub, auto* ctx, auto* req, auto* resp, auto done) {
    stub->async()->Push(ctx, req, resp, std::move(done));
  });
}

}  // namespace ps
