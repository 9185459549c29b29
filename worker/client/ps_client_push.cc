// PsClient: pushes, small-push batching and the report of a push that
// failed part-way (see ps_client.h).
#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/value_encoding.h"
#include "worker/client/ps_client.h"

namespace ps {

namespace {

void AddRange(proto::PushRequest* header, uint64_t begin, uint64_t end) {
  proto::KeyRange* r = header->add_ranges();
  r->set_begin(begin);
  r->set_end(end);
}

PushPartReport::Outcome OutcomeOf(const absl::Status& status) {
  if (status.ok()) return PushPartReport::Outcome::kApplied;
  // Without an answer the request may have been applied; a server's error
  // means nothing of it was.
  return IsRetryable(status) ? PushPartReport::Outcome::kUnknown
                             : PushPartReport::Outcome::kNotApplied;
}

PushPartReport ReportPart(const Part& part, const absl::Status& status) {
  PushPartReport r;
  r.server = part.server;
  r.table = part.table;
  r.op = part.op;
  r.keys = DescribeKeys(part);
  r.outcome = OutcomeOf(status);
  r.status = status;
  return r;
}

// "<first error>. Of this push's 3 parts, applied: ...; not applied: ...;
// no answer (may have been applied): ..."
absl::Status WithPartList(const absl::Status& first_error, const PushReport& report,
                          const Transport& transport) {
  std::vector<std::string> applied, refused, unknown;
  for (const PushPartReport& p : report.parts) {
    std::string item = absl::StrCat(transport.ServerName(p.server), " ", p.keys);
    switch (p.outcome) {
      case PushPartReport::Outcome::kApplied:
        applied.push_back(std::move(item));
        break;
      case PushPartReport::Outcome::kNotApplied:
        refused.push_back(
            absl::StrCat(item, " (", absl::StatusCodeToString(p.status.code()), ")"));
        break;
      case PushPartReport::Outcome::kUnknown:
        unknown.push_back(
            absl::StrCat(item, " (", absl::StatusCodeToString(p.status.code()), ")"));
        break;
    }
  }
  auto list = [](const std::vector<std::string>& items) {
    return items.empty() ? std::string("none") : absl::StrJoin(items, "; ");
  };
  std::string message = absl::StrCat(first_error.message(), ". Of this push's ",
                                     report.parts.size(), " parts, applied: ", list(applied),
                                     ". Not applied: ", list(refused));
  if (!unknown.empty()) {
    absl::StrAppend(&message, ". No answer (may have been applied): ", list(unknown));
  }
  return absl::Status(first_error.code(), message);
}

}  // namespace

absl::Status PsClient::Push(absl::Span<const PushRange> ops, uint64_t clock, Versions* versions) {
  return Push(ops, clock, versions, nullptr);
}

proto::PushRequest& PsClient::NewPushHeader(const Part& part, uint64_t clock,
                                           PushRequests* out) {
  proto::PushRequest& header = out->headers.emplace_back();
  header.set_table(part.table);
  header.set_worker_id(options_.worker_id);
  header.set_clock(clock);
  header.set_request_id(next_request_id_.fetch_add(1));
  header.set_round_parts(part.round_parts);
  return header;
}

void PsClient::BuildPushRequests(const std::vector<Part>& parts, absl::Span<const PushRange> ops,
                                 uint64_t clock, PushRequests* out) {
  out->headers.reserve(parts.size());
  out->pieces.reserve(parts.size());
  for (const Part& part : parts) {
    proto::PushRequest& header = NewPushHeader(part, clock, out);
    header.set_consistency(options_.consistency);
    header.set_staleness(options_.staleness);
    std::vector<absl::string_view>& values = out->pieces.emplace_back();
    const float* grads = ops[part.op].grads.data();
    for (const PlannedRange& r : part.ranges) {
      AddRange(&header, r.begin, r.end);
      values.emplace_back(reinterpret_cast<const char*>(grads + r.offset),
                          (r.end - r.begin) * part.width * sizeof(float));
    }
  }
  EncodePushValues(out);
}

void PsClient::BuildKeyPushRequests(const std::vector<Part>& parts,
                                    absl::Span<const uint64_t> keys, uint32_t width,
                                    absl::Span<const float> grads, uint64_t clock,
                                    PushRequests* out) {
  out->gathered.resize(parts.size());
  out->headers.reserve(parts.size());
  out->pieces.reserve(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    const Part& part = parts[i];
    proto::PushRequest& header = NewPushHeader(part, clock, out);
    header.set_key_list(PackKeys(keys, part.positions));
    // Key lists take no part in bounded or BSP waits (README, Consistency):
    // no consistency is stamped, so a BSP push of keys is never held.
    // This server's rows, gathered into one buffer that is sent as is.
    std::vector<float>& values = out->gathered[i];
    values.resize(part.num_values());
    if (width == 1) {
      for (size_t j = 0; j < part.positions.size(); ++j) values[j] = grads[part.positions[j]];
    } else {
      for (size_t j = 0; j < part.positions.size(); ++j) {
        std::copy_n(grads.data() + part.positions[j] * width, width, values.data() + j * width);
      }
    }
    out->pieces.push_back({absl::string_view(reinterpret_cast<const char*>(values.data()),
                                             values.size() * sizeof(float))});
  }
  EncodePushValues(out);
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
  BuildPushRequests(call->parts, ops, clock, &call->requests);
  PushDone pushed = [this, clock, done = std::move(done)](absl::Status status) {
    if (status.ok()) NotePushed(clock);
    done(std::move(status));
  };
  if (call->parts.size() == 1 && options_.consistency == proto::CONSISTENCY_ASYNC &&
      options_.batch_max_values > 0 &&
      call->parts[0].num_values() <= options_.batch_max_values) {
    PushBatched(std::move(call), ops.size(), versions, report, std::move(pushed));
  } else {
    SendPushParts(std::move(call), ops.size(), versions, report, std::move(pushed));
  }
}

absl::Status PsClient::PushKeys(const std::string& table, absl::Span<const uint64_t> keys,
                                uint32_t width, absl::Span<const float> grads, uint64_t clock,
                                PushReport* report) {
  if (report != nullptr) report->parts.clear();
  absl::StatusOr<std::vector<Part>> parts =
      PlanKeyOp("push to", table, keys, width, grads.size(), options_.max_values_per_request);
  if (!parts.ok()) return parts.status();
  auto call = std::make_shared<PushCall>();
  call->parts = *std::move(parts);
  BuildKeyPushRequests(call->parts, keys, width, grads, clock, &call->requests);
  return StartAndWait(DataPolicy(grads.size()).spin, [&](PushDone done) {
    SendPushParts(std::move(call), 1, nullptr, report, std::move(done));
  });
}

absl::Status PsClient::PushPull(absl::Span<const PushRange> push, absl::Span<const PullRange> pull,
                                uint64_t clock, PullInfo* info) {
  if (absl::Status s = CheckPushPullOps(push, pull); !s.ok()) return s;
  if (options_.consistency != proto::CONSISTENCY_ASYNC) {
    // A bounded or BSP round waits between its push and its pull.
    return ParamClient::PushPull(push, pull, clock, info);
  }
  for (size_t i = 0; i < push.size(); ++i) {
    if (pull[i].out.size() != push[i].grads.size()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "PushPull of table '", push[i].table, "': ", push[i].grads.size(),
          " gradients but room for ", pull[i].out.size(), " values"));
    }
  }
  absl::StatusOr<std::vector<Part>> parts =
      PlanPush(placement_, push, PushPullValuesPerCall());
  if (!parts.ok()) return parts.status();
  PushRequests requests;
  BuildPushRequests(*parts, push, clock, &requests);
  std::vector<float*> bases;
  bases.reserve(pull.size());
  for (const PullRange& op : pull) bases.push_back(op.out.data());
  absl::Status status =
      PushPullParts(*parts, requests.headers, requests.pieces, bases, push.size(), info);
  if (status.ok()) NotePushed(clock);
  return status;
}

