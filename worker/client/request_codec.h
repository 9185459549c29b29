// Request codec: the wire form of a plan (worker/client/planner.h). Builds
// the push, pull and PushPull requests of planned parts, encodes pushed
// values to 16 bits, and reads replies back: their values into the
// caller's buffers, their results into per-part statuses, versions and
// PullInfo.
//
// Free functions without state. Requests view the caller's memory (float32
// push values are not copied): the caller's buffers must outlive them, and
// a built PushRequests must stay where it is (its pieces may view short
// encoded strings in place). Thread-safe for distinct outputs.
#ifndef PS_WORKER_CLIENT_REQUEST_CODEC_H_
#define PS_WORKER_CLIENT_REQUEST_CODEC_H_

#include <atomic>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/raw_message.h"
#include "proto/ps.pb.h"
#include "worker/client/param_client.h"
#include "worker/client/planner.h"
#include "worker/client/transport.h"

namespace ps {

// What the requests of one call carry besides their keys and values.
// Key lists take no part in bounded or BSP waits: key-list requests carry
// no consistency or staleness (a BSP push of keys is never held), and a
// key-list pull no clock either.
struct RequestStamp {
  uint32_t worker_id = 0;
  uint64_t clock = 0;
  proto::Consistency consistency = proto::CONSISTENCY_ASYNC;
  uint32_t staleness = 0;
  proto::ValueEncoding encoding = proto::VALUES_F32;
  // Dense pushes: BSP's deterministic reduction (PushRequest.reduce); size
  // 0: none.
  proto::RoundBlock reduce;
};

// The requests of planned push parts: headers[i] and pieces[i] (its values:
// views of the caller's gradients, of gathered[i] or of encoded[i]) for
// part i.
struct PushRequests {
  std::vector<proto::PushRequest> headers;
  std::vector<std::vector<absl::string_view>> pieces;
  std::vector<std::vector<float>> gathered;  // key-list parts' rows
  std::vector<std::string> encoded;          // 16-bit values
  std::vector<std::string> held;             // key lists sent as their signature
};

// Dense pushes: part i's header (table, the stamp, round_parts, its ranges
// and a request id drawn from *next_request_id) and its values, viewed in
// ops[part.op].grads. With a
// 16-bit stamp.encoding the values are encoded into out->encoded and the
// headers say so.
void BuildPushRequests(absl::Span<const Part> parts, absl::Span<const PushRange> ops,
                       const RequestStamp& stamp, std::atomic<uint64_t>* next_request_id,
                       PushRequests* out);

// Key-list pushes: as BuildPushRequests, with each part's keys packed from
// `keys` and its rows of `grads` (width values per key) gathered into
// out->gathered.
void BuildKeyPushRequests(absl::Span<const Part> parts, absl::Span<const uint64_t> keys,
                          uint32_t width, absl::Span<const float> grads, const RequestStamp& stamp,
                          std::atomic<uint64_t>* next_request_id, PushRequests* out);

// Appends the concatenated pieces to *values (a batched push carries its
// values inline).
void AppendPushValues(absl::Span<const absl::string_view> pieces, std::string* values);

// Part i's pull request: its table, the stamp, and its ranges or its keys
// packed from `keys`.
std::vector<proto::PullRequest> BuildPullRequests(absl::Span<const Part> parts,
                                                  const RequestStamp& stamp,
                                                  absl::Span<const uint64_t> keys);

// Reads the part's values (in `encoding`) from `reader` into base + the
// part's offsets (Part::ForEachRun).
void ScatterValues(const Part& part, proto::ValueEncoding encoding, SegmentedBytes::Reader& reader,
                   float* base);

// A pull reply's values into base (ScatterValues); INTERNAL when they are
// not the part's size. `part` must outlive the result.
Transport::ConsumeValues PullValuesInto(const Part& part, float* base,
                                        proto::ValueEncoding encoding);

// The PushPull request of `call`: the push header of each of its parts
// (pushes->headers[i], moved out, with values_bytes set), in order, into
// *request, and their values' pieces appended to *pieces. Each part belongs
// to one call, so every header is moved once.
void BuildPushPullRequest(const PlannedCall& call, PushRequests* pushes,
                          proto::PushPullRequest* request, std::vector<absl::string_view>* pieces);

// A PushPull reply's values (in `encoding`) into the ops' buffers: part
// parts[call.parts[k]]'s to bases[its op]; a push that failed (a nonzero
// result code) has its values passed over. INTERNAL when the reply has not
// one result per push or the values are not the parts' size.
absl::Status ScatterPushPullReply(absl::Span<const Part> parts, const PlannedCall& call,
                                  const proto::PushPullResponse& reply,
                                  const SegmentedBytes& values, absl::Span<float* const> bases,
                                  proto::ValueEncoding encoding);

// Part k of `call`'s status and result: the call's error when it failed;
// otherwise the server's result for its push, and for a refused push its
// error, prefixed "<server name>: PushPull: ". Writes
// status[call.parts[k]] and results[call.parts[k]]; the reply must have
// one result per push (ScatterPushPullReply checked it).
void SplitPushPullReply(const PlannedCall& call, const absl::Status& call_status,
                        const proto::PushPullResponse& reply, const Transport& transport,
                        absl::Span<absl::Status> status, absl::Span<proto::PullResponse> results);

// PullInfo of the replies (replies[i]: part i's): per (op, server) the
// largest version, the smallest params clock and the longest wait.
// Versions are indexed op * num_servers + server.
void FillPullInfo(absl::Span<const Part> parts, absl::Span<const proto::PullResponse> replies,
                  size_t num_ops, int num_servers, PullInfo* info);
// The Versions of a push whose part i got replies[i].
void FillPushVersions(absl::Span<const Part> parts, absl::Span<const proto::PushResponse> replies,
                      size_t num_ops, int num_servers, Versions* versions);

}  // namespace ps

#endif  // PS_WORKER_CLIENT_REQUEST_CODEC_H_
