// PsClient (see ps_client.h): connecting, tables, and the send-and-retry
// flow of pulls, pushes and push-pulls. Planning is the planner's, the
// requests' wire form the request codec's, small-push batching the
// PushBatcher's, the lease the LeaseKeeper's.
#include "worker/client/ps_client.h"

#include <algorithm>
#include <optional>
#include <random>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/table_layout.h"
#include "worker/client/cluster_check.h"
#include "worker/client/grpc_transport.h"

namespace ps {

namespace {

uint64_t DrawIncarnation() {
  std::random_device device;
  uint64_t value = 0;
  while (value == 0) value = (static_cast<uint64_t>(device()) << 32) ^ device();
  return value;
}

// What the servers must answer at connect for these options.
ClusterExpectation ExpectationOf(const PsClientOptions& options) {
  ClusterExpectation expected;
  expected.placement = options.placement;
  expected.connect_timeout = options.connect_timeout;
  expected.replicated = options.directory != nullptr;
  expected.timeout = options.timeout;
  expected.max_attempts = options.max_attempts;
  expected.retry_backoff = options.retry_backoff;
  return expected;
}

}  // namespace

void SpanFailoverWithRetries(PsClientOptions* options) {
  options->timeout = std::min(options->timeout, absl::Milliseconds(2500));
  options->max_attempts = 40;
}

PsClient::PsClient(const PsClientOptions& options, Transport* transport,
                   std::unique_ptr<Transport> owned_transport)
    : options_(options),
      clock_(options.clock != nullptr ? options.clock : Clock::Real()),
      owned_transport_(std::move(owned_transport)),
      transport_(transport),
      placement_(transport->num_servers(), options.placement),
      incarnation_(options.incarnation != 0 ? options.incarnation : DrawIncarnation()),
      runner_(transport, clock_, absl::StrCat("ps_client worker ", options.worker_id)),
      lease_(
          {options.worker_id, options.lease, incarnation_, options.timeout, options.retry_backoff},
          transport, &runner_, clock_),
      key_lists_(transport->num_servers(), options.key_lists_per_server),
      // Request ids start from the wall clock so that a restarted worker with
      // the same id never reuses an id the servers have already seen.
      next_request_id_(static_cast<uint64_t>(absl::ToUnixMicros(absl::Now())) << 8),
      batcher_(transport, &runner_, DataPolicy()) {}

PsClient::~PsClient() {
  {
    absl::MutexLock lock(&async_mu_);
    auto drained = [this]()
                       ABSL_EXCLUSIVE_LOCKS_REQUIRED(async_mu_) { return async_pending_ == 0; };
    async_mu_.Await(absl::Condition(&drained));
  }
  Leave();
}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(const PsClientOptions& options) {
  Clock* clock = options.clock != nullptr ? options.clock : Clock::Real();
  if (options.directory != nullptr) {
    return Connect(options,
                   std::make_unique<GrpcTransport>(options.directory, clock, options.security));
  }
  if (options.servers.empty()) {
    return absl::InvalidArgumentError("no servers given; see --servers");
  }
  return Connect(options,
                 std::make_unique<GrpcTransport>(options.servers, clock, options.security));
}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(const PsClientOptions& options,
                                                            std::unique_ptr<Transport> transport) {
  Transport* t = transport.get();
  return Start(options, t, std::move(transport));
}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(const PsClientOptions& options,
                                                            Transport* transport) {
  return Start(options, transport, nullptr);
}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Start(
    const PsClientOptions& options, Transport* transport,
    std::unique_ptr<Transport> owned_transport) {
  if (transport == nullptr || transport->num_servers() == 0) {
    return absl::InvalidArgumentError("no servers given; see --servers");
  }
  std::unique_ptr<PsClient> client(new PsClient(options, transport, std::move(owned_transport)));
  if (absl::Status s = CheckCluster(transport, client->clock_, ExpectationOf(options)); !s.ok()) {
    return s;
  }
  // With a lease: registered everywhere before the first pull.
  if (absl::Status s = client->lease_.Start(); !s.ok()) return s;
  return client;
}

std::vector<int> PsClient::AllServers() const {
  std::vector<int> servers(num_servers());
  for (int s = 0; s < num_servers(); ++s) servers[s] = s;
  return servers;
}

absl::Status PsClient::CreateTable(const proto::TableDef& def) {
  const std::vector<int> servers = AllServers();
  std::vector<proto::CreateTableResponse> replies(servers.size());
  proto::CreateTableRequest request;
  *request.mutable_table() = def;
  absl::Status status = CallRunner::FirstError(RunCalls(
      servers, "CreateTable", DataPolicy(),
      [&](size_t i, absl::Time deadline, Transport::Done done) {
        replies[i].Clear();
        transport_->CreateTable(servers[i], request, deadline, &replies[i], std::move(done));
      }));
  if (status.ok()) tables_.Add(def.name(), def);
  return status;
}

absl::StatusOr<proto::TableDef> PsClient::TableDefinition(const std::string& table) {
  if (std::optional<proto::TableDef> known = tables_.Definition(table)) return *std::move(known);
  // A table this client did not create: its definition from server 0 (every
  // server holds the same one).
  proto::InfoRequest request;
  request.set_table(table);
  proto::InfoResponse reply;
  if (absl::Status s = InfoOfServer0(request, &reply); !s.ok()) return s;
  tables_.Add(table, reply.table());
  return reply.table();
}

absl::StatusOr<TableLayout> PsClient::TableLayoutFor(const std::string& table) {
  if (std::optional<TableLayout> known = tables_.Layout(table)) return *known;
  absl::StatusOr<proto::TableDef> def = TableDefinition(table);
  if (!def.ok()) return def.status();
  return LayoutOf(*def);
}

absl::Status PsClient::InfoOfServer0(const proto::InfoRequest& request,
                                     proto::InfoResponse* reply) {
  const int servers[] = {0};
  return CallRunner::FirstError(RunCalls(
      servers, "Info", DataPolicy(), [&](size_t, absl::Time deadline, Transport::Done done) {
        reply->Clear();
        transport_->Info(0, request, deadline, /*wait_for_ready=*/false, reply, std::move(done));
      }));
}

absl::StatusOr<PsClient::WorkerPosition> PsClient::Position() {
  proto::InfoRequest request;
  request.set_worker_clocks(true);
  request.set_worker_id(options_.worker_id);
  proto::InfoResponse reply;
  if (absl::Status s = InfoOfServer0(request, &reply); !s.ok()) return s;
  WorkerPosition position;
  position.restored_from = reply.restored_from();
  position.restored_cut = reply.restored_cut();
  for (const proto::TableClock& c : reply.worker_clocks()) position.clocks[c.table()] = c.clock();
  return position;
}

absl::StatusOr<std::vector<ServerStats>> PsClient::Stats() {
  const std::vector<int> servers = AllServers();
  std::vector<proto::StatsResponse> replies(servers.size());
  const proto::StatsRequest request;
  absl::Status status = CallRunner::FirstError(RunCalls(
      servers, "Stats", DataPolicy(), [&](size_t i, absl::Time deadline, Transport::Done done) {
        replies[i].Clear();
        transport_->Stats(servers[i], request, deadline, &replies[i], std::move(done));
      }));
  if (!status.ok()) return status;
  std::vector<ServerStats> out;
  for (int s = 0; s < num_servers(); ++s) out.push_back({s, std::move(replies[s])});
  return out;
}

absl::Status PsClient::ReportProgress(const std::string& job, const proto::ProgressPoint& point) {
  const std::vector<int> servers = AllServers();
  proto::ReportProgressRequest request;
  request.set_worker_id(options_.worker_id);
  request.set_job(job);
  *request.mutable_point() = point;
  std::vector<proto::ReportProgressResponse> replies(servers.size());
  // One short attempt: progress is for people to look at, and training
  // must not wait on it.
  CallPolicy once;
  once.timeout = absl::Seconds(1);
  return CallRunner::FirstError(RunCalls(
      servers, "ReportProgress", once, [&](size_t i, absl::Time deadline, Transport::Done done) {
        transport_->ReportProgress(servers[i], request, deadline, &replies[i], std::move(done));
      }));
}

absl::Status PsClient::WaitForWorkers(int n, absl::Duration timeout) {
  return lease_.WaitForWorkers(n, timeout);
}

void PsClient::Leave() { lease_.Leave(); }

absl::StatusOr<std::vector<Part>> PsClient::PlanKeyOp(absl::string_view what,
                                                      const std::string& table,
                                                      absl::Span<const uint64_t> keys,
                                                      uint32_t width, size_t num_values,
                                                      uint64_t max_values_per_request) {
  absl::StatusOr<TableLayout> layout = TableLayoutFor(table);
  if (!layout.ok()) return layout.status();
  return PlanKeys(placement_, *layout, what, table, keys, width, num_values,
                  max_values_per_request);
}

// Pulls.

absl::Status PsClient::Pull(absl::Span<const PullRange> ops, uint64_t clock, PullInfo* info) {
  absl::StatusOr<std::vector<Part>> parts =
      PlanPull(placement_, ops, options_.max_values_per_request);
  if (!parts.ok()) return parts.status();
  std::vector<float*> bases;
  bases.reserve(ops.size());
  for (const PullRange& op : ops) bases.push_back(op.out.data());
  return PullParts(*parts, bases, clock, {}, ops.size(), info);
}

absl::Status PsClient::PullKeys(const std::string& table, absl::Span<const uint64_t> keys,
                                uint32_t width, absl::Span<float> out) {
  absl::StatusOr<std::vector<Part>> parts =
      PlanKeyOp("pull of", table, keys, width, out.size(), options_.max_values_per_request);
  if (!parts.ok()) return parts.status();
  float* const base = out.data();
  return PullParts(*parts, {&base, 1}, /*clock=*/0, keys, 1, nullptr);
}

absl::Status PsClient::PullParts(const std::vector<Part>& parts, absl::Span<float* const> bases,
                                 uint64_t clock, absl::Span<const uint64_t> keys, size_t num_ops,
                                 PullInfo* info) {
  std::vector<proto::PullRequest> requests = BuildPullRequests(parts, Stamp(clock), keys);
  std::vector<std::string> held(parts.size());
  if (options_.key_list_caching) {
    for (size_t i = 0; i < parts.size(); ++i) {
      OfferKeyList(key_lists_, parts[i].server, &requests[i], &held[i]);
    }
  }
  std::vector<proto::PullResponse> replies(parts.size());
  std::vector<absl::Status> status = RunCalls(
      ServersOf(parts), "Pull", DataPolicy(TotalValues(parts)),
      [&](size_t i, absl::Time deadline, Transport::Done done) {
        const Part& part = parts[i];
        SendWithKeyLists(
            [&, i, deadline](Transport::Done d) {
              replies[i].Clear();
              transport_->Pull(part.server, requests[i], deadline, &replies[i],
                               PullValuesInto(part, bases[part.op], options_.value_encoding),
                               std::move(d));
            },
            IsKeyListMiss,
            [&, i] { return RestoreKeyList(key_lists_, part.server, &requests[i], &held[i]); },
            std::move(done));
      });
  for (size_t i = 0; i < parts.size(); ++i) {
    if (status[i].ok()) NoteKeyListSent(key_lists_, parts[i].server, requests[i]);
  }
  if (absl::Status s = CallRunner::FirstError(status); !s.ok()) return s;
  FillPullInfo(parts, replies, num_ops, num_servers(), info);
  return absl::OkStatus();
}

// Pushes.

absl::Status PsClient::Push(absl::Span<const PushRange> ops, uint64_t clock, Versions* versions) {
  return Push(ops, clock, versions, nullptr);
}

absl::Status PsClient::Push(absl::Span<const PushRange> ops, uint64_t clock, Versions* versions,
                            PushReport* report) {
  uint64_t values = 0;
  for (const PushRange& op : ops) values += op.grads.size();
  return StartAndWait(DataPolicy(values).spin, [&](PushDone done) {
    StartPush(ops, clock, versions, report, std::move(done));
  });
}

void PsClient::PushAsync(absl::Span<const PushRange> ops, uint64_t clock, PushDone done) {
  BeginAsync();
  StartPush(ops, clock, nullptr, nullptr, [this, done = std::move(done)](absl::Status status) {
    done(std::move(status));
    EndAsync();  // last: the client may be destroyed once none is left
  });
}

void PsClient::BeginAsync() {
  absl::MutexLock lock(&async_mu_);
  ++async_pending_;
}

void PsClient::EndAsync() {
  absl::MutexLock lock(&async_mu_);
  --async_pending_;
}

absl::Status PsClient::StartAndWait(absl::Duration spin,
                                    const std::function<void(PushDone done)>& start) {
  absl::Status result;
  CallRunner::StartAndWait(spin, [&](std::function<void()> wake) {
    start([&result, wake = std::move(wake)](absl::Status status) {
      result = std::move(status);
      wake();
    });
  });
  return result;
}

void PsClient::StartPush(absl::Span<const PushRange> ops, uint64_t clock, Versions* versions,
                         PushReport* report, PushDone done) {
  if (report != nullptr) report->parts.clear();
  absl::StatusOr<std::vector<Part>> parts =
      PlanPush(placement_, ops, options_.max_values_per_request);
  if (!parts.ok()) return done(parts.status());
  auto call = std::make_shared<PushCall>();
  call->parts = *std::move(parts);
  BuildPushRequests(call->parts, ops, Stamp(clock), &next_request_id_, &call->requests);
  PushDone pushed = [this, clock, done = std::move(done)](absl::Status status) {
    if (status.ok()) lease_.NotePushed(clock);
    done(std::move(status));
  };
  if (call->parts.size() == 1 && options_.consistency == proto::CONSISTENCY_ASYNC &&
      options_.batch_max_values > 0 && call->parts[0].num_values() <= options_.batch_max_values) {
    PushBatched(std::move(call), ops.size(), versions, report, std::move(pushed));
  } else {
    SendPushParts(std::move(call), ops.size(), versions, report, std::move(pushed));
  }
}

absl::Status PsClient::PushKeys(const std::string& table, absl::Span<const uint64_t> keys,
                                uint32_t width, absl::Span<const float> grads, uint64_t clock,
                                PushReport* report) {
  return PushKeysStamped(table, keys, width, grads, Stamp(clock), &next_request_id_, report);
}

absl::Status PsClient::PushKeysAs(const PushIdentity& as, const std::string& table,
                                  absl::Span<const uint64_t> keys, uint32_t width,
                                  absl::Span<const float> grads, uint64_t clock) {
  RequestStamp stamp = Stamp(clock);
  stamp.worker_id = as.worker_id;
  std::atomic<uint64_t> ids(as.first_request_id);
  return PushKeysStamped(table, keys, width, grads, stamp, &ids, nullptr);
}

absl::StatusOr<PsClient::VectorOpsTotals> PsClient::VectorOps(const std::string& table,
                                                              absl::Span<const proto::VectorOp> ops,
                                                              uint64_t request_id, uint64_t clock) {
  proto::VectorOpsRequest request;
  request.set_table(table);
  request.mutable_ops()->Add(ops.begin(), ops.end());
  request.set_request_id(request_id);
  request.set_clock(clock);
  const std::vector<int> servers = AllServers();
  std::vector<proto::VectorOpsResponse> replies(servers.size());
  absl::Status status = CallRunner::FirstError(RunCalls(
      servers, "VectorOps", DataPolicy(), [&](size_t i, absl::Time deadline, Transport::Done done) {
        replies[i].Clear();
        transport_->VectorOps(servers[i], request, deadline, &replies[i], std::move(done));
      }));
  if (!status.ok()) return status;
  VectorOpsTotals totals;
  for (const proto::VectorOp& op : ops) {
    if (op.kind() == proto::VectorOp::DOT) totals.sums.push_back(0);
  }
  for (size_t i = 0; i < replies.size(); ++i) {
    if (static_cast<size_t>(replies[i].partials_size()) != totals.sums.size()) {
      return absl::InternalError(absl::StrCat(
          "vector ops on table '", table, "': ", transport_->ServerName(servers[i]), " returned ",
          replies[i].partials_size(), " sums for ", totals.sums.size(), " dot products"));
    }
    for (size_t k = 0; k < totals.sums.size(); ++k) totals.sums[k] += replies[i].partials(k);
    totals.values += replies[i].values();
    totals.bytes += request.ByteSizeLong() + replies[i].ByteSizeLong();
  }
  return totals;
}

absl::Status PsClient::PushKeysStamped(const std::string& table, absl::Span<const uint64_t> keys,
                                       uint32_t width, absl::Span<const float> grads,
                                       const RequestStamp& stamp, std::atomic<uint64_t>* ids,
                                       PushReport* report) {
  if (report != nullptr) report->parts.clear();
  absl::StatusOr<std::vector<Part>> parts =
      PlanKeyOp("push to", table, keys, width, grads.size(), options_.max_values_per_request);
  if (!parts.ok()) return parts.status();
  auto call = std::make_shared<PushCall>();
  call->parts = *std::move(parts);
  BuildKeyPushRequests(call->parts, keys, width, grads, stamp, ids, &call->requests);
  return StartAndWait(DataPolicy(grads.size()).spin, [&](PushDone done) {
    SendPushParts(std::move(call), 1, nullptr, report, std::move(done));
  });
}

void PsClient::SendPushParts(std::shared_ptr<PushCall> call, size_t num_ops, Versions* versions,
                             PushReport* report, PushDone done) {
  call->replies.resize(call->parts.size());
  const CallPolicy policy = DataPolicy(TotalValues(call->parts));
  PushRequests& requests = call->requests;
  requests.held.resize(requests.headers.size());
  if (options_.key_list_caching) {
    for (size_t i = 0; i < call->parts.size(); ++i) {
      OfferKeyList(key_lists_, call->parts[i].server, &requests.headers[i], &requests.held[i]);
    }
  }
  // Every attempt of part i sends the same request again: the same request
  // id, so a part applied on an attempt whose reply was lost is acknowledged
  // as a duplicate by the next one instead of being applied twice.
  PushCall* const c = call.get();
  runner_.RunAsync(
      ServersOf(call->parts), "Push", policy,
      [this, call](size_t i, absl::Time deadline, Transport::Done d) {
        const int server = call->parts[i].server;
        SendWithKeyLists(
            [this, call, i, server, deadline](Transport::Done sent) {
              call->replies[i].Clear();
              transport_->Push(server, call->requests.headers[i], call->requests.pieces[i],
                               deadline, &call->replies[i], std::move(sent));
            },
            IsKeyListMiss,
            [this, call, i, server] {
              return RestoreKeyList(key_lists_, server, &call->requests.headers[i],
                                    &call->requests.held[i]);
            },
            std::move(d));
      },
      [this, c, num_ops, versions, report,
       done = std::move(done)](std::vector<absl::Status> status) {
        for (size_t i = 0; i < c->parts.size(); ++i) {
          if (status[i].ok()) {
            NoteKeyListSent(key_lists_, c->parts[i].server, c->requests.headers[i]);
          }
        }
        done(FinishPush(*c, status, num_ops, versions, report));
      });
}

absl::Status PsClient::FinishPush(const PushCall& call, const std::vector<absl::Status>& status,
                                  size_t num_ops, Versions* versions, PushReport* report) const {
  if (absl::Status s = PushOutcome(call.parts, status, *transport_, report); !s.ok()) return s;
  FillPushVersions(call.parts, call.replies, num_ops, num_servers(), versions);
  return absl::OkStatus();
}

void PsClient::PushBatched(std::shared_ptr<PushCall> call, size_t num_ops, Versions* versions,
                           PushReport* report, PushDone done) {
  auto item = std::make_unique<PushBatcher::Item>();
  item->request = std::move(call->requests.headers[0]);
  AppendPushValues(call->requests.pieces[0], item->request.mutable_values());
  const int server = call->parts[0].server;
  item->done = [this, call, num_ops, versions, report, done = std::move(done)](absl::Status status,
                                                                               uint64_t version) {
    const Part& part = call->parts[0];
    if (report != nullptr) report->parts.push_back(ReportPart(part, status));
    if (status.ok() && versions != nullptr) {
      versions->assign(num_ops * num_servers(), 0);
      (*versions)[part.op * num_servers() + part.server] = version;
    }
    done(std::move(status));
  };
  batcher_.Submit(server, std::move(item));
}

// Push-pulls.

absl::Status PsClient::PushPull(absl::Span<const PushRange> push, absl::Span<const PullRange> pull,
                                uint64_t clock, PullInfo* info) {
  if (absl::Status s = CheckPushPullOps(push, pull); !s.ok()) return s;
  if (options_.consistency != proto::CONSISTENCY_ASYNC) {
    // A bounded or BSP round waits between its push and its pull.
    return ParamClient::PushPull(push, pull, clock, info);
  }
  for (size_t i = 0; i < push.size(); ++i) {
    if (pull[i].out.size() != push[i].grads.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("PushPull of table '", push[i].table, "': ", push[i].grads.size(),
                       " gradients but room for ", pull[i].out.size(), " values"));
    }
  }
  absl::StatusOr<std::vector<Part>> parts = PlanPush(placement_, push, PushPullValuesPerCall());
  if (!parts.ok()) return parts.status();
  PushRequests requests;
  BuildPushRequests(*parts, push, Stamp(clock), &next_request_id_, &requests);
  std::vector<float*> bases;
  bases.reserve(pull.size());
  for (const PullRange& op : pull) bases.push_back(op.out.data());
  absl::Status status = PushPullParts(*parts, &requests, bases, push.size(), info);
  if (status.ok()) lease_.NotePushed(clock);
  return status;
}

