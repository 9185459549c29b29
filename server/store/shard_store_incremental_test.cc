// Incremental checkpoints of the store (change tags, server/cut_state.h):
// a full checkpoint and incremental ones chained to it, written through the
// checkpoint files and restored, give bit for bit the state of a full
// checkpoint of the same moment; what an incremental one holds (nothing when
// nothing changed, only what changed after a restore, little when little
// changed); and the bound on the erased keys a sparse slice remembers.
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/clock.h"
#include "common/optimizer/optimizer.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpoint_files.h"
#include "server/checkpoint/checkpoint_records.h"
#include "server/store/cut_state.h"
#include "server/store/memory_budget.h"
#include "server/store/shard_store.h"
#include "server/store/sparse_table.h"
#include "tests/test_util/table_defs.h"
#include "tests/test_util/temp_dir.h"

namespace ps {
namespace {

const Placement kOne(1, {/*slice_size=*/8, 16});

struct Variant {
  bool sparse;
  bool adagrad;
};

// Dense: 160 keys (20 slices). Sparse: 8 buckets of at most 12 rows, rows
// not updated for 2 clocks evicted by Sweep.
proto::TableDef Def(const Variant& v) {
  proto::TableDef def;
  if (v.sparse) {
    def = SparseTableDef("t", /*width=*/2, /*num_buckets=*/8);
    def.set_max_rows(96);
    def.set_evict_after_clocks(2);
  } else {
    def = DenseTableDef("t", /*num_keys=*/160, /*width=*/2);
  }
  def = WithUniformInit(def, -1.0f, 1.0f, /*seed=*/7);
  return v.adagrad ? WithAdagrad(def, /*learning_rate=*/0.5f, /*initial_accumulator=*/0.1f)
                   : WithSgd(def, /*learning_rate=*/0.25f);
}

// The keys of indices [b, e): spread by a hash-like step for sparse tables.
std::vector<uint64_t> Keys(const Variant& v, uint64_t b, uint64_t e) {
  std::vector<uint64_t> keys;
  for (uint64_t i = b; i < e; ++i) keys.push_back(v.sparse ? i * 0x9e3779b97f4a7c15ULL + 1 : i);
  return keys;
}

void Push(ShardStore& store, const std::vector<uint64_t>& keys, uint64_t clock) {
  std::vector<float> g;
  for (uint64_t k : keys) {
    for (int c = 0; c < 2; ++c)
      g.push_back(0.01f * static_cast<float>((k * 31 + clock * 7 + c) % 13) - 0.06f);
  }
  auto pushed =
      store.Push("t", KeySpec::List(keys), g, clock, [] { return absl::StatusOr<bool>(true); });
  ASSERT_TRUE(pushed.ok()) << pushed.status();
}

// What a WriteCut wrote: the records by table, and counts.
struct Written {
  std::map<std::string, std::string> files;  // table -> its records
  int records = 0, deltas = 0;
  uint64_t rows = 0, erased = 0;
};

Written Write(ShardStore& store, uint64_t since) {
  Written w;
  absl::Status s = store.WriteCut(
      [&](const proto::TableDef& def, std::string record) {
        absl::Status parsed = ForEachSliceRecord(record, "sink", [&](const SliceRecord& r) {
          ++w.records;
          w.deltas += r.header.delta();
          w.rows += r.header.num_rows();
          w.erased += r.header.num_erased();
          return absl::OkStatus();
        });
        w.files[def.name()] += record;
        return parsed;
      },
      since);
  EXPECT_TRUE(s.ok()) << s;
  return w;
}

// Commits `w` as root/ckpt-<sequence> (incremental on base_sequence if not
// 0), one data file per table, as a server and the coordinator would.
void Commit(const std::string& root, uint64_t sequence, uint64_t base_sequence, uint64_t cut,
            const ShardStore& store, const Written& w) {
  const std::string dir = absl::StrCat(root, "/", CheckpointDirName(sequence));
  proto::CheckpointManifest m;
  m.set_sequence(sequence);
  m.set_base_sequence(base_sequence);
  m.set_cut(cut);
  m.set_num_servers(1);
  m.set_slice_size(8);
  m.set_virtual_nodes(16);
  for (const proto::TableDef& def : store.TableDefs()) *m.add_tables() = def;
  for (const auto& [table, bytes] : w.files) {
    auto writer = CheckpointFileWriter::Create(dir, absl::StrCat("server-0-", table));
    ASSERT_TRUE(writer.ok()) << writer.status();
    ASSERT_TRUE((*writer)->Append(bytes).ok());
    auto entry = (*writer)->Finish();
    ASSERT_TRUE(entry.ok()) << entry.status();
    *m.add_files() = *entry;
  }
  ASSERT_TRUE(CommitCheckpoint(dir, m).ok());
}

// A fresh store holding the checkpoint root/ckpt-<sequence> and its chain.
std::unique_ptr<ShardStore> Restore(const std::string& root, uint64_t sequence,
                                    size_t expected_chain) {
  auto store = std::make_unique<ShardStore>(0, kOne);
  auto chain = CheckpointChain(absl::StrCat(root, "/", CheckpointDirName(sequence)));
  EXPECT_TRUE(chain.ok()) << chain.status();
  if (!chain.ok()) return store;
  EXPECT_EQ(chain->size(), expected_chain);
  for (const FoundCheckpoint& c : *chain) {
    for (const proto::TableDef& def : c.manifest.tables())
      EXPECT_TRUE(store->CreateTable(def).ok());
  }
  absl::Status loaded = ForEachChainRecord(
      *chain,
      [&](const FoundCheckpoint&, const SliceRecord& r) { return store->LoadRecord(r).status(); });
  EXPECT_TRUE(loaded.ok()) << loaded;
  store->SetRestoredCut(chain->back().manifest.cut());
  return store;
}

// Every row of every table (values, optimizer state and metadata, as
// bytes), by table and key, from a full cut of the store.
using State = std::map<std::string, std::map<uint64_t, std::string>>;
State Dump(ShardStore& store) {
  State state;
  for (const proto::TableDef& def : store.TableDefs()) state[def.name()];
  EXPECT_TRUE(store.MarkCut(1000).ok());
  store.CompleteCut();
  const Written w = Write(store, 0);
  EXPECT_EQ(w.deltas, 0);
  for (const auto& [table, bytes] : w.files) {
    absl::Status s = ForEachSliceRecord(bytes, table, [&](const SliceRecord& r) {
      const proto::SliceHeader& h = r.header;
      const uint64_t fpr = h.floats_per_row(), width = h.width(), n = h.num_rows();
      for (uint64_t i = 0; i < n; ++i) {
        std::vector<float> row(fpr);
        if (h.sparse()) {
          r.CopyRow(i, row.data());
        } else {
          r.CopyFloats(i * width, width, row.data());
          r.CopyFloats(n * width + i * (fpr - width), fpr - width, row.data() + width);
        }
        const uint64_t key = h.sparse() ? r.Key(i) : h.first_key() + i;
        state[h.table()][key] = std::string(reinterpret_cast<const char*>(row.data()), fpr * 4);
      }
      return absl::OkStatus();
    });
    EXPECT_TRUE(s.ok()) << s;
  }
  return state;
}

// Same tables, same keys, and every row the same bytes.
void ExpectSameState(const State& got, const State& want, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (const auto& [table, rows] : want) {
    ASSERT_EQ(got.count(table), 1u) << what << ": no table " << table;
    const auto& got_rows = got.at(table);
    int missing = 0, extra = 0, differ = 0;
    for (const auto& [key, bytes] : rows) {
      auto it = got_rows.find(key);
      if (it == got_rows.end()) {
        if (++missing <= 3) ADD_FAILURE() << what << ": key " << key << " missing";
      } else if (it->second != bytes) {
        if (++differ <= 3) ADD_FAILURE() << what << ": key " << key << " differs";
      }
    }
    for (const auto& [key, bytes] : got_rows) {
      if (rows.count(key) == 0 && ++extra <= 3) ADD_FAILURE() << what << ": extra key " << key;
    }
    EXPECT_EQ(missing + extra + differ, 0)
        << what << ": " << missing << " missing, " << extra << " extra, " << differ
        << " different of " << rows.size() << " rows";
  }
}

class IncrementalTest : public ::testing::TestWithParam<Variant> {};

// Two stores trained alike (evictions included: sampled ones are seeded
// per slice), each on its own fake clock, with the table of `v`.
class TwinStores {
 public:
  explicit TwinStores(const Variant& v) {
    for (ShardStore* s : both_) EXPECT_TRUE(s->CreateTable(Def(v)).ok());
  }
  void Push(const std::vector<uint64_t>& keys, uint64_t clock) {
    for (ShardStore* s : both_) ::ps::Push(*s, keys, clock);
  }
  // Two seconds later, both swept: the rows evicted (the same in both).
  uint64_t Sweep() {
    uint64_t evicted[2];
    for (int i = 0; i < 2; ++i) {
      clocks_[i]->Advance(absl::Seconds(2));
      evicted[i] = both_[i]->Sweep();
    }
    EXPECT_EQ(evicted[0], evicted[1]);
    return evicted[0];
  }
  void Mark(uint64_t cut) {
    for (ShardStore* s : both_) ASSERT_TRUE(s->MarkCut(cut).ok());
  }
  void Complete() {
    for (ShardStore* s : both_) s->CompleteCut();
  }

