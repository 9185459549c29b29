#include "worker/client/request_codec.h"

#include <algorithm>
#include <limits>
#include <memory>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/value_encoding.h"

namespace ps {

namespace {

template <typename Request>
void AddRange(Request* header, uint64_t begin, uint64_t end) {
  proto::KeyRange* r = header->add_ranges();
  r->set_begin(begin);
  r->set_end(end);
}

// Appends the header of part's push: table, worker, clock, a new request id,
// round parts.
proto::PushRequest& NewPushHeader(const Part& part, const RequestStamp& stamp,
                                  std::atomic<uint64_t>* next_request_id, PushRequests* out) {
  proto::PushRequest& header = out->headers.emplace_back();
  header.set_table(part.table);
  header.set_worker_id(stamp.worker_id);
  header.set_clock(stamp.clock);
  header.set_request_id(next_request_id->fetch_add(1));
  header.set_round_parts(part.round_parts);
  return header;
}

// With a 16-bit encoding: replaces each request's pieces by their values
// encoded (in out->encoded) and stamps the encoding.
void EncodePushValues(proto::ValueEncoding encoding, PushRequests* out) {
  if (encoding == proto::VALUES_F32) return;
  out->encoded.resize(out->headers.size());
  for (size_t i = 0; i < out->headers.size(); ++i) {
    uint64_t count = 0;
    for (absl::string_view piece : out->pieces[i]) count += piece.size() / sizeof(float);
    std::string& encoded = out->encoded[i];
    encoded.resize(count * BytesPerValue(encoding));
    char* dst = encoded.data();
    for (absl::string_view piece : out->pieces[i]) {
      // The pieces view float arrays (the caller's gradients or gathered).
      const auto* values = reinterpret_cast<const float*>(piece.data());
      const size_t n = piece.size() / sizeof(float);
      EncodeValues(encoding, absl::MakeConstSpan(values, n), dst);
      dst += n * BytesPerValue(encoding);
    }
    out->pieces[i] = {encoded};
    out->headers[i].set_value_encoding(encoding);
  }
}

}  // namespace

void BuildPushRequests(absl::Span<const Part> parts, absl::Span<const PushRange> ops,
                       const RequestStamp& stamp, std::atomic<uint64_t>* next_request_id,
                       PushRequests* out) {
  out->headers.reserve(parts.size());
  out->pieces.reserve(parts.size());
  for (const Part& part : parts) {
    proto::PushRequest& header = NewPushHeader(part, stamp, next_request_id, out);
    header.set_consistency(stamp.consistency);
    header.set_staleness(stamp.staleness);
    if (const proto::LayerNorms* norms = ops[part.op].layer_norms) {
      *header.mutable_layer_norms() = *norms;
    }
    if (stamp.reduce.size() > 0) *header.mutable_reduce() = stamp.reduce;
    std::vector<absl::string_view>& values = out->pieces.emplace_back();
    const float* grads = ops[part.op].grads.data();
    for (const PlannedRange& r : part.ranges) {
      AddRange(&header, r.begin, r.end);
      values.emplace_back(reinterpret_cast<const char*>(grads + r.offset),
                          (r.end - r.begin) * part.width * sizeof(float));
    }
  }
  EncodePushValues(stamp.encoding, out);
}

void BuildKeyPushRequests(absl::Span<const Part> parts, absl::Span<const uint64_t> keys,
                          uint32_t width, absl::Span<const float> grads, const RequestStamp& stamp,
                          std::atomic<uint64_t>* next_request_id, PushRequests* out) {
  out->gathered.resize(parts.size());
  out->headers.reserve(parts.size());
  out->pieces.reserve(parts.size());
  for (size_t i = 0; i < parts.size(); ++i) {
    const Part& part = parts[i];
    proto::PushRequest& header = NewPushHeader(part, stamp, next_request_id, out);
    header.set_key_list(PackKeys(keys, part.positions));
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
  EncodePushValues(stamp.encoding, out);
}

void AppendPushValues(absl::Span<const absl::string_view> pieces, std::string* values) {
  values->reserve(values->size() + TotalSize(pieces));
  for (absl::string_view piece : pieces) values->append(piece.data(), piece.size());
}

std::vector<proto::PullRequest> BuildPullRequests(absl::Span<const Part> parts,
                                                  const RequestStamp& stamp,
                                                  absl::Span<const uint64_t> keys) {
  std::vector<proto::PullRequest> requests;
  requests.reserve(parts.size());
  for (const Part& part : parts) {
    proto::PullRequest& header = requests.emplace_back();
    header.set_table(part.table);
    header.set_worker_id(stamp.worker_id);
    header.set_value_encoding(stamp.encoding);
    if (!part.positions.empty()) {
      header.set_key_list(PackKeys(keys, part.positions));
      continue;
    }
    for (const PlannedRange& r : part.ranges) AddRange(&header, r.begin, r.end);
    header.set_clock(stamp.clock);
    header.set_consistency(stamp.consistency);
    header.set_staleness(stamp.staleness);
  }
  return requests;
}

void ScatterValues(const Part& part, proto::ValueEncoding encoding, SegmentedBytes::Reader& reader,
                   float* base) {
  const size_t value_bytes = BytesPerValue(encoding);
  if (part.positions.empty()) {
    if (encoding == proto::VALUES_F32) {
      part.ForEachRun([&](uint64_t offset, uint64_t count) {
        reader.Read(count * sizeof(float), reinterpret_cast<char*>(base + offset));
      });
      return;
    }
    std::string wire;
    part.ForEachRun([&](uint64_t offset, uint64_t count) {
      wire.resize(count * value_bytes);
      reader.Read(wire.size(), wire.data());
      DecodeValues(encoding, wire.data(), count, base + offset);
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
    for (size_t j = 0; j < part.positions.size(); ++j) base[part.positions[j]] = rows[j];
  } else {
    for (size_t j = 0; j < part.positions.size(); ++j) {
      std::copy_n(rows.get() + j * width, width, base + part.positions[j] * width);
    }
  }
}

Transport::ConsumeValues PullValuesInto(const Part& part, float* base,
                                        proto::ValueEncoding encoding) {
  return [&part, base, encoding](const SegmentedBytes& values) {
    const uint64_t expected = part.num_values() * BytesPerValue(encoding);
    if (values.size() != expected) {
      return absl::InternalError(
          absl::StrCat("pull reply has ", values.size(), " bytes, expected ", expected));
    }
    SegmentedBytes::Reader reader(values);
    ScatterValues(part, encoding, reader, base);
    return absl::OkStatus();
  };
}

void BuildPushPullRequest(const PlannedCall& call, PushRequests* pushes,
                          proto::PushPullRequest* request, std::vector<absl::string_view>* pieces) {
  request->mutable_pushes()->Reserve(static_cast<int>(call.parts.size()));
  for (size_t i : call.parts) {
    proto::PushRequest* push = request->add_pushes();
    push->Swap(&pushes->headers[i]);  // a key list is ~8 bytes a key: not copied
    push->set_values_bytes(TotalSize(pushes->pieces[i]));
    pieces->insert(pieces->end(), pushes->pieces[i].begin(), pushes->pieces[i].end());
  }
}

absl::Status ScatterPushPullReply(absl::Span<const Part> parts, const PlannedCall& call,
                                  const proto::PushPullResponse& reply,
                                  const SegmentedBytes& values, absl::Span<float* const> bases,
                                  proto::ValueEncoding encoding) {
  if (reply.results_size() != static_cast<int>(call.parts.size())) {
    return absl::InternalError(absl::StrCat("PushPull reply has ", reply.results_size(),
                                            " results for ", call.parts.size(), " pushes"));
  }
  uint64_t expected = 0;
  for (size_t i : call.parts) expected += parts[i].num_values() * BytesPerValue(encoding);
  if (values.size() != expected) {
    return absl::InternalError(absl::StrCat("PushPull reply has ", values.size(),
                                            " bytes of values, expected ", expected));
  }
  SegmentedBytes::Reader reader(values);
  for (size_t k = 0; k < call.parts.size(); ++k) {
    const Part& part = parts[call.parts[k]];
    if (reply.results(static_cast<int>(k)).code() != 0) {
      reader.Skip(part.num_values() * BytesPerValue(encoding));
      continue;
    }
    ScatterValues(part, encoding, reader, bases[part.op]);
  }
  return absl::OkStatus();
}

void SplitPushPullReply(const PlannedCall& call, const absl::Status& call_status,
                        const proto::PushPullResponse& reply, const Transport& transport,
                        absl::Span<absl::Status> status, absl::Span<proto::PullResponse> results) {
  for (size_t k = 0; k < call.parts.size(); ++k) {
    const size_t i = call.parts[k];
    if (!call_status.ok()) {
      status[i] = call_status;
      continue;
    }
    results[i] = reply.results(static_cast<int>(k));
    if (results[i].code() != 0) {
      status[i] = absl::Status(
          static_cast<absl::StatusCode>(results[i].code()),
          absl::StrCat(transport.ServerName(call.server), ": PushPull: ", results[i].message()));
    }
  }
}

void FillPullInfo(absl::Span<const Part> parts, absl::Span<const proto::PullResponse> replies,
                  size_t num_ops, int num_servers, PullInfo* info) {
  if (info == nullptr) return;
  info->versions.assign(num_ops * num_servers, 0);
  info->params_clock = std::numeric_limits<uint64_t>::max();
  info->waited = absl::ZeroDuration();
  for (size_t i = 0; i < parts.size(); ++i) {
    uint64_t& slot = info->versions[parts[i].op * num_servers + parts[i].server];
    slot = std::max(slot, replies[i].version());
    info->params_clock = std::min(info->params_clock, replies[i].params_clock());
    info->waited = std::max(info->waited, absl::Microseconds(replies[i].wait_us()));
  }
}

void FillPushVersions(absl::Span<const Part> parts, absl::Span<const proto::PushResponse> replies,
                      size_t num_ops, int num_servers, Versions* versions) {
  if (versions == nullptr) return;
  versions->assign(num_ops * num_servers, 0);
  for (size_t i = 0; i < parts.size(); ++i) {
    uint64_t& slot = (*versions)[parts[i].op * num_servers + parts[i].server];
    slot = std::max(slot, replies[i].version());
  }
}

}  // namespace ps