absl::Status PsClient::PushPullKeys(const std::string& table, absl::Span<const uint64_t> keys,
                                    uint32_t width, absl::Span<const float> grads,
                                    absl::Span<float> out, uint64_t clock) {
  if (out.size() != grads.size()) {
    return absl::InvalidArgumentError(absl::StrCat("PushPull of table '", table, "': ",
                                                   grads.size(), " gradients but room for ",
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
  BuildKeyPushRequests(*parts, keys, width, grads, clock, &requests);
  float* const base = out.data();
  return PushPullParts(*parts, requests.headers, requests.pieces, {&base, 1}, 1, nullptr);
}

absl::Status PsClient::PushPullParts(const std::vector<Part>& parts,
                                     const std::vector<proto::PushRequest>& requests,
                                     const std::vector<std::vector<absl::string_view>>& pieces,
                                     absl::Span<float* const> bases, size_t num_ops,
                                     PullInfo* info) {
  // One call per server, carrying its parts (of every op) in order, up to
  // PushPullValuesPerCall() values; past that, another call to that server
  // (they run concurrently).
  std::vector<int> servers;                  // call -> server
  std::vector<std::vector<size_t>> members;  // call -> parts
  std::vector<uint64_t> call_values;         // call -> values so far
  std::vector<int> call_of(num_servers(), -1);
  for (size_t i = 0; i < parts.size(); ++i) {
    int& c = call_of[parts[i].server];
    if (c < 0 || call_values[c] + parts[i].num_values() > PushPullValuesPerCall()) {
      c = static_cast<int>(servers.size());
      servers.push_back(parts[i].server);
      members.emplace_back();
      call_values.push_back(0);
    }
    members[c].push_back(i);
    call_values[c] += parts[i].num_values();
  }
  std::vector<proto::PushPullRequest> calls(servers.size());
  std::vector<std::vector<absl::string_view>> call_pieces(servers.size());
  for (size_t c = 0; c < servers.size(); ++c) {
    for (size_t i : members[c]) {
      proto::PushRequest* push = calls[c].add_pushes();
      *push = requests[i];
      uint64_t bytes = 0;
      for (absl::string_view piece : pieces[i]) bytes += piece.size();
      push->set_values_bytes(bytes);
      call_pieces[c].insert(call_pieces[c].end(), pieces[i].begin(), pieces[i].end());
    }
  }
  // Key-list caching, push by push: held[c][k] is push k of call c's list
  // while only its signature is sent.
  std::vector<std::vector<std::string>> held(servers.size());
  for (size_t c = 0; c < servers.size(); ++c) {
    held[c].resize(calls[c].pushes_size());
    if (!options_.key_list_caching) continue;
    for (int k = 0; k < calls[c].pushes_size(); ++k) {
      OfferKeyList(key_lists_, servers[c], calls[c].mutable_pushes(k), &held[c][k]);
    }
  }
  std::vector<proto::PushPullResponse> replies(servers.size());
  // Each part's values go to its op's buffer; a failed part's are passed over.
  auto scatter = [&](size_t c, const SegmentedBytes& values) -> absl::Status {
    const proto::PushPullResponse& reply = replies[c];
    if (reply.results_size() != static_cast<int>(members[c].size())) {
      return absl::InternalError(absl::StrCat("PushPull reply has ", reply.results_size(),
                                              " results for ", members[c].size(), " pushes"));
    }
    const proto::ValueEncoding encoding = options_.value_encoding;
    uint64_t expected = 0;
    for (size_t i : members[c]) expected += parts[i].num_values() * BytesPerValue(encoding);
    if (values.size() != expected) {
      return absl::InternalError(absl::StrCat("PushPull reply has ", values.size(),
                                              " bytes of values, expected ", expected));
    }
    SegmentedBytes::Reader reader(values);
    for (size_t k = 0; k < members[c].size(); ++k) {
      const Part& part = parts[members[c][k]];
      if (reply.results(static_cast<int>(k)).code() != 0) {
        reader.Skip(part.num_values() * BytesPerValue(encoding));
        continue;
      }
      ScatterPart(part, reader, bases[part.op], encoding);
    }
    return absl::OkStatus();
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
            [&, c](const absl::Status& status) {
              if (!status.ok()) return false;
              for (const proto::PullResponse& r : replies[c].results()) {
                if (IsKeyListMiss(absl::Status(static_cast<absl::StatusCode>(r.code()),
                                               r.message()))) {
                  return true;
                }
              }
              return false;
            },
            [&, c] {
              bool restored = false;
              for (int k = 0; k < calls[c].pushes_size(); ++k) {
                restored |= RestoreKeyList(key_lists_, servers[c], calls[c].mutable_pushes(k),
                                           &held[c][k]);
              }
              return restored;
            },
            std::move(done));
      });
  for (size_t c = 0; c < servers.size(); ++c) {
    if (!call_status[c].ok()) continue;
    for (int k = 0; k < calls[c].pushes_size() && k < replies[c].results_size(); ++k) {
      if (replies[c].results(k).code() == 0) {
        NoteKeyListSent(key_lists_, servers[c], calls[c].pushes(k));
      }
    }
  }
  // Each part's own status, and its reply.
  std::vector<absl::Status> status(parts.size());
  std::vector<proto::PullResponse> part_replies(parts.size());
  for (size_t c = 0; c < servers.size(); ++c) {
    for (size_t k = 0; k < members[c].size(); ++k) {
      const size_t i = members[c][k];
      if (!call_status[c].ok()) {
        status[i] = call_status[c];
        continue;
      }
      part_replies[i] = replies[c].results(static_cast<int>(k));
      if (part_replies[i].code() != 0) {
        status[i] = absl::Status(
            static_cast<absl::StatusCode>(part_replies[i].code()),
            absl::StrCat(transport_->ServerName(servers[c]), ": PushPull: ",
                         part_replies[i].message()));
      }
    }
  }
  const absl::Status first_error = CallRunner::FirstError(status);
  if (!first_error.ok()) {
    if (parts.size() == 1) return first_error;
    PushReport report;
    for (size_t i = 0; i < parts.size(); ++i) {
      report.parts.push_back(ReportPart(parts[i], status[i]));
    }
    return WithPartList(first_error, report, *transport_);
  }
  FillPullInfo(parts, part_replies, num_ops, info);
  return absl::OkStatus();
}

void PsClient::SendPushParts(std::shared_ptr<PushCall> call, size_t num_ops, Versions* versions,
                             PushReport* report, PushDone done) {
  std::vector<int> servers;
  servers.reserve(call->parts.size());
  for (const Part& part : call->parts) servers.push_back(part.server);
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
      std::move(servers), "Push", policy,
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
      [this, c, num_ops, versions, report, done = std::move(done)](
          std::vector<absl::Status> status) {
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
  const std::vector<Part>& parts = call.parts;
  const absl::Status first_error = CallRunner::FirstError(status);
  PushReport local;
  PushReport* out = report != nullptr ? report : &local;
  if (report != nullptr || (!first_error.ok() && parts.size() > 1)) {
    out->parts.clear();
    for (size_t i = 0; i < parts.size(); ++i) {
      out->parts.push_back(ReportPart(parts[i], status[i]));
    }
  }
  if (!first_error.ok()) {
    return parts.size() > 1 ? WithPartList(first_error, *out, *transport_) : first_error;
  }
  if (versions != nullptr) {
    versions->assign(num_ops * transport_->num_servers(), 0);
    for (size_t i = 0; i < parts.size(); ++i) {
      uint64_t& slot = (*versions)[parts[i].op * transport_->num_servers() + parts[i].server];
      slot = std::max(slot, call.replies[i].version());
    }
  }
  return absl::OkStatus();
}

void PsClient::PushBatched(std::shared_ptr<PushCall> call, size_t num_ops, Versions* versions,
                           PushReport* report, PushDone done) {
  auto item = std::make_unique<BatchItem>();
  const Part& part = call->parts[0];
  item->request = std::move(call->requests.headers[0]);
  uint64_t bytes = 0;
  for (absl::string_view piece : call->requests.pieces[0]) bytes += piece.size();
  std::string* values = item->request.mutable_values();
  values->reserve(bytes);
  for (absl::string_view piece : call->requests.pieces[0]) {
    values->append(piece.data(), piece.size());
  }
  const int server = part.server;
  item->done = [this, call, num_ops, versions, report, done = std::move(done)](
                   absl::Status status, uint64_t version) {
    const Part& part = call->parts[0];
    if (report != nullptr) report->parts.push_back(ReportPart(part, status));
    if (status.ok() && versions != nullptr) {
      versions->assign(num_ops * transport_->num_servers(), 0);
      (*versions)[part.op * transport_->num_servers() + part.server] = version;
    }
    done(std::move(status));
  };
  SubmitBatched(server, std::move(item));
}

void PsClient::NotePushed(uint64_t clock) {
  uint64_t seen = clock_value_.load();
  while (seen < clock + 1 && !clock_value_.compare_exchange_weak(seen, clock + 1)) {
  }
}

void PsClient::SubmitBatched(int server, std::unique_ptr<BatchItem> item) {
  ServerBatcher& b = *batchers_[server];
  std::vector<std::unique_ptr<BatchItem>> batch;
  {
    absl::MutexLock lock(&b.mu);
    b.queue.push_back(std::move(item));
    if (b.in_flight == kBatchesInFlight) return;  // goes out when a batch returns
    ++b.in_flight;
    batch.swap(b.queue);
  }
  SendBatch(server, std::move(batch));
}

void PsClient::SendBatch(int server, std::vector<std::unique_ptr<BatchItem>> items) {
  struct BatchCall {
    std::vector<std::unique_ptr<BatchItem>> items;
    proto::PushBatchRequest request;
    proto::PushBatchResponse reply;
  };
  BeginAsync();
  auto call = std::make_shared<BatchCall>();
  call->items = std::move(items);
  for (auto& item : call->items) call->request.add_pushes()->Swap(&item->request);
  // Retries resend every push with its own request id: each is de-duplicated
  // on its own.
  runner_.RunAsync(
      {server}, "PushBatch", DataPolicy(),
      [this, server, call](size_t, absl::Time deadline, Transport::Done d) {
        call->reply.Clear();
        transport_->PushBatch(server, call->request, deadline, &call->reply, std::move(d));
      },
      [this, server, call](std::vector<absl::Status> statuses) {
        const absl::Status& status = statuses[0];
        std::vector<absl::Status> results(call->items.size());
        for (size_t i = 0; i < results.size(); ++i) {
          if (!status.ok()) {
            results[i] = status;
          } else if (i >= static_cast<size_t>(call->reply.results_size())) {
            results[i] = absl::InternalError(absl::StrCat(
                transport_->ServerName(server), ": PushBatch reply has ",
                call->reply.results_size(), " results for ", call->items.size(), " pushes"));
          } else if (call->reply.results(i).code() != 0) {
            results[i] = absl::Status(
                static_cast<absl::StatusCode>(call->reply.results(i).code()),
                absl::StrCat(transport_->ServerName(server), ": Push: ",
                             call->reply.results(i).message()));
          }
        }
        // The dones first: pushes they start queue behind this batch's slot
        // and go out together in the next batch.
        for (size_t i = 0; i < results.size(); ++i) {
          const uint64_t version = results[i].ok() ? call->reply.results(i).version() : 0;
          call->items[i]->done(std::move(results[i]), version);
        }
        // This batch's slot passes to what queued meanwhile, or is freed.
        ServerBatcher& b = *batchers_[server];
        std::vector<std::unique_ptr<BatchItem>> next;
        {
          absl::MutexLock lock(&b.mu);
          if (b.queue.empty()) {
            --b.in_flight;
          } else {
            next.swap(b.queue);
          }
        }
        if (!next.empty()) SendBatch(server, std::move(next));
        EndAsync();  // last: the client may be destroyed once none is left
      });
}

}  // namespace ps
