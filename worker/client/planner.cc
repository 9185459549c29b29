#include "worker/client/planner.h"

#include <algorithm>
#include <cstring>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/hash.h"

namespace ps {

namespace {

// Values per key of a dense op: 0 for an empty range.
absl::StatusOr<uint64_t> RangeWidth(absl::string_view what, const DenseOp& op) {
  if (op.end < op.begin) {
    return absl::InvalidArgumentError(absl::StrCat(what, " table '", op.table, "': range [",
                                                   op.begin, ", ", op.end, ") is reversed"));
  }
  if (op.rows == 0 || (op.rows > 1 && op.stride < op.end - op.begin)) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " table '", op.table, "': ", op.rows, " runs of keys [", op.begin, ", ",
                     op.end, ") every ", op.stride, " keys: the runs must not overlap"));
  }
  const uint64_t n = (op.end - op.begin) * op.rows;
  if (n == 0) return 0;
  if (op.num_values % n != 0 || op.num_values == 0) {
    return absl::InvalidArgumentError(absl::StrCat(what, " table '", op.table, "': ", op.num_values,
                                                   " values for ", n,
                                                   " keys is not a whole number per key"));
  }
  return op.num_values / n;
}

uint64_t KeysPerPart(uint64_t max_values, uint64_t width) {
  return std::max<uint64_t>(1, max_values / width);
}

// Sets round_parts of parts[first, end) (all of one op).
void CountRoundParts(std::vector<Part>& parts, size_t first) {
  std::vector<uint32_t> per_server;
  for (size_t i = first; i < parts.size(); ++i) {
    if (per_server.size() <= static_cast<size_t>(parts[i].server)) {
      per_server.resize(parts[i].server + 1, 0);
    }
    ++per_server[parts[i].server];
  }
  for (size_t i = first; i < parts.size(); ++i) parts[i].round_parts = per_server[parts[i].server];
}

// Appends the parts of one non-empty dense op.
void PlanOneRange(const Placement& placement, const DenseOp& op, size_t op_index, uint64_t width,
                  uint64_t max_values, std::vector<Part>& parts) {
  const uint64_t max_keys = KeysPerPart(max_values, width);
  // Each server's runs of keys, with where their values start in the op's
  // buffer (in keys).
  struct Run {
    uint64_t begin, end, at;
  };
  std::vector<std::vector<Run>> by_server(placement.num_servers());
  const uint64_t run_keys = op.end - op.begin;
  for (uint64_t row = 0; row < op.rows; ++row) {
    const uint64_t first_key = op.begin + row * op.stride;
    for (const RangePart& r : placement.SplitRange(op.table, first_key, first_key + run_keys)) {
      by_server[r.owner].push_back({r.begin, r.end, row * run_keys + (r.begin - first_key)});
    }
  }
  const size_t first = parts.size();
  for (int s = 0; s < placement.num_servers(); ++s) {
    if (by_server[s].empty() && op.every_server) {  // a clock-only part
      Part& part = parts.emplace_back();
      part.server = s;
      part.op = op_index;
      part.table = std::string(op.table);
      part.width = width;
      continue;
    }
    uint64_t keys_in_part = max_keys;  // forces a new part first
    for (const Run& r : by_server[s]) {
      uint64_t k = r.begin;
      while (k < r.end) {
        if (keys_in_part == max_keys) {
          Part& part = parts.emplace_back();
          part.server = s;
          part.op = op_index;
          part.table = std::string(op.table);
          part.width = width;
          keys_in_part = 0;
        }
        const uint64_t e = std::min(r.end, k + (max_keys - keys_in_part));
        parts.back().ranges.push_back({k, e, (r.at + (k - r.begin)) * width});
        keys_in_part += e - k;
        k = e;
      }
    }
  }
  CountRoundParts(parts, first);
}

}  // namespace

uint64_t Part::num_keys() const {
  uint64_t n = positions.size();
  for (const PlannedRange& r : ranges) n += r.end - r.begin;
  return n;
}

absl::StatusOr<std::vector<Part>> PlanDense(const Placement& placement,
                                            absl::Span<const DenseOp> ops,
                                            uint64_t max_values_per_request,
                                            absl::string_view what) {
  std::vector<uint64_t> widths;
  widths.reserve(ops.size());
  for (const DenseOp& op : ops) {
    absl::StatusOr<uint64_t> width = RangeWidth(what, op);
    if (!width.ok()) return width.status();
    widths.push_back(*width);
  }
  std::vector<Part> parts;
  for (size_t i = 0; i < ops.size(); ++i) {
    if (widths[i] == 0) continue;
    PlanOneRange(placement, ops[i], i, widths[i], max_values_per_request, parts);
  }
  return parts;
}

absl::StatusOr<std::vector<Part>> PlanPull(const Placement& placement,
                                           absl::Span<const PullRange> ops,
                                           uint64_t max_values_per_request) {
  std::vector<DenseOp> dense;
  dense.reserve(ops.size());
  for (const PullRange& op : ops) {
    dense.push_back(
        {op.table, op.begin, op.end, op.out.size(), op.rows, op.stride, op.every_server});
  }
  return PlanDense(placement, dense, max_values_per_request, "pull of");
}

absl::StatusOr<std::vector<Part>> PlanPush(const Placement& placement,
                                           absl::Span<const PushRange> ops,
                                           uint64_t max_values_per_request) {
  std::vector<DenseOp> dense;
  dense.reserve(ops.size());
  for (const PushRange& op : ops) {
    dense.push_back(
        {op.table, op.begin, op.end, op.grads.size(), op.rows, op.stride, op.every_server});
  }
  return PlanDense(placement, dense, max_values_per_request, "push to");
}

