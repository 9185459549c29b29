// Checkpoints of tiered tables (sparse tables whose rows are mostly on
// disk): a consistent cut and an incremental one on top of it, taken while
// rows move between the cache and the disk, restore onto 1 and 3 servers
// with every value and optimizer state bit for bit those of the same table
// kept in memory and checkpointed alike; the rows on disk of a full cut read
// into records or left in snapshots of the stores.
#include <sys/stat.h>

#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_records.h"
#include "server/checkpoint/row_snapshots.h"
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

// A checkpoint's part as the stores write it: records, and the tiered
// tables' rows on disk as snapshots of their stores in `dir`.
struct Written {
  std::string dir;
  std::string records;
  std::vector<proto::RowStoreSnapshot> snapshots;
};

// Every store's marked cut (incremental on `since` when not 0); with
// `snapshot_dir`, a full one keeps the rows on disk as store snapshots
// there. after_record runs after each record is taken (the cut's write
// goes on after it).
Written Cut(std::vector<std::unique_ptr<ShardStore>>& stores, uint64_t since,
            const std::string& snapshot_dir = "",
            const std::function<void(const SliceRecord&)>& after_record = nullptr) {
  Written written;
  written.dir = snapshot_dir;
  for (size_t i = 0; i < stores.size(); ++i) {
    std::vector<proto::RowStoreSnapshot> snapshots;
    absl::Status s = stores[i]->WriteCut(
        [&](const proto::TableDef&, std::string record) {
          written.records += record;
          if (after_record == nullptr) return absl::OkStatus();
          return ForEachSliceRecord(record, "cut", [&](const SliceRecord& r) {
            after_record(r);
            return absl::OkStatus();
          });
        },
        since, 0, snapshot_dir.empty() ? nullptr : &snapshots,
        absl::StrCat(snapshot_dir, "/server-", i, "-rows-"));
    EXPECT_TRUE(s.ok()) << s;
    for (proto::RowStoreSnapshot& snapshot : snapshots) {
      s = DescribeRowSnapshot(snapshot_dir, &snapshot);
      EXPECT_TRUE(s.ok()) << s;
      written.snapshots.push_back(std::move(snapshot));
    }
  }
  return written;
}

std::string TempDir(const std::string& name) {
  return absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
}

void Mark(std::vector<std::unique_ptr<ShardStore>>& stores, uint64_t cut) {
  for (auto& store : stores) ASSERT_TRUE(store->MarkCut(cut).ok());
}

// Calls fn for each record of `written` as a restore reads them: the
// snapshots' first.
absl::Status ForEachRecord(const Written& written,
                           absl::FunctionRef<absl::Status(const SliceRecord&)> fn) {
  for (const proto::RowStoreSnapshot& snapshot : written.snapshots) {
    if (absl::Status s = ForEachRowSnapshotRecord(written.dir, snapshot, fn); !s.ok()) return s;
  }
  return ForEachSliceRecord(written.records, "test", fn);
}

void Load(std::vector<std::unique_ptr<ShardStore>>& stores, const Written& written) {
  for (auto& store : stores) {
    absl::Status s =
        ForEachRecord(written, [&](const SliceRecord& r) { return store->LoadRecord(r).status(); });
    ASSERT_TRUE(s.ok()) << s;
  }
}

struct Counts {
  uint64_t records = 0, deltas = 0, rows = 0;
};
Counts Count(const std::string& records) {
  Counts c;
  EXPECT_TRUE(ForEachSliceRecord(records, "count", [&](const SliceRecord& r) {
                ++c.records;
                c.deltas += r.header.delta();
                c.rows += r.header.num_rows();
                return absl::OkStatus();
              }).ok());
  return c;
}

