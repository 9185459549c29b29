// The planner without sockets: every key goes to its owner, parts respect
// the cap, offsets cover the caller's buffer exactly once, round_parts
// counts the parts of an op per server, bad ops are refused, and PushPull
// calls group parts by server under their cap.
#include "worker/client/planner.h"

#include <cstring>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// Checks a plan of one dense op [begin, end) of `width`, capped at
// `max_values`.
void CheckDensePlan(const Placement& placement, const std::vector<Part>& parts,
                    const std::string& table, uint64_t begin, uint64_t end, uint64_t width,
                    uint64_t max_values) {
  std::vector<int> covered((end - begin) * width, 0);
  std::map<int, uint32_t> per_server;
  for (const Part& part : parts) {
    EXPECT_EQ(part.table, table);
    EXPECT_EQ(part.width, width);
    EXPECT_TRUE(part.positions.empty());
    EXPECT_FALSE(part.ranges.empty());
    EXPECT_LE(part.num_values(), std::max(max_values, width)) << "part over the cap";
    ++per_server[part.server];
    for (const PlannedRange& r : part.ranges) {
      ASSERT_LT(r.begin, r.end);
      ASSERT_GE(r.begin, begin);
      ASSERT_LE(r.end, end);
      EXPECT_EQ(r.offset, (r.begin - begin) * width);
      for (uint64_t k = r.begin; k < r.end; ++k) {
        EXPECT_EQ(placement.OwnerOfKey(table, k), part.server) << "key " << k;
      }
    }
    part.ForEachRun([&](uint64_t offset, uint64_t count) {
      ASSERT_LE(offset + count, covered.size());
      for (uint64_t v = offset; v < offset + count; ++v) ++covered[v];
    });
  }
  for (size_t v = 0; v < covered.size(); ++v) ASSERT_EQ(covered[v], 1) << "value " << v;
  for (const Part& part : parts) EXPECT_EQ(part.round_parts, per_server[part.server]);
}

TEST(PlannerTest, DenseRangesGoToTheirOwnersInCappedPartsCoveringTheBuffer) {
  const Placement placement(3, {/*slice_size=*/5, 64});
  for (uint64_t width : std::vector<uint64_t>{1, 2, 3, 7}) {
    for (uint64_t cap : std::vector<uint64_t>{1, 6, 7, 50, 1u << 20}) {
      std::vector<float> grads(98 * width);
      PushRange op{"t", 3, 101, grads};
      auto parts = PlanPush(placement, {&op, 1}, cap);
      ASSERT_TRUE(parts.ok()) << parts.status();
      SCOPED_TRACE(testing::Message() << "width " << width << " cap " << cap);
      CheckDensePlan(placement, *parts, "t", 3, 101, width, cap);
      // A small cap cuts ranges across parts; a large one gives one part per
      // server.
      if (cap >= 98 * width) {
        std::set<int> servers;
        for (const Part& p : *parts) EXPECT_TRUE(servers.insert(p.server).second);
        EXPECT_EQ(servers.size(), 3u);
      }
    }
  }
}

TEST(PlannerTest, SeveralOpsKeepTheirIndexAndOwnBuffers) {
  const Placement placement(4, {/*slice_size=*/8, 64});
  std::vector<float> a(40 * 2), b(0), c(100);
  const PullRange ops[] = {{"a", 10, 50, absl::MakeSpan(a)},
                           {"b", 7, 7, absl::MakeSpan(b)},  // empty: no parts
                           {"c", 0, 100, absl::MakeSpan(c)}};
  auto parts = PlanPull(placement, ops, 16);
  ASSERT_TRUE(parts.ok()) << parts.status();
  std::vector<Part> of_a, of_c;
  size_t last_op = 0;
  for (const Part& p : *parts) {
    EXPECT_GE(p.op, last_op) << "parts are ordered by op";
    last_op = p.op;
    ASSERT_NE(p.op, 1u);
    (p.op == 0 ? of_a : of_c).push_back(p);
  }
  CheckDensePlan(placement, of_a, "a", 10, 50, 2, 16);
  CheckDensePlan(placement, of_c, "c", 0, 100, 1, 16);
}

