// PsClient: construction, the cluster check at connect, tables and pulls
// (see ps_client.h). Pushes are in ps_client_push.cc, heartbeats and
// statistics in ps_client_membership.cc.
#include "worker/client/ps_client.h"

#include <algorithm>
#include <limits>
#include <random>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/blocking_counter.h"
#include "common/table_layout.h"
#include "common/value_encoding.h"
#include "worker/client/grpc_transport.h"

namespace ps {

namespace {

uint64_t DrawIncarnation() {
  std::random_device device;
  uint64_t value = 0;
  while (value == 0) value = (static_cast<uint64_t>(device()) << 32) ^ device();
  return value;
}

void AddRange(proto::PullRequest* header, uint64_t begin, uint64_t end) {
  proto::KeyRange* r = header->add_ranges();
  r->set_begin(begin);
  r->set_end(end);
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
      key_lists_(transport->num_servers(), options.key_lists_per_server),
      // Request ids start from the wall clock so that a restarted worker with
      // the same id never reuses an id the servers have already seen.
      next_request_id_(static_cast<uint64_t>(absl::ToUnixMicros(absl::Now())) << 8) {
  for (int s = 0; s < transport_->num_servers(); ++s) {
    batchers_.push_back(std::make_unique<ServerBatcher>());
  }
}

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
    return Connect(options, std::make_unique<GrpcTransport>(options.directory, clock, options.security));
  }
  if (options.servers.empty()) {
    return absl::InvalidArgumentError("no servers given; see --servers");
  }
  return Connect(options, std::make_unique<GrpcTransport>(options.servers, clock, options.security));
}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(const PsClientOptions& options,
                                                            std::unique_ptr<Transport> transport) {
  if (transport == nullptr || transport->num_servers() == 0) {
    return absl::InvalidArgumentError("no servers given; see --servers");
  }
  Transport* t = transport.get();
  return Start(std::unique_ptr<PsClient>(new PsClient(options, t, std::move(transport))));
}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Connect(const PsClientOptions& options,
                                                            Transport* transport) {
  if (transport == nullptr || transport->num_servers() == 0) {
    return absl::InvalidArgumentError("no servers given; see --servers");
  }
  return Start(std::unique_ptr<PsClient>(new PsClient(options, transport, nullptr)));
}

absl::StatusOr<std::unique_ptr<PsClient>> PsClient::Start(std::unique_ptr<PsClient> client) {
  if (absl::Status s = client->CheckServers(); !s.ok()) return s;
  if (client->options_.lease > absl::ZeroDuration()) {
    // Registered everywhere before the first pull, then renewed in the
    // background. ALREADY_EXISTS (another live process with this worker id)
    // is not retried.
    absl::StatusOr<int> live = client->HeartbeatAll(/*leaving=*/false);
    if (!live.ok()) {
      absl::Status status = live.status();
      if (status.code() == absl::StatusCode::kAlreadyExists) {
        // The server's message names the other process and --worker_index.
        // No leaving heartbeat: this worker id belongs to the other process.
        absl::MutexLock lock(&client->heartbeat_mu_);
        client->left_ = true;
      }
      return status;
    }
    client->heartbeat_thread_ = std::thread([c = client.get()] { c->HeartbeatLoop(); });
  }
  return client;
}

absl::Status PsClient::CheckServers() {
  const int n = num_servers();
  std::vector<proto::InfoResponse> replies(n);
  std::vector<absl::Status> status(n);
  const proto::InfoRequest request;
  // Servers may still be starting: wait for them, up to connect_timeout, in
  // one attempt each.
  // In a replicated cluster a shard's primary may not have read the ring
  // yet (UNAVAILABLE): asked again until the deadline.
  const absl::Time deadline = clock_->Now() + options_.connect_timeout;
  std::vector<int> pending(n);
  for (int s = 0; s < n; ++s) pending[s] = s;
  while (!pending.empty()) {
    absl::BlockingCounter countdown(static_cast<int>(pending.size()));
    for (int s : pending) {
      transport_->Info(s, request, deadline, /*wait_for_ready=*/true, &replies[s],
                       [&countdown, &status, s](absl::Status result) {
                         status[s] = std::move(result);
                         countdown.DecrementCount();
                       });
    }
    countdown.Wait();
    std::vector<int> again;
    for (int s : pending) {
      if (options_.directory != nullptr && absl::IsUnavailable(status[s]) &&
          clock_->Now() + kMaxBackoff < deadline) {
        again.push_back(s);
      }
    }
    if (!again.empty()) clock_->SleepFor(kMaxBackoff);
    pending = std::move(again);
  }
  for (int s = 0; s < n; ++s) {
    const std::string name = transport_->ServerName(s);
    if (!status[s].ok()) {
      return absl::Status(status[s].code(),
                          absl::StrCat(name, " did not answer within ",
                                       absl::FormatDuration(options_.connect_timeout), " (",
                                       status[s].message(),
                                       "); is it running? see --servers. A server with TLS "
                                       "answers only clients with --tls_ca, and --tls_cert and "
                                       "--tls_key from its CA"));
    }
    const proto::InfoResponse& info = replies[s];
    if (info.server_index() != static_cast<uint32_t>(s) ||
        info.num_servers() != static_cast<uint32_t>(n) ||
        info.slice_size() != options_.placement.slice_size ||
        info.virtual_nodes() != static_cast<uint32_t>(options_.placement.virtual_nodes)) {
      return absl::FailedPreconditionError(absl::StrCat(
          name, " reports shard ", info.server_index(), " of ", info.num_servers(), " (slice_size ",
          info.slice_size(), ", virtual_nodes ", info.virtual_nodes(),
          ") but this worker expects shard ", s, " of ", n, " (slice_size ",
          options_.placement.slice_size, ", virtual_nodes ", options_.placement.virtual_nodes,
          "); start every process with the same --servers"));
    }
    // Every retry of a push must reach the server while it still remembers
    // the push's id, or a retry of an applied push would apply it twice.
    const absl::Duration retention = absl::Milliseconds(info.dedup_retention_ms());
    const int attempts = std::max(1, options_.max_attempts);
    absl::Duration window = options_.timeout * attempts;
    for (int a = 1; a < attempts; ++a) window += std::min(options_.retry_backoff * a, kMaxBackoff);
    if (info.dedup_retention_ms() > 0 && window >= retention) {
      return absl::FailedPreconditionError(absl::StrCat(
          name, " remembers push ids for ", absl::FormatDuration(retention),
          " (ps_server --dedup_retention_seconds), but this worker may retry a push for up to ",
          absl::FormatDuration(window), " (", attempts, " attempts of ",
          absl::FormatDuration(options_.timeout),
          ", see --timeout_seconds); a late retry could be applied twice. Lower "
          "--timeout_seconds or raise the servers' --dedup_retention_seconds"));
    }
  }
  return absl::OkStatus();
}

absl::Status PsClient::CreateTable(const proto::TableDef& def) {
  const int n = num_servers();
  std::vector<int> servers(n);
  std::vector<proto::CreateTableResponse> replies(n);
  proto::CreateTableRequest request;
  *request.mutable_table() = def;
  for (int s = 0; s < n; ++s) servers[s] = s;
  absl::Status status = CallRunner::FirstError(RunCalls(
      servers, "CreateTable", DataPolicy(),
      [&](size_t i, absl::Time deadline, Transport::Done done) {
        replies[i].Clear();
        transport_->CreateTable(servers[i], request, deadline, &replies[i], std::move(done));
      }));
  if (status.ok()) {
    absl::MutexLock lock(&tables_mu_);
    tables_[def.name()] = KnownTable{def, LayoutOf(def)};
  }
  return status;
}

absl::StatusOr<proto::TableDef> PsClient::TableDefinition(const std::string& table) {
  {
    absl::MutexLock lock(&tables_mu_);
    auto it = tables_.find(table);
    if (it != tables_.end()) return it->second.def;
  }
  // A table this client did not create: its definition from server 0 (every
  // server holds the same one).
  proto::InfoRequest request;
  request.set_table(table);
  proto::InfoResponse reply;
  if (absl::Status s = InfoOfServer0(request, &reply); !s.ok()) return s;
  absl::MutexLock lock(&tables_mu_);
  tables_[table] = KnownTable{reply.table(), LayoutOf(reply.table())};
  return reply.table();
}

absl::StatusOr<TableLayout> PsClient::TableLayoutFor(const std::string& table) {
  {
    absl::MutexLock lock(&tables_mu_);
    auto it = tables_.find(table);
    if (it != tables_.end()) return it->second.layout;
  }
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

absl::Status PsClient::PullParts(const std::vector<Part>& parts, absl::Span<float* const> bases,
                                 const proto::PullRequest& base, absl::Span<const uint64_t> keys,
                                 size_t num_ops, PullInfo* info) {
  std::vector<int> servers;
  std::vector<proto::PullRequest> requests;
  servers.reserve(parts.size());
  requests.reserve(parts.size());
  for (const Part& part : parts) {
    servers.push_back(part.server);
    proto::PullRequest& header = requests.emplace_back(base);
    header.set_table(part.table);
    for (const PlannedRange& r : part.ranges) AddRange(&header, r.begin, r.end);
    if (!part.positions.empty()) header.set_key_list(PackKeys(keys, part.positions));
  }
  std::vector<std::string> held(parts.size());
  if (options_.key_list_caching) {
    for (size_t i = 0; i < parts.size(); ++i) {
      OfferKeyList(key_lists_, parts[i].server, &requests[i], &held[i]);
    }
  }
  std::vector<proto::PullResponse> replies(parts.size());
  std::vector<absl::Status> status = RunCalls(
      servers, "Pull", DataPolicy(TotalValues(parts)),
      [&](size_t i, absl::Time deadline, Transport::Done done) {
        const Part& part = parts[i];
        SendWithKeyLists(
            [&, i, deadline](Transport::Done d) {
              replies[i].Clear();
              transport_->Pull(part.server, requests[i], deadline, &replies[i],
                               ScatterInto(part, bases[part.op], options_.value_encoding),
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
  FillPullInfo(parts, replies, num_ops, info);
  return absl::OkStatus();
}

Transport::ConsumeValues PsClient::ScatterInto(const Part& part, float* out,
                                               proto::ValueEncoding encoding) {
  return [&part, out, encoding](const SegmentedBytes& values) {
    const uint64_t expected = part.num_values() * BytesPerValue(encoding);
    if (values.size() != expected) {
      return absl::InternalError(
          absl::StrCat("pull reply has ", values.size(), " bytes, expected ", expected));
    }
    SegmentedBytes::Reader reader(values);
    ScatterPart(part, reader, out, encoding);
    return absl::OkStatus();
  };
}

void PsClient::ScatterPart(const Part& part, SegmentedBytes::Reader& reader, float* out,
                           proto::ValueEncoding encoding) {
  const size_t value_bytes = BytesPerValue(encoding);
  if (part.positions.empty()) {
    if (encoding == proto::VALUES_F32) {
      part.ForEachRun([&](uint64_t offset, uint64_t count) {
        reader.Read(count * sizeof(float), reinterpret_cast<char*>(out + offset));
      });
      return;
    }
    std::string wire;
    part.ForEachRun([&](uint64_t offset, uint64_t count) {
      wire.resize(count * value_bytes);
      reader.Read(wire.size(), wire.data());
      DecodeValues(encoding, wire.data(), count, out + offset);
    });
    return;
  }
  // Key lists: one bulk copy, then row by row (a copy call per row costs
  // more than the row).
  const uint64_t width = part.width;
  const uint64_t n = part.num_values();
  std::unique_ptr<float[]> rows(new float[n]);
  if (encoding == proto::VALUES_F32) {
    reader.Read(n * sizeof(float), reinterpret_cast<char*>(rows.get()));
  } else {
    std::string wire(n * value_bytes, '\0');
    reader.Read(wire.size(), wire.data());
    DecodeValues(encoding, wire.data(), n, rows.get());
  }
  if (width == 1) {
    for (size_t j = 0; j < part.positions.size(); ++j) out[part.positions[j]] = rows[j];
  } else {
    for (size_t j = 0; j < part.positions.size(); ++j) {
      std::copy_n(rows.get() + j * width, width, out + part.positions[j] * width);
    }
  }
}

void PsClient::FillPullInfo(const std::vector<Part>& parts,
                            const std::vector<proto::PullResponse>& replies, size_t num_ops,
                            PullInfo* info) const {
  if (info == nullptr) return;
  info->versions.assign(num_ops * num_servers(), 0);
  info->params_clock = std::numeric_limits<uint64_t>::max();
  info->waited = absl::ZeroDuration();
  for (size_t i = 0; i < parts.size(); ++i) {
    uint64_t& slot = info->versions[parts[i].op * num_servers() + parts[i].server];
    slot = std::max(slot, replies[i].version());
    info->params_clock = std::min(info->params_clock, replies[i].params_clock());
    info->waited = std::max(info->waited, absl::Microseconds(replies[i].wait_us()));
  }
}

absl::Status PsClient::Pull(absl::Span<const PullRange> ops, uint64_t clock, PullInfo* info) {
  absl::StatusOr<std::vector<Part>> parts =
      PlanPull(placement_, ops, options_.max_values_per_request);
  if (!parts.ok()) return parts.status();
  std::vector<float*> bases;
  bases.reserve(ops.size());
  for (const PullRange& op : ops) bases.push_back(op.out.data());
  proto::PullRequest base;
  base.set_worker_id(options_.worker_id);
  base.set_clock(clock);
  base.set_consistency(options_.consistency);
  base.set_staleness(options_.staleness);
  base.set_value_encoding(options_.value_encoding);
  return PullParts(*parts, bases, base, {}, ops.size(), info);
}

absl::Status PsClient::PullKeys(const std::string& table, absl::Span<const uint64_t> keys,
                                uint32_t width, absl::Span<float> out) {
  absl::StatusOr<std::vector<Part>> parts =
      PlanKeyOp("pull of", table, keys, width, out.size(), options_.max_values_per_request);
  if (!parts.ok()) return parts.status();
  float* const base_ptr = out.data();
  proto::PullRequest base;
  base.set_worker_id(options_.worker_id);
  base.set_value_encoding(options_.value_encoding);
  return PullParts(*parts, {&base_ptr, 1}, base, keys, 1, nullptr);
}

}  // namespace ps
