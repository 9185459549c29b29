// Fuzzes the parsing of a replicated cluster's etcd records: FromJson
// (common/cluster_keys.h) on RingRecord and MemberRecord values,
// ParseClusterState (common/cluster_state.h) on a KvRange, and the ring
// logic on what parses: ShardRing::FromRecord, its accessors, NextRing
// (common/shard_ring.h).
//
// Input: a control byte, then pieces separated by the marker 0xff 0xfe.
//   control bit 7 set: one JSON value, the rest of the input: a RingRecord
//                      (bit 6 clear) or a MemberRecord (bit 6 set).
//   else: up to 1 + (control & 7) entries, each two pieces: the key (its
//   first byte picks the form: 0 ring, 1 members/N, 2 synced/S/N,
//   3 draining/N, 4 adding/N, else the rest of the piece after the prefix;
//   N and S are the next bytes) and the JSON value. Keys are under
//   ClusterPrefix("fuzz"), plus one under another cluster's prefix.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/cluster_keys.h"
#include "common/cluster_state.h"
#include "common/kv_store.h"
#include "common/shard_ring.h"
#include "fuzz/fuzz_util.h"

namespace {

constexpr char kCluster[] = "fuzz";

void ExerciseRing(const ps::proto::RingRecord& record, const ps::RingInputs* inputs) {
  absl::StatusOr<ps::ShardRing> ring = ps::ShardRing::FromRecord(record);
  ps_fuzz::Note("ShardRing::FromRecord", ring.status());
  if (!ring.ok()) {
    FUZZ_CHECK(ring.status().code() == absl::StatusCode::kInvalidArgument);
    return;
  }
  FUZZ_CHECK(ring->num_shards() >= 1);
  for (int shard = 0; shard < ring->num_shards(); ++shard) {
    std::optional<uint32_t> primary = ring->Primary(shard);
    if (primary) {
      FUZZ_CHECK(ring->Holds(shard, *primary));
      (void)ring->Successor(shard, *primary);
      (void)ring->Address(*primary);
      (void)ring->Incarnation(*primary);
    }
  }
  (void)ring->Describe();
  if (inputs == nullptr) return;
  std::optional<ps::proto::RingRecord> next = ps::NextRing(ring->record(), *inputs);
  ps_fuzz::Note(next ? "NextRing: a new version" : "NextRing: no change", absl::OkStatus());
  if (!next) return;
  // A next version is one higher and again a valid ring.
  FUZZ_CHECK(next->version() == ring->version() + 1);
  absl::StatusOr<ps::ShardRing> next_ring = ps::ShardRing::FromRecord(*next);
  FUZZ_CHECK(next_ring.ok());
  FUZZ_CHECK(next_ring->num_shards() == ring->num_shards());
}

std::string KeyOf(absl::string_view piece) {
  ps_fuzz::Input in(reinterpret_cast<const uint8_t*>(piece.data()), piece.size());
  const uint8_t form = in.Byte();
  const uint32_t a = in.Byte(), b = in.Byte();
  switch (form) {
    case 0:
      return ps::RingKey(kCluster);
    case 1:
      return ps::MemberKey(kCluster, a);
    case 2:
      return ps::SyncedKey(kCluster, static_cast<int>(a), b);
    case 3:
      return ps::DrainKey(kCluster, a);
    case 4:
      return ps::AddKey(kCluster, a);
    case 5:
      return ps::MemberKey("other", a);
    default:
      return ps::ClusterPrefix(kCluster) + std::string(piece.substr(1));
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size > (size_t{64} << 10)) return 0;  // JSON rings stay small
  ps_fuzz::Input in(data, size);
  const uint8_t control = in.Byte();
  if (control & 0x80) {
    const std::string json(in.Rest());
    if (control & 0x40) {
      ps::proto::MemberRecord member;
      absl::Status s = ps::FromJson("fuzz/member", json, &member);
      ps_fuzz::Note("FromJson(MemberRecord)", s);
      if (s.ok()) {
        // What is written back parses to the same record.
        ps::proto::MemberRecord again;
        FUZZ_CHECK(ps::FromJson("again", ps::ToJson(member), &again).ok());
        FUZZ_CHECK(again.SerializeAsString() == member.SerializeAsString());
      }
    } else {
      ps::proto::RingRecord ring;
      absl::Status s = ps::FromJson("fuzz/ring", json, &ring);
      ps_fuzz::Note("FromJson(RingRecord)", s);
      if (s.ok()) ExerciseRing(ring, nullptr);
    }
    return 0;
  }

  ps::KvRange range;
  range.revision = 100;
  const int entries = 1 + (control & 7);
  for (int i = 0; i < entries && in.remaining() > 0; ++i) {
    ps::KvEntry e;
    e.key = KeyOf(in.Piece());
    e.value = std::string(in.Piece());
    e.mod_revision = i + 1;
    e.lease = (control & 8) ? 0 : 1000 + i;
    range.entries.push_back(std::move(e));
  }
  // As etcd returns them: sorted by key, keys unique.
  std::stable_sort(range.entries.begin(), range.entries.end(),
                   [](const ps::KvEntry& a, const ps::KvEntry& b) { return a.key < b.key; });
  range.entries.erase(
      std::unique(range.entries.begin(), range.entries.end(),
                  [](const ps::KvEntry& a, const ps::KvEntry& b) { return a.key == b.key; }),
      range.entries.end());

  absl::StatusOr<ps::ClusterState> state = ps::ParseClusterState(kCluster, range);
  ps_fuzz::Note("ParseClusterState", state.status());
  if (!state.ok()) {
    FUZZ_CHECK(state.status().code() == absl::StatusCode::kInvalidArgument);
    return 0;
  }
  FUZZ_CHECK(state->revision == range.revision);
  if (state->has_ring) ExerciseRing(state->ring, &state->inputs);
  return 0;
}
