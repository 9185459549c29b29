// ParamClient: what training needs from a parameter store, whether remote
// (PsClient, over gRPC) or in this process (a local store, for measuring the
// cost of distribution). Implementations document their own thread safety.
#ifndef PS_WORKER_CLIENT_PARAM_CLIENT_H_
#define PS_WORKER_CLIENT_PARAM_CLIENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "proto/ps.pb.h"

namespace ps {

// A dense run of keys [begin, end) of a table; values are key-major,
// (end - begin) * width floats. With rows > 1, a strided op: `rows` runs,
// run r being keys [begin + r * stride, end + r * stride) (stride >=
// end - begin), their values one run after the other: columns
// [begin, end) of a table read as a row-major matrix of rows of `stride`
// keys (a model partition's share of a layer), in one request per server.
//
// every_server: the servers none of the op's keys go to get a part with no
// keys too (a clock-only pull or push), so that under bounded delay or BSP
// this worker takes part in every server's rounds of the table although it
// reads and writes only some of its keys (a model partition); without it a
// server would wait for this worker's reads and pushes of the table.
struct PullRange {
  std::string table;
  uint64_t begin = 0;
  uint64_t end = 0;
  absl::Span<float> out;
  uint64_t rows = 1;
  uint64_t stride = 0;
  bool every_server = false;
};
struct PushRange {
  std::string table;
  uint64_t begin = 0;
  uint64_t end = 0;
  absl::Span<const float> grads;
  // For a table with LARS (TableDef lars_eta): the L2 norms of the whole
  // table's parameters and of this push's whole gradient, sent with every
  // part of the push (common/optimizer/lars.h). Null: none.
  const proto::LayerNorms* layer_norms = nullptr;
  uint64_t rows = 1;  // as PullRange's
  uint64_t stride = 0;
  bool every_server = false;
};

// For each op i and server s, versions[i * num_servers + s] is the largest
// table version that server reported for the op's keys (0 where the op has
// no keys on s). For a pull: pushes applied before the read; for a push:
// pushes applied including this one.
using Versions = std::vector<uint64_t>;

// What a pull learned besides the values.
struct PullInfo {
  Versions versions;
  // Every live worker's rounds below this had been applied to the values
  // returned (the minimum over the servers that answered).
  uint64_t params_clock = 0;
  // The longest any server held the pull waiting for slower workers.
  absl::Duration waited;
};

class ParamClient {
 public:
  virtual ~ParamClient() = default;

  // Creates the table (a no-op if an identical one exists).
  virtual absl::Status CreateTable(const proto::TableDef& def) = 0;
  // Reads each op's range into its `out` span, for a worker at `clock`
  // (rounds pushed so far; the consistency model may make it wait).
  virtual absl::Status Pull(absl::Span<const PullRange> ops, uint64_t clock, PullInfo* info) = 0;
  // Applies each op's gradients with the table's optimizer; `clock` is the
  // worker's clock.
  virtual absl::Status Push(absl::Span<const PushRange> ops, uint64_t clock,
                            Versions* versions) = 0;
  // The Downpour step: applies push[i]'s gradients, then reads the same
  // range (push[i] and pull[i] name the same table and keys) into
  // pull[i].out, as a worker at clock + 1; info->versions count the push.
  // The default pushes, then pulls; PsClient does both in one round trip
  // per server (async consistency). INVALID_ARGUMENT when the ops differ.
  virtual absl::Status PushPull(absl::Span<const PushRange> push, absl::Span<const PullRange> pull,
                                uint64_t clock, PullInfo* info);
  // Number of shards the Versions are indexed by.
  virtual int num_servers() const = 0;
};

// Whether two op lists (of PushRange or PullRange) name the same tables and
// key ranges, in order.
template <typename A, typename B>
bool SameOpKeys(absl::Span<const A> a, absl::Span<const B> b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].table != b[i].table || a[i].begin != b[i].begin || a[i].end != b[i].end ||
        a[i].rows != b[i].rows || (a[i].rows > 1 && a[i].stride != b[i].stride) ||
        a[i].every_server != b[i].every_server) {
      return false;
    }
  }
  return true;
}

// INVALID_ARGUMENT unless push[i] and pull[i] name the same table and keys.
absl::Status CheckPushPullOps(absl::Span<const PushRange> push, absl::Span<const PullRange> pull);

inline absl::Status CheckPushPullOps(absl::Span<const PushRange> push,
                                     absl::Span<const PullRange> pull) {
  if (SameOpKeys(push, pull)) return absl::OkStatus();
  return absl::InvalidArgumentError(
      "PushPull: the pushed and pulled ops must name the same tables and key ranges, in order");
}

inline absl::Status ParamClient::PushPull(absl::Span<const PushRange> push,
                                          absl::Span<const PullRange> pull, uint64_t clock,
                                          PullInfo* info) {
  if (absl::Status s = CheckPushPullOps(push, pull); !s.ok()) return s;
  if (absl::Status s = Push(push, clock, nullptr); !s.ok()) return s;
  return Pull(pull, clock + 1, info);
}

}  // namespace ps

#endif  // PS_WORKER_CLIENT_PARAM_CLIENT_H_
