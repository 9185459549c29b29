// Checkpoints of tiered tables (sparse tables whose rows are mostly on
// disk): a consistent cut and an incremental one on top of it, taken while
// rows move between the cache and the disk, restore onto 1 and 3 servers
// with every value and optimizer state bit for bit those of the same table
// kept in memory and checkpointed alike.
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_records.h"
#include "server/store/shard_store.h"
#include "tests/test_util/store_pull.h"
#include "tests/test_util/table_defs.h"

namespace ps {
namespace {

constexpr uint64_t kBuckets = 16;

// Width 4, AdaGrad (state next to the values); tiered: a 1 MiB cache
// (about 16,000 rows of this table).
proto::TableDef Def(bool tiered) {
  proto::TableDef def = SparseTableDef("emb", /*width=*/4, kBuckets);
  def = WithUniformInit(def, -0.1f, 0.1f, /*seed=*/5);
  def = WithAdagrad(def, /*learning_rate=*/0.05f, /*initial_accumulator=*/0.1f);
  if (tiered) {
    def.set_storage(proto::STORAGE_TIERED);
    def.set_cache_mb(1);
  }
  return def;
}

Placement Servers(int n) { return Placement(n, {/*slice_size=*/8, /*virtual_nodes=*/16}); }

// Stores of the table on n servers; tiered ones under a directory of their
// own (`name`).
std::vector<std::unique_ptr<ShardStore>> Stores(int n, bool tiered, const std::string& name) {
  StoreLimits limits;
  if (tiered) limits.table_dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  std::vector<std::unique_ptr<ShardStore>> stores;
  for (int i = 0; i < n; ++i) {
    stores.push_back(std::make_unique<ShardStore>(i, Servers(n), limits));
    absl::StatusOr<bool> created = stores.back()->CreateTable(Def(tiered));
    EXPECT_TRUE(created.ok()) << created.status();
  }
  return stores;
}

std::vector<uint64_t> Keys(uint64_t begin, uint64_t end) {
  std::vector<uint64_t> keys;
  for (uint64_t i = begin; i < end; ++i) keys.push_back(i * 0x9e3779b97f4a7c15ULL + 1);
  return keys;
}

ShardStore& Owner(std::vector<std::unique_ptr<ShardStore>>& stores, uint64_t key) {
  const Placement p = Servers(static_cast<int>(stores.size()));
  return *stores[p.OwnerOfSlice("emb", Placement::SparseSliceOf(key, kBuckets))];
}

// One push of every key in `keys` at `clock` (gradients varying by key and
// clock), each to its owner.
void Push(std::vector<std::unique_ptr<ShardStore>>& stores, const std::vector<uint64_t>& keys,
          uint64_t clock) {
  std::vector<std::vector<uint64_t>> by_owner(stores.size());
  const Placement p = Servers(static_cast<int>(stores.size()));
  for (uint64_t k : keys)
    by_owner[p.OwnerOfSlice("emb", Placement::SparseSliceOf(k, kBuckets))].push_back(k);
  for (size_t s = 0; s < stores.size(); ++s) {
    if (by_owner[s].empty()) continue;
    std::vector<float> g;
    for (uint64_t k : by_owner[s]) {
      for (int c = 0; c < 4; ++c)
        g.push_back(0.01f * static_cast<float>((k * 31 + clock * 7 + c) % 13) - 0.06f);
    }
    auto pushed = stores[s]->Push("emb", KeySpec::List(by_owner[s]), g, clock,
                                  [] { return absl::StatusOr<bool>(true); });
    ASSERT_TRUE(pushed.ok()) << pushed.status();
  }
}

std::vector<float> Values(std::vector<std::unique_ptr<ShardStore>>& stores,
                          const std::vector<uint64_t>& keys) {
  std::vector<float> values;
  for (uint64_t k : keys) {
    const uint64_t one[] = {k};
    for (float v : PullAll(Owner(stores, k), "emb", KeySpec::List(one))) values.push_back(v);
  }
  return values;
}

// Every store's marked cut (incremental on `since` when not 0), into one
// string of records.
std::string Cut(std::vector<std::unique_ptr<ShardStore>>& stores, uint64_t since) {
  std::string file;
  for (auto& store : stores) {
    absl::Status s = store->WriteCut(
        [&](const proto::TableDef&, std::string record) {
          file += record;
          return absl::OkStatus();
        },
        since);
    EXPECT_TRUE(s.ok()) << s;
  }
  return file;
}

void Mark(std::vector<std::unique_ptr<ShardStore>>& stores, uint64_t cut) {
  for (auto& store : stores) ASSERT_TRUE(store->MarkCut(cut).ok());
}

void Load(std::vector<std::unique_ptr<ShardStore>>& stores, const std::string& file) {
  for (auto& store : stores) {
    absl::Status s = ForEachSliceRecord(
        file, "test", [&](const SliceRecord& r) { return store->LoadRecord(r).status(); });
    ASSERT_TRUE(s.ok()) << s;
  }
}

struct Counts {
  uint64_t records = 0, deltas = 0, rows = 0;
};
Counts Count(const std::string& file) {
  Counts c;
  EXPECT_TRUE(ForEachSliceRecord(file, "count", [&](const SliceRecord& r) {
                ++c.records;
                c.deltas += r.header.delta();
                c.rows += r.header.num_rows();
                return absl::OkStatus();
              }).ok());
  return c;
}

uint64_t Demoted(ShardStore& store) {
  proto::TableStats stats;
  stats.set_table("emb");
  EXPECT_TRUE(store.FillSparseStats(&stats));
  return stats.demoted();
}

void ExpectBitIdentical(const std::vector<float>& got, const std::vector<float>& want,
                        const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  int differ = 0;
  for (size_t i = 0; i < got.size(); ++i) {
    uint32_t a, b;  // the bits: equal values of other bits differ too
    std::memcpy(&a, &got[i], sizeof a);
    std::memcpy(&b, &want[i], sizeof b);
    if (a != b && ++differ <= 3) {
      ADD_FAILURE() << what << ": value " << i << " is " << got[i] << ", expected " << want[i];
    }
  }
  EXPECT_EQ(differ, 0) << what << ": " << differ << " values differ";
}

TEST(TieredCheckpointTest, FullAndIncrementalCutsRestoreOntoOtherServerCounts) {
  // 60,000 rows on 2 servers, each with a cache of about 16,000.
  const std::vector<uint64_t> keys = Keys(0, 60000);
  const std::vector<uint64_t> some = Keys(0, 20000), others = Keys(20000, 40000);
  auto tiered = Stores(2, true, "taken");
  auto memory = Stores(2, false, "");
  for (auto* stores : {&tiered, &memory}) {
    for (uint64_t clock = 0; clock < 3; ++clock) Push(*stores, keys, clock);
  }
  ASSERT_GT(Demoted(*tiered[0]), 0u);
  // The cut at 5: pushes inside it to every key before any slice is copied
  // (rows on disk come into the cache, others go to disk with the cut's
  // values), a push outside it (copies the cache's slices), pushes inside
  // it again (rows on disk come into the cache, and into the copies), and
  // after it completes.
  uint64_t demoted_at_mark = 0;
  for (auto* stores : {&tiered, &memory}) {
    Mark(*stores, 5);
    if (stores == &tiered) demoted_at_mark = Demoted(*tiered[0]) + Demoted(*tiered[1]);
    Push(*stores, keys, 4);
    Push(*stores, some, 5);
    Push(*stores, keys, 4);
    for (auto& s : *stores) s->CompleteCut();
    Push(*stores, others, 6);
  }
  // Rows went to disk while the cut was marked (the cache stays within its
  // rows through a checkpoint), and the cut below is exact all the same.
  EXPECT_GT(Demoted(*tiered[0]) + Demoted(*tiered[1]), demoted_at_mark);
  ExpectBitIdentical(Values(tiered, keys), Values(memory, keys), "live, before the write");
  const std::string full_tiered = Cut(tiered, 0), full_memory = Cut(memory, 0);
  EXPECT_EQ(Count(full_tiered).rows, keys.size());
  EXPECT_EQ(Count(full_tiered).deltas, 0u);

  // The incremental cut at 10 on top of 5: pushes to a third of the keys.
  for (auto* stores : {&tiered, &memory}) {
    Push(*stores, some, 7);
    Mark(*stores, 10);
    for (auto& s : *stores) s->CompleteCut();
  }
  const std::string delta_tiered = Cut(tiered, 5);
  const Counts delta = Count(delta_tiered);
  EXPECT_EQ(delta.records, delta.deltas);
  // The keys pushed after the mark at 5 (some and others), not the rest.
  EXPECT_EQ(delta.rows, some.size() + others.size());
  const std::string at_ten_memory = Cut(memory, 0);

  // Restored onto 1 and 3 servers: the full cut alone gives the state at
  // 5, with the incremental one the state at 10; the next step (it reads
  // AdaGrad's accumulators) is the same as well.
  auto reference5 = Stores(1, false, "");
  Load(reference5, full_memory);
  auto reference10 = Stores(1, false, "");
  Load(reference10, at_ten_memory);
  const std::vector<float> want5 = Values(reference5, keys), want10 = Values(reference10, keys);
  Push(reference10, keys, 11);
  const std::vector<float> want_next = Values(reference10, keys);
  for (int n : {1, 3}) {
    auto at5 = Stores(n, true, absl::StrCat("restored5-", n));
    Load(at5, full_tiered);
    ExpectBitIdentical(Values(at5, keys), want5, absl::StrCat("cut 5 on ", n, " servers"));
    auto at10 = Stores(n, true, absl::StrCat("restored10-", n));
    Load(at10, full_tiered);
    Load(at10, delta_tiered);
    ExpectBitIdentical(Values(at10, keys), want10, absl::StrCat("cut 10 on ", n, " servers"));
    Push(at10, keys, 11);
    ExpectBitIdentical(Values(at10, keys), want_next,
                       absl::StrCat("the next step on ", n, " servers"));
  }
}

}  // namespace
}  // namespace ps