absl::Status PsClient::PushPullKeys(const std::string& table, absl::Span<const uint64_t> keys,
                                    uint32_t width, absl::Span<const float> grads,
                                    absl::Span<float> out, uint64_t clock) {
  if (out.size() != grads.size()) {
    return absl::InvalidArgumentError(absl::StrCat("PushPull of table '", table,
                                                   "': ", grads.size(), " gradients but room for ",
                                                   out.size(), " values"));
  }
  if (options_.consistency != proto::CONSISTENCY_ASYNC) {
    if (absl::Status s = PushKeys(table, keys, width, grads, clock); !s.ok()) return s;
    return PullKeys(table, keys, width, out);
  }
  absl::StatusOr<std::vector<Part>> parts =
      PlanKeyOp("push to", table, keys, width, grads.size(), PushPullValuesPerCall());
  if (!parts.ok()) return parts.status();
  PushRequests requests;
  BuildKeyPushRequests(*parts, keys, width, grads, Stamp(clock), &next_request_id_, &requests);
  float* const base = out.data();
  return PushPullParts(*parts, &requests, {&base, 1}, 1, nullptr);
}

absl::Status PsClient::PushPullParts(const std::vector<Part>& parts, PushRequests* pushes,
                                     absl::Span<float* const> bases, size_t num_ops,
                                     PullInfo* info) {
  // One call per server, carrying its parts (of every op) in order, up to
  // PushPullValuesPerCall() values; past that, another call to that server
  // (they run concurrently).
  const std::vector<PlannedCall> plan =
      GroupIntoCalls(parts, num_servers(), PushPullValuesPerCall());
  std::vector<int> servers(plan.size());
  std::vector<proto::PushPullRequest> calls(plan.size());
  std::vector<std::vector<absl::string_view>> call_pieces(plan.size());
  // Key-list caching, push by push: held[c][k] is push k of call c's list
  // while only its signature is sent.
  std::vector<std::vector<std::string>> held(plan.size());
  for (size_t c = 0; c < plan.size(); ++c) {
    servers[c] = plan[c].server;
    BuildPushPullRequest(plan[c], pushes, &calls[c], &call_pieces[c]);
    held[c].resize(calls[c].pushes_size());
    if (options_.key_list_caching) OfferKeyLists(key_lists_, servers[c], &calls[c], &held[c]);
  }
  std::vector<proto::PushPullResponse> replies(plan.size());
  // Each part's values go to its op's buffer; a failed part's are passed over.
  auto scatter = [&](size_t c, const SegmentedBytes& values) {
    return ScatterPushPullReply(parts, plan[c], replies[c], values, bases, options_.value_encoding);
  };
  // As for Push: every attempt resends the same request ids.
  const std::vector<absl::Status> call_status = RunCalls(
      servers, "PushPull", DataPolicy(TotalValues(parts)),
      [&](size_t c, absl::Time deadline, Transport::Done done) {
        SendWithKeyLists(
            [&, c, deadline](Transport::Done d) {
              replies[c].Clear();
              transport_->PushPull(
                  servers[c], calls[c], call_pieces[c], deadline, &replies[c],
                  [&scatter, c](const SegmentedBytes& values) { return scatter(c, values); },
                  std::move(d));
            },
            // A push whose list the server did not hold failed alone (nothing
            // of it applied); the call is sent again with every list, and the
            // pushes applied the first time come back as duplicates.
            [&, c](const absl::Status& status) { return AnyKeyListMiss(status, replies[c]); },
            [&, c] { return RestoreKeyLists(key_lists_, servers[c], &calls[c], &held[c]); },
            std::move(done));
      });
  // Each part's own status, and its reply.
  std::vector<absl::Status> status(parts.size());
  std::vector<proto::PullResponse> part_replies(parts.size());
  for (size_t c = 0; c < plan.size(); ++c) {
    if (call_status[c].ok()) NoteKeyListsSent(key_lists_, servers[c], calls[c], replies[c]);
    SplitPushPullReply(plan[c], call_status[c], replies[c], *transport_, absl::MakeSpan(status),
                       absl::MakeSpan(part_replies));
  }
  if (absl::Status s = PushOutcome(parts, status, *transport_, nullptr); !s.ok()) return s;
  FillPullInfo(parts, part_replies, num_ops, num_servers(), info);
  return absl::OkStatus();
}

}  // namespace ps
