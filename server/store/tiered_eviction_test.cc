// Eviction of tiered tables: the table's rules (evict_after_*, max_rows)
// over its rows in memory and on disk alike. The same pushes and sweeps on
// a tiered table and on the table in memory leave the same rows with the
// same values; an evicted row does not come back from the disk; a
// primary's evictions replayed on a copy (EvictKeys) reach its disk; an
// incremental checkpoint after evictions restores without them.
#include <algorithm>
#include <memory>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/optimizer/optimizer.h"
#include "common/placement.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_records.h"
#include "server/store/cut_state.h"
#include "server/store/initializer.h"
#include "server/store/log_row_store.h"
#include "server/store/memory_budget.h"
#include "server/store/sparse_table.h"
#include "tests/test_util/table_defs.h"

namespace ps {
namespace {

constexpr uint32_t kWidth = 4;

// Width 4, AdaGrad, 16 buckets; `evict` sets the rules; tiered: a 1 MiB
// cache (about 16,000 rows).
proto::TableDef Def(bool tiered, uint64_t evict_after_seconds, uint64_t max_rows) {
  proto::TableDef def = SparseTableDef("emb", kWidth, /*num_buckets=*/16);
  def = WithUniformInit(def, -0.1f, 0.1f, /*seed=*/9);
  def = WithAdagrad(def, /*learning_rate=*/0.05f, /*initial_accumulator=*/0.1f);
  def.set_evict_after_seconds(evict_after_seconds);
  def.set_max_rows(max_rows);
  if (tiered) {
    def.set_storage(proto::STORAGE_TIERED);
    def.set_cache_mb(1);
  }
  return def;
}

std::unique_ptr<SparseTable> Make(const proto::TableDef& def, MemoryBudget* budget, Clock* clock,
                                  const std::string& dir) {
  auto optimizer = MakeOptimizer(def);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  std::unique_ptr<RowStore> tier;
  if (def.storage() == proto::STORAGE_TIERED) {
    RowStoreOptions options;
    options.dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", dir);
    options.row_bytes = SparseTable::StoreRowBytes(def, **optimizer);
    auto store = LogRowStore::Open(options);
    EXPECT_TRUE(store.ok()) << store.status();
    tier = *std::move(store);
  }
  return std::make_unique<SparseTable>(def, *std::move(optimizer), 0, Placement(1), budget, clock,
                                       std::move(tier));
}

std::vector<uint64_t> Keys(uint64_t begin, uint64_t end) {
  std::vector<uint64_t> keys;
  for (uint64_t i = begin; i < end; ++i) keys.push_back(i * 0x9e3779b97f4a7c15ULL + 3);
  return keys;
}

void Push(SparseTable& t, const std::vector<uint64_t>& keys, uint64_t clock) {
  std::vector<float> grads(keys.size() * kWidth);
  for (size_t i = 0; i < grads.size(); ++i) grads[i] = 0.01f * static_cast<float>(i % 7) - 0.03f;
  auto pushed = t.Push(
      keys, grads, clock, [] { return absl::StatusOr<bool>(true); }, nullptr);
  ASSERT_TRUE(pushed.ok()) << pushed.status();
}

std::vector<float> Read(const SparseTable& t, const std::vector<uint64_t>& keys) {
  std::vector<float> out(keys.size() * kWidth);
  absl::Status s = t.Read(keys, reinterpret_cast<char*>(out.data()));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// The keys whose values are not their initial ones (a row exists).
std::set<uint64_t> Held(const SparseTable& t, const std::vector<uint64_t>& keys) {
  const std::vector<float> values = Read(t, keys);
  std::set<uint64_t> held;
  for (size_t i = 0; i < keys.size(); ++i) {
    std::vector<float> initial(kWidth);
    InitializeValues(t.def(), keys[i], 1, initial.data());
    if (!std::equal(initial.begin(), initial.end(), values.begin() + i * kWidth)) {
      held.insert(keys[i]);
    }
  }
  return held;
}

// The cut at `cut` (on top of `since`: 0 for a full one) of t: its
// records; *deltas counts those that are deltas, *records all.
std::string WriteCut(SparseTable& t, CutState& cuts, uint64_t cut, uint64_t since, uint64_t* deltas,
                     uint64_t* records = nullptr) {
  cuts.RaiseLastMarked(cut);
  t.SetCut(cut);
  std::string file;
  absl::Status s = t.WriteCut(
      [&](std::string record) {
        file += record;
        return absl::OkStatus();
      },
      since);
  EXPECT_TRUE(s.ok()) << s;
  t.SetCut(0);
  EXPECT_TRUE(ForEachSliceRecord(file, "count", [&](const SliceRecord& r) {
                *deltas += r.header.delta();
                if (records != nullptr) ++*records;
                return absl::OkStatus();
              }).ok());
  return file;
}

// Rows not pushed for 100 s go, from memory and from disk: the tiered
// table keeps exactly the rows and values the table in memory keeps.
TEST(TieredEvictionTest, ExpiredRowsGoFromMemoryAndDisk) {
  MemoryBudget budget(~uint64_t{0});
  FakeClock clock;
  auto tiered = Make(Def(true, 100, 0), &budget, &clock, "ttl");
  auto memory = Make(Def(false, 100, 0), &budget, &clock, "");
  const std::vector<uint64_t> old_keys = Keys(0, 40000), new_keys = Keys(40000, 50000);
  for (auto* t : {tiered.get(), memory.get()}) Push(*t, old_keys, 1);
  ASSERT_TRUE(tiered->Demote().ok());
  ASSERT_GT(tiered->demoted(), 20000u) << "most old rows are on disk";
  clock.Advance(absl::Seconds(60));
  for (auto* t : {tiered.get(), memory.get()}) Push(*t, new_keys, 2);
  clock.Advance(absl::Seconds(50));  // the old rows are 110 s old, the new 50 s
  std::vector<uint64_t> swept;
  EXPECT_EQ(tiered->Sweep(&swept), old_keys.size());
  EXPECT_EQ(memory->Sweep(), old_keys.size());
  EXPECT_EQ(std::set<uint64_t>(swept.begin(), swept.end()),
            std::set<uint64_t>(old_keys.begin(), old_keys.end()));
  std::vector<uint64_t> all = old_keys;
  all.insert(all.end(), new_keys.begin(), new_keys.end());
  EXPECT_EQ(Held(*tiered, all), std::set<uint64_t>(new_keys.begin(), new_keys.end()));
  EXPECT_EQ(Read(*tiered, all), Read(*memory, all));
  // An evicted row does not come back from the disk: a push starts it anew.
  for (auto* t : {tiered.get(), memory.get()}) Push(*t, old_keys, 3);
  EXPECT_EQ(Read(*tiered, all), Read(*memory, all));
}

// max_rows over memory and disk: a sweep leaves at most the cap, the
// least recently pushed rows going first; the rows in memory are not the
// disk's to evict.
TEST(TieredEvictionTest, TheRowCapCountsTheDisksRows) {
  MemoryBudget budget(~uint64_t{0});
  FakeClock clock;
  constexpr uint64_t kCap = 40000;
  auto tiered = Make(Def(true, 0, kCap), &budget, &clock, "cap");
  const std::vector<uint64_t> first = Keys(0, 30000), second = Keys(30000, 50000);
  Push(*tiered, first, 1);
  clock.Advance(absl::Seconds(5));
  Push(*tiered, second, 2);
  ASSERT_TRUE(tiered->Demote().ok());
  std::vector<uint64_t> all = first;
  all.insert(all.end(), second.begin(), second.end());
  ASSERT_EQ(Held(*tiered, all).size(), all.size()) << "no eviction before a sweep";
  std::vector<uint64_t> swept;
  tiered->Sweep(&swept);
  const std::set<uint64_t> held = Held(*tiered, all);
  // The cap is per bucket, 2,500 rows (every bucket holds about 3,100).
  EXPECT_EQ(held.size(), kCap);
  int newer_evicted = 0;
  for (uint64_t k : second) newer_evicted += held.count(k) == 0;
  EXPECT_EQ(newer_evicted, 0) << "rows pushed later were evicted before older ones";
  EXPECT_EQ(swept.size(), all.size() - held.size());
}

// A copy replays its primary's evictions (EvictKeys): they reach its disk.
TEST(TieredEvictionTest, ACopysEvictionsReachItsDisk) {
  MemoryBudget budget(~uint64_t{0});
  FakeClock clock;
  auto copy = Make(Def(true, 100, 0), &budget, &clock, "copy");
  const std::vector<uint64_t> keys = Keys(0, 40000);
  Push(*copy, keys, 1);
  ASSERT_TRUE(copy->Demote().ok());
  const std::vector<uint64_t> gone(keys.begin(), keys.begin() + 30000);
  EXPECT_EQ(copy->EvictKeys(gone), gone.size());
  const std::set<uint64_t> held = Held(*copy, keys);
  EXPECT_EQ(held, std::set<uint64_t>(keys.begin() + 30000, keys.end()));
}

// An incremental cut after evictions lists the evicted keys (a few a
// bucket: fewer than a bucket remembers, so the cut is incremental, not
// whole buckets): a full cut and the incremental one restored hold the
// table's rows, not the evicted.
TEST(TieredEvictionTest, AnIncrementalCutAfterEvictionsRestoresWithoutThem) {
  MemoryBudget budget(~uint64_t{0});
  FakeClock clock;
  CutState cuts;
  auto tiered = Make(Def(true, 100, 0), &budget, &clock, "cut");
  tiered->set_cut_state(&cuts);
  const std::vector<uint64_t> old_keys = Keys(0, 400), kept = Keys(400, 30000);
  std::vector<uint64_t> all = old_keys;
  all.insert(all.end(), kept.begin(), kept.end());
  Push(*tiered, all, 1);
  ASSERT_TRUE(tiered->Demote().ok());
  uint64_t deltas = 0;
  const std::string full = WriteCut(*tiered, cuts, 5, 0, &deltas);
  ASSERT_EQ(deltas, 0u);
  clock.Advance(absl::Seconds(60));
  Push(*tiered, kept, 6);
  clock.Advance(absl::Seconds(50));
  ASSERT_EQ(tiered->Sweep(), old_keys.size());
  const std::string delta = WriteCut(*tiered, cuts, 10, 5, &deltas);
  EXPECT_EQ(deltas, 16u) << "every bucket's record of the incremental cut is a delta";
  auto restored = Make(Def(true, 100, 0), &budget, &clock, "restored");
  for (const std::string* file : {&full, &delta}) {
    ASSERT_TRUE(ForEachSliceRecord(*file, "test", [&](const SliceRecord& r) {
                  return restored->LoadRecord(r).status();
                }).ok());
  }
  EXPECT_EQ(Held(*restored, all), std::set<uint64_t>(kept.begin(), kept.end()));
  EXPECT_EQ(Read(*restored, all), Read(*tiered, all));
}

// Evictions of more keys of a bucket than its cache holds, fewer than the
// bucket's rows: the bucket remembers them (its cap counts the disk's rows
// too), so the next cut on top of an earlier one is still incremental.
TEST(TieredEvictionTest, ManyEvictionsOfDiskRowsKeepCutsIncremental) {
  MemoryBudget budget(~uint64_t{0});
  FakeClock clock;
  CutState cuts;
  auto tiered = Make(Def(true, 100, 0), &budget, &clock, "many");
  tiered->set_cut_state(&cuts);
  // 64,000 rows, about 16,000 cached: 30,000 evicted (about 1,900 a
  // bucket, twice what a bucket's cache holds).
  const std::vector<uint64_t> old_keys = Keys(0, 30000), kept = Keys(30000, 64000);
  Push(*tiered, old_keys, 1);
  Push(*tiered, kept, 1);
  ASSERT_TRUE(tiered->Demote().ok());
  uint64_t deltas = 0, records = 0;
  WriteCut(*tiered, cuts, 5, 0, &deltas);
  clock.Advance(absl::Seconds(60));
  Push(*tiered, kept, 6);
  ASSERT_TRUE(tiered->Demote().ok());  // the cache back to its rows
  clock.Advance(absl::Seconds(50));
  ASSERT_EQ(tiered->Sweep(), old_keys.size());
  deltas = 0;
  WriteCut(*tiered, cuts, 10, 5, &deltas, &records);
  EXPECT_EQ(records, 16u);
  EXPECT_EQ(deltas, 16u) << "buckets were written whole: their erased keys were forgotten";
}

}  // namespace
}  // namespace ps