std::vector<size_t> GroupBySlice(absl::Span<const uint64_t> slices) {
  std::vector<size_t> order(slices.size());
  // A short list is not worth the histogram: in request order.
  constexpr size_t kMinKeys = 64;
  if (slices.size() < kMinKeys) {
    std::iota(order.begin(), order.end(), size_t{0});
    return order;
  }
  // A stable counting sort on the slice's low bits: keys of one slice end up
  // together, in request order (a duplicate key is applied in order);
  // slices equal in their low bits may share a bucket, which only costs a
  // server an extra lock.
  constexpr uint64_t kBuckets = 1024;
  std::vector<uint32_t> start(kBuckets + 1, 0);
  for (uint64_t s : slices) ++start[(s & (kBuckets - 1)) + 1];
  for (uint64_t b = 1; b <= kBuckets; ++b) start[b] += start[b - 1];
  for (size_t i = 0; i < slices.size(); ++i) order[start[slices[i] & (kBuckets - 1)]++] = i;
  return order;
}

absl::StatusOr<std::vector<Part>> PlanKeys(const Placement& placement, const TableLayout& layout,
                                           absl::string_view what, absl::string_view table,
                                           absl::Span<const uint64_t> keys, uint32_t width,
                                           size_t num_values, uint64_t max_values_per_request) {
  if (width == 0 || num_values != keys.size() * width) {
    return absl::InvalidArgumentError(absl::StrCat(what, " table '", table, "': ", num_values,
                                                   " values for ", keys.size(), " keys of width ",
                                                   width, " (expected ", keys.size() * width, ")"));
  }
  const uint64_t max_keys = KeysPerPart(max_values_per_request, width);
  // Keys grouped by slice, so that a server takes each slice's lock once
  // (and this loop looks up each slice's owner once).
  std::vector<uint64_t> slices(keys.size());
  if (layout.sparse) {
    // The keys' hashes eight at a time, then each one's slice.
    Mix64Many(keys.data(), slices.data(), keys.size());
    for (uint64_t& s : slices) s = Placement::SparseSliceOfHash(s, layout.num_buckets);
  } else {
    for (size_t i = 0; i < keys.size(); ++i) slices[i] = placement.SliceOf(keys[i]);
  }
  std::vector<size_t> order = GroupBySlice(slices);
  std::vector<std::vector<size_t>> by_server(placement.num_servers());
  if (placement.num_servers() == 1) {
    by_server[0] = std::move(order);
  } else {
    // The table is hashed once; a key in the slice of the key before it
    // reuses that key's owner.
    const uint64_t table_hash = Placement::TableHash(table);
    uint64_t last_slice = ~uint64_t{0};
    int owner = 0;
    for (size_t i : order) {
      const uint64_t slice = slices[i];
      if (slice != last_slice) {
        owner = placement.OwnerOfSliceHashed(table_hash, slice);
        last_slice = slice;
      }
      by_server[owner].push_back(i);
    }
  }
  std::vector<Part> parts;
  for (int s = 0; s < placement.num_servers(); ++s) {
    std::vector<size_t>& idx = by_server[s];
    for (size_t b = 0; b < idx.size(); b += max_keys) {
      const size_t e = std::min<size_t>(idx.size(), b + max_keys);
      Part& part = parts.emplace_back();
      part.server = s;
      part.op = 0;
      part.table = std::string(table);
      part.width = width;
      if (b == 0 && e == idx.size()) {
        part.positions = std::move(idx);  // the server's keys in one part: not copied
        break;
      }
      part.positions.assign(idx.begin() + b, idx.begin() + e);
    }
  }
  CountRoundParts(parts, 0);
  return parts;
}

std::vector<int> ServersOf(absl::Span<const Part> parts) {
  std::vector<int> servers;
  servers.reserve(parts.size());
  for (const Part& part : parts) servers.push_back(part.server);
  return servers;
}

std::vector<PlannedCall> GroupIntoCalls(absl::Span<const Part> parts, int num_servers,
                                        uint64_t max_values_per_call) {
  std::vector<PlannedCall> calls;
  std::vector<int> open(num_servers, -1);  // server -> the call it fills
  for (size_t i = 0; i < parts.size(); ++i) {
    const uint64_t values = parts[i].num_values();
    int& c = open[parts[i].server];
    if (c < 0 || calls[c].num_values + values > max_values_per_call) {
      c = static_cast<int>(calls.size());
      calls.emplace_back().server = parts[i].server;
    }
    calls[c].parts.push_back(i);
    calls[c].num_values += values;
  }
  return calls;
}

std::string PackKeys(absl::Span<const uint64_t> keys, absl::Span<const size_t> positions) {
  std::string packed(positions.size() * sizeof(uint64_t), '\0');
  char* out = packed.data();
  for (size_t j = 0; j < positions.size(); ++j) {
    std::memcpy(out + j * sizeof(uint64_t), &keys[positions[j]], sizeof(uint64_t));
  }
  return packed;
}

std::string DescribeKeys(const Part& part) {
  std::string out = absl::StrCat("table '", part.table, "'");
  if (!part.ranges.empty()) {
    absl::StrAppend(&out, " keys");
    for (const PlannedRange& r : part.ranges)
      absl::StrAppend(&out, " [", r.begin, ", ", r.end, ")");
  }
  if (!part.positions.empty()) absl::StrAppend(&out, " ", part.positions.size(), " keys");
  return out;
}

}  // namespace ps