  FakeClock clock_a, clock_b;
  ShardStore a{0, kOne, {}, &clock_a}, b{0, kOne, {}, &clock_b};

 private:
  ShardStore* both_[2] = {&a, &b};
  FakeClock* clocks_[2] = {&clock_a, &clock_b};
};

// `a` takes a full checkpoint then incremental ones, `b` full ones at the
// same cuts.
TEST_P(IncrementalTest, ChainRestoresTheStateOfAFullCheckpointOfTheSameMoment) {
  const Variant v = GetParam();
  const std::string root = TestRoot(absl::StrCat("chain", v.sparse, v.adagrad));
  TwinStores twins(v);
  ShardStore& a = twins.a;
  ShardStore& b = twins.b;
  const std::vector<uint64_t> all = Keys(v, 0, 40), half = Keys(v, 0, 20), news = Keys(v, 40, 120),
                              evicted = Keys(v, 30, 36), few = Keys(v, 5, 8),
                              later = Keys(v, 120, 140);
  for (uint64_t clock = 0; clock < 3; ++clock) twins.Push(all, clock);

  // Cut T1 = 3, full.
  twins.Mark(3);
  twins.Push(half, 3);  // outside: copies
  twins.Push(all, 2);   // inside: slices and copies
  twins.Complete();
  twins.Push(evicted, 0);  // outside (complete); old enough to be swept next
  const Written full1 = Write(a, 0);
  Write(b, 0);
  Commit(root, 1, 0, 3, a, full1);

  // Between the cuts: evictions by age (`evicted`) and by the row cap
  // (`news`), re-creations, updates.
  const uint64_t swept = twins.Sweep();
  if (v.sparse) {
    EXPECT_EQ(swept, evicted.size());
  }
  twins.Push(news, 3);
  twins.Push({evicted[0], evicted[1]}, 4);  // re-created
  twins.Push(few, 4);

  // Cut T2 = 6: pushes inside and outside it, evictions during it (after
  // the copies), keys re-created while copied.
  twins.Mark(6);
  twins.Push(Keys(v, 40, 50), 6);  // outside: copies
  if (v.sparse) {
    EXPECT_GT(twins.Sweep(), 20u);
  }
  twins.Push({evicted[2], evicted[3]}, 6);  // re-created outside the cut, after the copies
  twins.Push(Keys(v, 0, 10), 5);            // inside, some rows just swept away
  twins.Push(later, 6);
  twins.Complete();
  twins.Push(few, 5);  // outside
  const Written incr2 = Write(a, 3);
  const Written full2 = Write(b, 0);
  Commit(root, 2, 1, 6, a, incr2);
  Commit(root + "_full", 2, 0, 6, b, full2);

  // Cut T3 = 9 on top of T2: the evictions during T2's cut are in it.
  twins.Push(few, 7);
  twins.Sweep();
  twins.Mark(9);
  twins.Push(Keys(v, 10, 14), 8);
  twins.Complete();
  const Written incr3 = Write(a, 6);
  const Written full3 = Write(b, 0);
  Commit(root, 3, 2, 9, a, incr3);
  Commit(root + "_full", 3, 0, 9, b, full3);

  EXPECT_EQ(full1.deltas, 0);
  EXPECT_EQ(full2.deltas, 0);
  EXPECT_LT(v.sparse ? incr2.rows : incr2.records, v.sparse ? full2.rows : full2.records);
  // (Sparse: every row left at T3 was touched outside T2's cut.)
  if (!v.sparse) {
    EXPECT_LT(incr3.records, full3.records);
  }
  if (v.sparse) {
    EXPECT_EQ(incr2.deltas, incr2.records);
    EXPECT_GT(incr2.erased, 0u);  // the swept keys not re-created
    EXPECT_GT(incr3.erased, 0u);  // the rows swept during T2's cut
  }
  const State at1 = Dump(*Restore(root, 1, 1));
  const State at2 = Dump(*Restore(root + "_full", 2, 1));
  const State at3 = Dump(*Restore(root + "_full", 3, 1));
  ExpectSameState(Dump(*Restore(root, 2, 2)), at2, "full T1 + incremental T2");
  ExpectSameState(Dump(*Restore(root, 3, 3)), at3, "full T1 + incremental T2 + T3");
  // Not vacuous: T1's state alone is not T2's.
  EXPECT_NE(at1, at2);
}

TEST_P(IncrementalTest, NothingChangedWritesNoRecord) {
  const Variant v = GetParam();
  FakeClock clock;
  ShardStore store(0, kOne, {}, &clock);
  ASSERT_TRUE(store.CreateTable(Def(v)).ok());
  Push(store, Keys(v, 0, 40), 0);
  ASSERT_TRUE(store.MarkCut(2).ok());
  Push(store, Keys(v, 0, 40), 1);  // inside the cut: in the checkpoint at 2
  store.CompleteCut();
  const Written full = Write(store, 0);
  EXPECT_GT(full.records, 0);
  std::string ignored;
  ASSERT_TRUE(
      store.Pull("t", KeySpec::List(Keys(v, 0, 60)), &ignored).ok());  // reads change nothing
  clock.Advance(absl::Seconds(2));
  EXPECT_EQ(store.Sweep(), 0u);
  ASSERT_TRUE(store.MarkCut(3).ok());
  store.CompleteCut();
  EXPECT_EQ(Write(store, 2).records, 0);
  // On top of a cut never written here: every slice, whole.
  ASSERT_TRUE(store.MarkCut(4).ok());
  store.CompleteCut();
  const Written fallback = Write(store, 1);
  EXPECT_EQ(fallback.records, full.records);
  EXPECT_EQ(fallback.deltas, 0);
  EXPECT_EQ(fallback.rows, full.rows);
}

TEST_P(IncrementalTest, AfterARestoreOnlyLaterChangesAreWritten) {
  const Variant v = GetParam();
  const std::string root = TestRoot(absl::StrCat("restored", v.sparse, v.adagrad));
  ShardStore source(0, kOne);
  ASSERT_TRUE(source.CreateTable(Def(v)).ok());
  for (uint64_t clock = 0; clock < 3; ++clock) Push(source, Keys(v, 0, 60), clock);
  ASSERT_TRUE(source.MarkCut(3).ok());
  source.CompleteCut();
  const Written full = Write(source, 0);
  Commit(root, 1, 0, 3, source, full);

  std::unique_ptr<ShardStore> restored = Restore(root, 1, 1);
  const std::vector<uint64_t> changed = {Keys(v, 0, 1)[0], Keys(v, 50, 51)[0]};
  Push(*restored, changed, 3);
  ASSERT_TRUE(restored->MarkCut(4).ok());
  restored->CompleteCut();
  const Written incr = Write(*restored, 3);
  if (v.sparse) {
    EXPECT_EQ(incr.rows, 2u);
    EXPECT_EQ(incr.erased, 0u);
  } else {
    EXPECT_EQ(incr.records, 2);  // keys 0 and 50: slices 0 and 6
  }
  Commit(root, 2, 1, 4, *restored, incr);
  ExpectSameState(Dump(*Restore(root, 2, 2)), Dump(*restored), "restored, changed, incremental");

  // Without SetRestoredCut the restored checkpoint is no base here: whole.
  ShardStore unmarked(0, kOne);
  ASSERT_TRUE(unmarked.CreateTable(Def(v)).ok());
  ASSERT_TRUE(ForEachSliceRecord(full.files.at("t"), "full", [&](const SliceRecord& r) {
                return unmarked.LoadRecord(r).status();
              }).ok());
  ASSERT_TRUE(unmarked.MarkCut(4).ok());
  unmarked.CompleteCut();
  const Written whole = Write(unmarked, 3);
  EXPECT_EQ(whole.records, full.records);
  EXPECT_EQ(whole.deltas, 0);
}

TEST_P(IncrementalTest, FewChangesMakeASmallIncrement) {
  const Variant v = GetParam();
  proto::TableDef def = Def(v);
  def.clear_max_rows();  // no eviction
  def.clear_evict_after_clocks();
  ShardStore store(0, kOne);
  ASSERT_TRUE(store.CreateTable(def).ok());
  const std::vector<uint64_t> keys = Keys(v, 0, 80);
  for (uint64_t clock = 0; clock < 2; ++clock) Push(store, keys, clock);
  ASSERT_TRUE(store.MarkCut(2).ok());
  store.CompleteCut();
  const Written full = Write(store, 0);
  ASSERT_TRUE(store.MarkCut(5).ok());
  // Outside the cut, every key: copied slices unchanged since the base are
  // not written.
  Push(store, keys, 5);
  Push(store, Keys(v, 3, 4), 4);  // inside: one key
  store.CompleteCut();
  const Written one = Write(store, 2);
  EXPECT_EQ(one.records, 1);
  if (v.sparse) {
    EXPECT_EQ(one.rows, 1u);
  }
  EXPECT_EQ(full.records, v.sparse ? 8 : 20);
  // The pushes outside the last cut are in the next increment, whole.
  ASSERT_TRUE(store.MarkCut(6).ok());
  store.CompleteCut();
  const Written next = Write(store, 5);
  EXPECT_EQ(next.records, v.sparse ? 8 : 10);  // dense: keys 0..79, 10 slices
  EXPECT_EQ(next.rows, 80u);
}

// A checkpoint written but never committed is skipped as a base: the next
// one on top of the older base still holds every change since that base.
TEST_P(IncrementalTest, AnUncommittedOrAbortedCutLosesNothing) {
  const Variant v = GetParam();
  const std::string root = TestRoot(absl::StrCat("uncommitted", v.sparse, v.adagrad));
  ShardStore store(0, kOne);
  ASSERT_TRUE(store.CreateTable(Def(v)).ok());
  Push(store, Keys(v, 0, 40), 0);
  ASSERT_TRUE(store.MarkCut(1).ok());
  store.CompleteCut();
  Commit(root, 1, 0, 1, store, Write(store, 0));
  Push(store, Keys(v, 0, 5), 1);
  ASSERT_TRUE(store.MarkCut(3).ok());
  Push(store, Keys(v, 5, 10), 2);  // inside a cut that is then abandoned
  store.EndCut();
  ASSERT_TRUE(store.MarkCut(4).ok());
  store.CompleteCut();
  EXPECT_GT(Write(store, 1).records, 0);  // written, never committed
  Push(store, Keys(v, 10, 15), 4);
  ASSERT_TRUE(store.MarkCut(5).ok());
  store.CompleteCut();
  const Written incr = Write(store, 1);  // on top of the committed one
  Commit(root, 2, 1, 5, store, incr);
  ExpectSameState(Dump(*Restore(root, 2, 2)), Dump(store), "on top of the committed base");
}

INSTANTIATE_TEST_SUITE_P(DenseAndSparse, IncrementalTest,
                         ::testing::Values(Variant{false, false}, Variant{false, true},
                                           Variant{true, false}, Variant{true, true}),
                         [](const auto& info) {
                           return absl::StrCat(info.param.sparse ? "Sparse" : "Dense",
                                               info.param.adagrad ? "AdaGrad" : "Sgd");
                         });

// The erased keys one sparse slice remembers: pruned once no base can need
// them, capped at max(kMinErasedCap, rows), and past the cap the slice is
// written whole on top of a cut before the overflow.
TEST(ErasedKeysTest, AreBoundedAndPruned) {
  proto::TableDef def = Def({true, false});
  def.set_num_buckets(1);
  def.set_max_rows(10);
  def.clear_evict_after_clocks();
  MemoryBudget budget(~uint64_t{0});
  CutState cut_state;
  auto optimizer = MakeOptimizer(def);
  ASSERT_TRUE(optimizer.ok());
  SparseTable table(def, *std::move(optimizer), 0, kOne, &budget);
  table.set_cut_state(&cut_state);
  uint64_t next_key = 1;
  auto push_new = [&](int n, uint64_t clock) {
    for (int i = 0; i < n; ++i) {
      const uint64_t key[] = {next_key++};
      const float g[] = {0.5f, 0.5f};
      ASSERT_TRUE(table
                      .Push(
                          key, g, clock, [] { return absl::StatusOr<bool>(true); }, nullptr)
                      .ok());
      ASSERT_LE(table.erased_keys(), SparseTable::kMinErasedCap);
    }
  };
  // The store's protocol: mark, complete, write (since, prune_upto).
  auto checkpoint = [&](uint64_t cut, uint64_t since, uint64_t prune_upto) {
    cut_state.RaiseLastMarked(cut);
    cut_state.set_complete(false);
    table.SetCut(cut);
    cut_state.set_complete(true);
    std::vector<proto::SliceHeader> headers;
    EXPECT_TRUE(table
                    .WriteCut(
                        [&](std::string record) {
                          return ForEachSliceRecord(record, "r", [&](const SliceRecord& r) {
                            headers.push_back(r.header);
                            return absl::OkStatus();
                          });
                        },
                        since, prune_upto)
                    .ok());
    return headers;
  };
  push_new(10, 0);
  EXPECT_EQ(table.erased_keys(), 0u);
  checkpoint(1, 0, 1);
  push_new(30, 1);  // 30 evictions, tagged 2
  EXPECT_EQ(table.erased_keys(), 30u);
  auto headers = checkpoint(2, 1, 1);
  ASSERT_EQ(headers.size(), 1u);
  EXPECT_TRUE(headers[0].delta());
  // The rows created since (a sampled eviction may have spared an older one).
  EXPECT_GE(headers[0].num_rows(), 1u);
  EXPECT_LE(headers[0].num_rows(), 10u);
  EXPECT_EQ(headers[0].num_erased(), 30u);
  EXPECT_EQ(table.erased_keys(), 30u);       // a write on top of 1 may need them again
  EXPECT_TRUE(checkpoint(3, 2, 2).empty());  // nothing changed
  EXPECT_EQ(table.erased_keys(), 0u);        // no base before 2 is left

  // 100 evictions: the 65th finds 64 remembered (the cap, with 10 rows)
  // and forgets them all; 35 since.
  push_new(100, 3);
  EXPECT_EQ(table.erased_keys(), 100u - SparseTable::kMinErasedCap - 1);
  headers = checkpoint(4, 3, 3);
  ASSERT_EQ(headers.size(), 1u);
  EXPECT_FALSE(headers[0].delta());  // whole: erasures after 3 were forgotten
  EXPECT_EQ(headers[0].num_rows(), 10u);
  push_new(5, 4);
  headers = checkpoint(5, 4, 4);
  ASSERT_EQ(headers.size(), 1u);
  EXPECT_TRUE(headers[0].delta());  // on top of 4, nothing was forgotten
  EXPECT_GE(headers[0].num_rows(), 1u);
  EXPECT_LE(headers[0].num_rows(), 5u);
  EXPECT_EQ(headers[0].num_erased(), 5u);
  EXPECT_EQ(table.erased_keys(), 5u);  // those before 4 pruned
}

}  // namespace
}  // namespace ps