TEST(PlannerTest, RoundPartsCountsThePartsOfTheOpOnEachServer) {
  const Placement placement(2, {/*slice_size=*/4, 64});
  std::vector<float> grads(64);
  PushRange op{"t", 0, 64, grads};
  auto parts = PlanPush(placement, {&op, 1}, /*max_values=*/3);
  ASSERT_TRUE(parts.ok());
  std::map<int, uint64_t> keys_on;
  for (const Part& p : *parts) keys_on[p.server] += p.num_keys();
  for (const Part& p : *parts) {
    // Parts of a server are full (3 keys) except possibly its last one.
    EXPECT_EQ(p.round_parts, (keys_on[p.server] + 2) / 3) << "server " << p.server;
  }
}

TEST(PlannerTest, BadDenseOpsAreRefusedNamingTheTable) {
  const Placement placement(2);
  std::vector<float> values(6);
  PullRange reversed{"emb", 9, 3, absl::MakeSpan(values)};
  auto r = PlanPull(placement, {&reversed, 1}, 100);
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(r.status().message(), HasSubstr("pull of table 'emb'"));
  EXPECT_THAT(r.status().message(), HasSubstr("reversed"));

  PushRange uneven{"w", 0, 4, absl::MakeConstSpan(values)};  // 6 values, 4 keys
  auto u = PlanPush(placement, {&uneven, 1}, 100);
  EXPECT_EQ(u.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(u.status().message(), HasSubstr("push to table 'w'"));

  PushRange no_values{"w", 0, 4, {}};
  EXPECT_EQ(PlanPush(placement, {&no_values, 1}, 100).status().code(),
            absl::StatusCode::kInvalidArgument);

  // One bad op fails the whole plan, even after a good one.
  const PushRange ops[] = {{"ok", 0, 3, absl::MakeConstSpan(values).subspan(0, 3)}, uneven};
  EXPECT_FALSE(PlanPush(placement, ops, 100).ok());
}

// A strided op (columns 3-7 of a 9 x 20 matrix, width 2): every key of every
// run goes to its owner, each value of the buffer is covered once at the
// place of its key, and a server gets its runs in one part when the cap
// allows.
TEST(PlannerTest, StridedOpsCoverEachRunOnceWithItsOwnOffsets) {
  const Placement placement(3, {/*slice_size=*/7, 64});
  constexpr uint64_t kRows = 9, kStride = 20, kBegin = 3, kEnd = 8, kWidth = 2;
  std::vector<float> values(kRows * (kEnd - kBegin) * kWidth);
  for (uint64_t cap : std::vector<uint64_t>{4, 1u << 20}) {
    PullRange op{"m", kBegin, kEnd, absl::MakeSpan(values), kRows, kStride};
    auto parts = PlanPull(placement, {&op, 1}, cap);
    ASSERT_TRUE(parts.ok()) << parts.status();
    std::vector<int> covered(values.size(), 0);
    std::map<int, int> parts_of;
    for (const Part& part : *parts) {
      ++parts_of[part.server];
      for (const PlannedRange& r : part.ranges) {
        for (uint64_t k = r.begin; k < r.end; ++k) {
          EXPECT_EQ(placement.OwnerOfKey("m", k), part.server) << "key " << k;
          const uint64_t row = k / kStride, col = k % kStride;
          ASSERT_LT(row, kRows);
          ASSERT_TRUE(col >= kBegin && col < kEnd) << "key " << k << " is not in a run";
          // Key (row, col) has its values at run `row`, place col - begin.
          EXPECT_EQ(r.offset + (k - r.begin) * kWidth,
                    (row * (kEnd - kBegin) + col - kBegin) * kWidth);
          for (uint64_t v = 0; v < kWidth; ++v) ++covered[r.offset + (k - r.begin) * kWidth + v];
        }
      }
    }
    for (size_t v = 0; v < covered.size(); ++v) ASSERT_EQ(covered[v], 1) << "value " << v;
    if (cap > values.size()) {
      for (const auto& [server, n] : parts_of) EXPECT_EQ(n, 1) << "server " << server;
    }
  }
  // Runs that overlap are refused.
  PushRange overlapping{"m", 0, 10, absl::MakeConstSpan(values).subspan(0, 30), nullptr, 3, 5};
  auto bad = PlanPush(placement, {&overlapping, 1}, 100);
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(bad.status().message(), HasSubstr("push to table 'm': 3 runs"));
}

// every_server: a server none of the op's keys go to gets a part with no
// keys (a clock-only call); without it, no part.
TEST(PlannerTest, EveryServerGivesClockOnlyPartsToTheServersNotReached) {
  const Placement placement(3, {/*slice_size=*/4, 64});
  std::vector<float> values(4);
  // Keys [0, 4): one slice, one owner.
  const int owner = placement.OwnerOfKey("t", 0);
  for (bool every : {false, true}) {
    PushRange op{"t", 0, 4, values, nullptr, 1, 0, every};
    auto parts = PlanPush(placement, {&op, 1}, 100);
    ASSERT_TRUE(parts.ok()) << parts.status();
    ASSERT_EQ(parts->size(), every ? 3u : 1u);
    for (const Part& p : *parts) {
      EXPECT_EQ(p.round_parts, 1u);
      EXPECT_EQ(p.num_keys(), p.server == owner ? 4u : 0u) << "server " << p.server;
    }
  }
}

TEST(PlannerTest, KeyListsGoToTheirOwnersInCappedPartsCoveringTheBuffer) {
  const Placement placement(3, {/*slice_size=*/4, 64});
  std::vector<uint64_t> keys;
  for (uint64_t k = 0; k < 200; ++k) keys.push_back((k * 7919) % 1000);
  keys.push_back(keys[5]);  // a key listed twice is sent twice
  // Dense slices (runs of 4 keys) and sparse ones (a hash into 64 buckets).
  for (const TableLayout layout : {TableLayout{}, TableLayout{true, 64}}) {
    for (uint32_t width : {1u, 3u}) {
      for (uint64_t cap : std::vector<uint64_t>{1, 5, 12, 1u << 20}) {
        SCOPED_TRACE(testing::Message()
                     << "sparse " << layout.sparse << " width " << width << " cap " << cap);
        auto parts =
            PlanKeys(placement, layout, "push to", "sparse", keys, width, keys.size() * width, cap);
        ASSERT_TRUE(parts.ok()) << parts.status();
        std::vector<int> seen(keys.size(), 0);
        std::vector<int> covered(keys.size() * width, 0);
        std::map<int, uint32_t> per_server;
        for (const Part& p : *parts) {
          EXPECT_TRUE(p.ranges.empty());
          EXPECT_EQ(p.table, "sparse");
          EXPECT_LE(p.num_values(), std::max<uint64_t>(cap, width));
          ++per_server[p.server];
          for (size_t pos : p.positions) {
            ++seen[pos];
            EXPECT_EQ(placement.OwnerOfSlice("sparse", placement.SliceOf(layout, keys[pos])),
                      p.server);
          }
          p.ForEachRun([&](uint64_t offset, uint64_t count) {
            for (uint64_t v = offset; v < offset + count; ++v) ++covered[v];
          });
          // Packed keys are the part's keys, in its order.
          const std::string packed = PackKeys(keys, p.positions);
          ASSERT_EQ(packed.size(), p.positions.size() * sizeof(uint64_t));
          for (size_t j = 0; j < p.positions.size(); ++j) {
            uint64_t k;
            std::memcpy(&k, packed.data() + j * sizeof(uint64_t), sizeof(k));
            EXPECT_EQ(k, keys[p.positions[j]]);
          }
        }
        for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "position " << i;
        for (size_t v = 0; v < covered.size(); ++v) ASSERT_EQ(covered[v], 1) << "value " << v;
        for (const Part& p : *parts) EXPECT_EQ(p.round_parts, per_server[p.server]);
      }
    }
  }
}

TEST(PlannerTest, GroupBySlicePutsASlicesKeysTogetherInRequestOrder) {
  // Slice size 8 (a shift) and 6 (a division); slices 0 .. 999 of the first
  // placement stay under 1024, so each slice's keys must be contiguous.
  for (uint64_t slice_size : {8u, 6u}) {
    SCOPED_TRACE(testing::Message() << "slice size " << slice_size);
    const Placement placement(2, {slice_size, 64});
    std::vector<uint64_t> keys;
    for (uint64_t k = 0; k < 3000; ++k) keys.push_back((k * 7919) % 6000);
    keys.push_back(keys[10]);  // listed twice: both kept, in order
    std::vector<uint64_t> slices;
    for (uint64_t key : keys) slices.push_back(placement.SliceOf(key));
    const std::vector<size_t> order = GroupBySlice(slices);
    ASSERT_EQ(order.size(), keys.size());
    std::vector<int> seen(keys.size(), 0);
    std::map<uint64_t, size_t> last_position;  // slice -> last position seen
    std::set<uint64_t> finished;               // slices whose group has ended
    uint64_t current = ~uint64_t{0};
    for (size_t pos : order) {
      ASSERT_LT(pos, keys.size());
      ++seen[pos];
      const uint64_t slice = placement.SliceOf(keys[pos]);
      ASSERT_EQ(slice, keys[pos] / slice_size);
      if (slice != current) {
        ASSERT_EQ(finished.count(slice), 0u) << "slice " << slice << " split in two groups";
        if (current != ~uint64_t{0}) finished.insert(current);
        current = slice;
      } else {
        ASSERT_GT(pos, last_position[slice]) << "slice " << slice << " out of request order";
      }
      last_position[slice] = pos;
    }
    for (size_t i = 0; i < seen.size(); ++i) ASSERT_EQ(seen[i], 1) << "position " << i;
  }
  // A short list keeps request order.
  const Placement placement(1, {4, 64});
  const std::vector<uint64_t> few = {40, 3, 17, 2};
  std::vector<uint64_t> few_slices;
  for (uint64_t key : few) few_slices.push_back(placement.SliceOf(key));
  EXPECT_EQ(GroupBySlice(few_slices), (std::vector<size_t>{0, 1, 2, 3}));
}

TEST(PlannerTest, BadKeyOpsAreRefusedNamingTheTable) {
  const Placement placement(2);
  const std::vector<uint64_t> keys = {1, 2, 3};
  auto zero_width = PlanKeys(placement, TableLayout{}, "pull of", "rows", keys, 0, 0, 100);
  EXPECT_EQ(zero_width.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(zero_width.status().message(), HasSubstr("pull of table 'rows'"));
  auto short_buffer = PlanKeys(placement, TableLayout{}, "push to", "rows", keys, 2, 5, 100);
  EXPECT_EQ(short_buffer.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(short_buffer.status().message(), HasSubstr("push to table 'rows'"));
  EXPECT_THAT(short_buffer.status().message(), HasSubstr("expected 6"));
  auto none = PlanKeys(placement, TableLayout{}, "push to", "rows", {}, 2, 0, 100);
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

// Parts of the given servers and sizes (one key of width `values` each).
std::vector<Part> PartsOf(const std::vector<std::pair<int, uint64_t>>& server_values) {
  std::vector<Part> parts;
  for (const auto& [server, values] : server_values) {
    Part& part = parts.emplace_back();
    part.server = server;
    part.width = values;
    part.positions = {parts.size() - 1};
  }
  return parts;
}

TEST(PlannerTest, PushPullCallsFillUpToTheCapInPlanOrder) {
  const std::vector<Part> parts = PartsOf({{0, 3}, {1, 4}, {0, 2}, {0, 5}, {1, 1}});
  const std::vector<PlannedCall> calls = GroupIntoCalls(parts, 2, /*max_values_per_call=*/6);
  ASSERT_EQ(calls.size(), 3u);
  // Ordered by first part: server 0's first call, server 1's, then server
  // 0's second, opened by the part that would have taken the first past 6.
  EXPECT_EQ(calls[0].server, 0);
  EXPECT_EQ(calls[0].parts, (std::vector<size_t>{0, 2}));
  EXPECT_EQ(calls[0].num_values, 5u);
  EXPECT_EQ(calls[1].server, 1);
  EXPECT_EQ(calls[1].parts, (std::vector<size_t>{1, 4}));
  EXPECT_EQ(calls[1].num_values, 5u);
  EXPECT_EQ(calls[2].server, 0);
  EXPECT_EQ(calls[2].parts, (std::vector<size_t>{3}));

  // Exactly at the cap: one call.
  EXPECT_EQ(GroupIntoCalls(PartsOf({{0, 2}, {0, 4}}), 1, 6).size(), 1u);
  // A part over the cap has a call of its own; the next part opens another.
  const std::vector<PlannedCall> big = GroupIntoCalls(PartsOf({{0, 9}, {0, 1}, {0, 1}}), 1, 4);
  ASSERT_EQ(big.size(), 2u);
  EXPECT_EQ(big[0].parts, (std::vector<size_t>{0}));
  EXPECT_EQ(big[1].parts, (std::vector<size_t>{1, 2}));
  EXPECT_TRUE(GroupIntoCalls({}, 3, 4).empty());
}

TEST(PlannerTest, PushPullCallsOfAPlanCarryEachPartOnceToItsServer) {
  const Placement placement(3, {/*slice_size=*/4, 64});
  std::vector<float> a(100 * 2), b(37);
  const PushRange ops[] = {{"a", 0, 100, a}, {"b", 5, 42, b}};
  auto parts = PlanPush(placement, ops, /*max_values_per_request=*/16);
  ASSERT_TRUE(parts.ok()) << parts.status();
  for (uint64_t cap : {1u, 16u, 40u, 1000u}) {
    SCOPED_TRACE(testing::Message() << "cap " << cap);
    std::vector<int> seen(parts->size(), 0);
    for (const PlannedCall& call : GroupIntoCalls(*parts, 3, cap)) {
      ASSERT_FALSE(call.parts.empty());
      uint64_t values = 0;
      for (size_t k = 0; k < call.parts.size(); ++k) {
        const size_t i = call.parts[k];
        ++seen[i];
        EXPECT_EQ((*parts)[i].server, call.server);
        if (k > 0) {
          EXPECT_GT(i, call.parts[k - 1]) << "plan order";
        }
        values += (*parts)[i].num_values();
      }
      EXPECT_EQ(values, call.num_values);
      if (call.parts.size() > 1) {
        EXPECT_LE(values, cap);
      }
    }
    for (size_t i = 0; i < seen.size(); ++i) EXPECT_EQ(seen[i], 1) << "part " << i;
  }
}

TEST(PlannerTest, DescribeKeysNamesTableAndKeys) {
  Part dense;
  dense.table = "t";
  dense.width = 1;
  dense.ranges = {{0, 5, 0}, {10, 12, 10}};
  EXPECT_EQ(DescribeKeys(dense), "table 't' keys [0, 5) [10, 12)");
  Part list;
  list.table = "s";
  list.width = 2;
  list.positions = {4, 1, 9};
  EXPECT_EQ(DescribeKeys(list), "table 's' 3 keys");
}

}  // namespace
}  // namespace ps
