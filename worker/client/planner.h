// Request planning: which server gets which keys of a request, in parts of
// bounded size, and where each part's values sit in the caller's buffers.
//
// Pure functions of a Placement and the caller's ops: no transport, no
// threads, no state. A Part refers to the caller's data only by offsets, so
// a plan can be made, inspected and tested without sockets. Thread-safe.
#ifndef PS_WORKER_CLIENT_PLANNER_H_
#define PS_WORKER_CLIENT_PLANNER_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/placement.h"
#include "worker/client/param_client.h"

namespace ps {

// Keys [begin, end) of a dense op; their values start at value `offset` of
// the op's buffer (key-major, so offset = (begin - op.begin) * width).
struct PlannedRange {
  uint64_t begin = 0;
  uint64_t end = 0;
  uint64_t offset = 0;
};

// One request's worth of one op, for one server.
struct Part {
  int server = 0;
  size_t op = 0;  // index of the op in the caller's list
  std::string table;
  uint64_t width = 0;  // values per key
  // Parts of this op that go to `server` (this one included): the server
  // counts a worker's round for the table complete once it has them all.
  uint32_t round_parts = 1;
  // Dense ops: the ranges, in wire order. Key-list ops: empty.
  std::vector<PlannedRange> ranges;
  // Key-list ops: positions in the caller's key list, in wire order; key j
  // of the part is keys[positions[j]], its values at positions[j] * width.
  std::vector<size_t> positions;

  uint64_t num_keys() const;
  uint64_t num_values() const { return num_keys() * width; }

  // Calls f(offset, count) for each run of values of the part, in wire
  // order: `count` values starting at value `offset` of the op's buffer.
  template <typename F>
  void ForEachRun(F f) const {
    for (const PlannedRange& r : ranges) f(r.offset, (r.end - r.begin) * width);
    for (size_t p : positions) f(p * width, width);
  }
};

// A dense op as the planner sees it: a range and the size of its buffer.
struct DenseOp {
  absl::string_view table;
  uint64_t begin = 0;
  uint64_t end = 0;
  size_t num_values = 0;
  uint64_t rows = 1;  // a strided op (PullRange): runs [begin, end) + r * stride
  uint64_t stride = 0;
  bool every_server = false;  // a part with no keys for each server not reached
};

// Plans dense ops: each op's range (each run of a strided op) is split by
// owning server (slices of one server in key order), and each server's keys
// are cut into parts of at most max(1, max_values_per_request / width)
// keys. Parts are ordered by op, then server, then key. Empty ranges give
// no parts. With every_server, a non-empty op also gets a part with no
// ranges for each server none of its keys go to (round_parts 1 there).
// `what` starts error messages ("pull of", "push to"). Errors:
// INVALID_ARGUMENT naming the table for a reversed range, a value count
// that is not a positive multiple of the key count, or a strided op whose
// runs overlap (stride < end - begin).
absl::StatusOr<std::vector<Part>> PlanDense(const Placement& placement,
                                            absl::Span<const DenseOp> ops,
                                            uint64_t max_values_per_request,
                                            absl::string_view what);
absl::StatusOr<std::vector<Part>> PlanPull(const Placement& placement,
                                           absl::Span<const PullRange> ops,
                                           uint64_t max_values_per_request);
absl::StatusOr<std::vector<Part>> PlanPush(const Placement& placement,
                                           absl::Span<const PushRange> ops,
                                           uint64_t max_values_per_request);

// Positions 0 .. slices.size() - 1 (slices[i]: key i's slice) in an order
// that puts the keys of a slice together: a stable counting sort on the
// slice's low 10 bits, so keys of one slice keep their request order, and
// the keys of slices that share those bits (1024 slices apart) are mixed.
// Lists of under 64 keys keep request order.
std::vector<size_t> GroupBySlice(absl::Span<const uint64_t> slices);

// Plans a key-list op (op index 0) on a table of the given layout (dense or
// sparse slices): key positions grouped by owning server,
// in GroupBySlice's order within a server, each group cut into parts of at
// most max(1, max_values_per_request / width) keys. A key listed twice is
// sent twice. No keys: no parts. Errors: INVALID_ARGUMENT naming the table
// when width is 0 or num_values != keys.size() * width.
absl::StatusOr<std::vector<Part>> PlanKeys(const Placement& placement, const TableLayout& layout,
                                           absl::string_view what, absl::string_view table,
                                           absl::Span<const uint64_t> keys, uint32_t width,
                                           size_t num_values, uint64_t max_values_per_request);

// The server of each part, in order.
std::vector<int> ServersOf(absl::Span<const Part> parts);

// One PushPull call: parts of a plan that go to one server together.
struct PlannedCall {
  int server = 0;
  std::vector<size_t> parts;  // indices into the plan, in plan order
  uint64_t num_values = 0;    // of those parts
};

// Groups planned parts (of any ops) into PushPull calls: each server's
// parts, in plan order, fill one call until the next part would take it
// past max_values_per_call; that part opens the server's next call. A part
// over the limit has a call of its own. Calls are ordered by their first
// part. Parts' servers must be below num_servers.
std::vector<PlannedCall> GroupIntoCalls(absl::Span<const Part> parts, int num_servers,
                                        uint64_t max_values_per_call);

// The keys of a key-list part, packed for the wire (little-endian uint64).
std::string PackKeys(absl::Span<const uint64_t> keys, absl::Span<const size_t> positions);

// The keys of a part for messages: "table 't' keys [0, 64) [128, 130)" or
// "table 't' 12 keys".
std::string DescribeKeys(const Part& part);

}  // namespace ps

#endif  // PS_WORKER_CLIENT_PLANNER_H_