uint64_t SnapshotRows(const Written& written) {
  uint64_t rows = 0;
  for (const proto::RowStoreSnapshot& snapshot : written.snapshots) {
    EXPECT_TRUE(ForEachRowSnapshotRecord(written.dir, snapshot, [&](const SliceRecord& r) {
                  rows += r.header.num_rows();
                  return absl::OkStatus();
                }).ok());
  }
  return rows;
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

// Full cuts with the rows on disk read into records, or left in snapshots
// of the stores (the checkpoints' way).
class TieredCheckpointTest : public testing::TestWithParam<bool> {
 protected:
  std::string SnapshotDir(const std::string& name) {
    return GetParam() ? TempDir(name) : std::string();
  }
};

INSTANTIATE_TEST_SUITE_P(RowsOnDisk, TieredCheckpointTest, testing::Bool(),
                         [](const testing::TestParamInfo<bool>& info) {
                           return info.param ? "InSnapshots" : "InRecords";
                         });

TEST_P(TieredCheckpointTest, FullAndIncrementalCutsRestoreOntoOtherServerCounts) {
  // 60,000 rows on 2 servers, each with a cache of about 16,000.
  const std::vector<uint64_t> keys = Keys(0, 60000);
  const std::vector<uint64_t> some = Keys(0, 20000), others = Keys(20000, 40000);
  // Keys created outside the cut, while the slices are copied: in none.
  const std::vector<uint64_t> fresh = Keys(60000, 70000);
  std::vector<uint64_t> all = keys;
  all.insert(all.end(), fresh.begin(), fresh.end());
  auto tiered = Stores(2, true, absl::StrCat("taken-", GetParam()));
  auto memory = Stores(2, false, "");
  for (auto* stores : {&tiered, &memory}) {
    for (uint64_t clock = 0; clock < 3; ++clock) Push(*stores, keys, clock);
  }
  ASSERT_GT(Demoted(*tiered[0]), 0u);
  // The cut at 5: pushes inside it to every key before any slice is copied
  // (rows on disk come into the cache, others go to disk with the cut's
  // values), a push outside it (copies the cache's slices), pushes inside
  // it again (rows on disk come into the cache, and into the copies), new
  // keys outside it a thousand at a time (past 1.25x the cache's rows, a
  // push moves rows to disk first), and pushes after it completes.
  uint64_t demoted_at_mark = 0;
  for (auto* stores : {&tiered, &memory}) {
    Mark(*stores, 5);
    if (stores == &tiered) demoted_at_mark = Demoted(*tiered[0]) + Demoted(*tiered[1]);
    Push(*stores, keys, 4);
    Push(*stores, some, 5);
    Push(*stores, keys, 4);
    for (size_t i = 0; i < fresh.size(); i += 1000) {
      Push(*stores, std::vector<uint64_t>(fresh.begin() + i, fresh.begin() + i + 1000), 5);
    }
    for (auto& s : *stores) s->CompleteCut();
    Push(*stores, others, 6);
  }
  // Rows went to disk while the cut was marked (the cache stays within its
  // rows through a checkpoint), and the cut below is exact all the same.
  EXPECT_GT(Demoted(*tiered[0]) + Demoted(*tiered[1]), demoted_at_mark);
  ExpectBitIdentical(Values(tiered, all), Values(memory, all), "live, before the write");
  const Written full_tiered = Cut(tiered, 0, SnapshotDir("full")), full_memory = Cut(memory, 0);
  const Counts full = Count(full_tiered.records);
  if (GetParam()) {
    // The rows on disk in a snapshot a server, the cut's cached rows (here
    // every row: pushes inside the cut brought them into the copies) as
    // deltas on top.
    EXPECT_EQ(full_tiered.snapshots.size(), 2u);
    EXPECT_EQ(full.deltas, full.records);
    EXPECT_GT(SnapshotRows(full_tiered), 0u);
    // Linked, not copied: the store still has the segment being written.
    const proto::RowStoreSnapshot& first = full_tiered.snapshots[0];
    int linked = 0;
    for (const proto::CheckpointFile& f : first.files()) {
      struct stat st;
      const std::string path = absl::StrCat(full_tiered.dir, "/", first.dir(), "/", f.name());
      linked += stat(path.c_str(), &st) == 0 && st.st_nlink == 2;
    }
    EXPECT_GT(linked, 0);
  } else {
    EXPECT_EQ(full_tiered.snapshots.size(), 0u);
    EXPECT_EQ(full.rows, keys.size());
    EXPECT_EQ(full.deltas, 0u);
  }

  // The incremental cut at 10 on top of 5: pushes to a third of the keys.
  for (auto* stores : {&tiered, &memory}) {
    Push(*stores, some, 7);
    Mark(*stores, 10);
    for (auto& s : *stores) s->CompleteCut();
  }
  const Written delta_tiered = Cut(tiered, 5, SnapshotDir("incremental"));
  EXPECT_EQ(delta_tiered.snapshots.size(), 0u);  // snapshots are of full cuts only
  const Counts delta = Count(delta_tiered.records);
  EXPECT_EQ(delta.records, delta.deltas);
  // The keys pushed after the mark at 5 (some, others and fresh), not the rest.
  EXPECT_EQ(delta.rows, some.size() + others.size() + fresh.size());
  const Written at_ten_memory = Cut(memory, 0);

  // Restored onto 1 and 3 servers: the full cut alone gives the state at
  // 5, with the incremental one the state at 10; the next step (it reads
  // AdaGrad's accumulators) is the same as well.
  auto reference5 = Stores(1, false, "");
  Load(reference5, full_memory);
  auto reference10 = Stores(1, false, "");
  Load(reference10, at_ten_memory);
  const std::vector<float> want5 = Values(reference5, all), want10 = Values(reference10, all);
  Push(reference10, keys, 11);
  const std::vector<float> want_next = Values(reference10, all);
  for (int n : {1, 3}) {
    const std::string name = absl::StrCat(GetParam(), "-", n);
    auto at5 = Stores(n, true, absl::StrCat("restored5-", name));
    Load(at5, full_tiered);
    ExpectBitIdentical(Values(at5, all), want5, absl::StrCat("cut 5 on ", n, " servers"));
    auto at10 = Stores(n, true, absl::StrCat("restored10-", name));
    Load(at10, full_tiered);
    Load(at10, delta_tiered);
    ExpectBitIdentical(Values(at10, all), want10, absl::StrCat("cut 10 on ", n, " servers"));
    Push(at10, keys, 11);
    ExpectBitIdentical(Values(at10, all), want_next,
                       absl::StrCat("the next step on ", n, " servers"));
  }
}

// While a full cut's records are written after its snapshot, pushes of new
// keys to the buckets already written fill the cache past 1.25x its rows,
// so that pushes move the least pushed rows to disk first: rows of the
// buckets still to be written stay in the cache (on disk only after the
// snapshot, they would be in neither), and the cut restores exactly.
TEST(TieredCheckpointSnapshotTest, RowsMovedToDiskWhileTheCutIsWrittenAreInIt) {
  const std::vector<uint64_t> keys = Keys(0, 30000);
  auto tiered = Stores(1, true, "moved");
  auto memory = Stores(1, false, "");
  for (auto* stores : {&tiered, &memory}) {
    for (uint64_t clock = 0; clock < 3; ++clock) Push(*stores, keys, clock);
    Mark(*stores, 5);
    Push(*stores, keys, 4);
    (*stores)[0]->CompleteCut();
  }
  const Written want = Cut(memory, 0);
  // The new keys of each bucket, pushed once the bucket's records are taken.
  std::vector<std::vector<uint64_t>> fresh(kBuckets);
  for (uint64_t k : Keys(30000, 60000)) fresh[Placement::SparseSliceOf(k, kBuckets)].push_back(k);
  const uint64_t demoted_before = Demoted(*tiered[0]);
  // Rows in the cache now: the demoter may still move some to disk, none
  // comes in before the cut is written but the new keys outside it.
  proto::TableStats before;
  before.set_table("emb");
  ASSERT_TRUE(tiered[0]->FillSparseStats(&before));
  uint64_t last_bucket = kBuckets;
  const Written got = Cut(tiered, 0, TempDir("moved-cut"), [&](const SliceRecord& r) {
    if (r.header.slice() == last_bucket) return;
    last_bucket = r.header.slice();
    // Each pushed 8 times: pushed more often than the cut's rows, so that
    // those are the ones moved to disk.
    std::vector<uint64_t>& mine = fresh[last_bucket];
    for (size_t i = 0; i < mine.size(); i += 200) {
      const std::vector<uint64_t> chunk(mine.begin() + i,
                                        mine.begin() + std::min(i + 200, mine.size()));
      for (uint64_t clock = 6; clock < 14; ++clock) Push(tiered, chunk, clock);
    }
  });
  ASSERT_EQ(got.snapshots.size(), 1u);
  // The records hold the cut's rows the cache held, the snapshot the rows
  // on disk: every key is in one or both.
  const uint64_t records = Count(got.records).rows, on_disk = SnapshotRows(got);
  EXPECT_LE(records, before.rows());
  EXPECT_GT(on_disk, 0u);
  EXPECT_GE(records + on_disk, keys.size());
  EXPECT_GT(Demoted(*tiered[0]), demoted_before);
  auto restored = Stores(1, true, "moved-restored");
  Load(restored, got);
  auto reference = Stores(1, false, "");
  Load(reference, want);
  ExpectBitIdentical(Values(restored, keys), Values(reference, keys), "the cut at 5");
}

}  // namespace
}  // namespace ps
