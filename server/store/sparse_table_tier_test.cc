// Tiered sparse tables (SparseTable with a RowStore): every value and its
// optimizer state equal to an in-memory table's after the same pushes, with
// six times more rows than the cache holds, through demotions and
// promotions; a failed read or write of the store changes nothing. Their
// checkpoints: tiered_checkpoint_test.
#include <algorithm>
#include <atomic>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/key_spec.h"
#include "common/optimizer/optimizer.h"
#include "common/placement.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/store/log_row_store.h"
#include "server/store/memory_budget.h"
#include "server/store/shard_store.h"
#include "server/store/sparse_table.h"
#include "tests/test_util/table_defs.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

proto::TableDef Def(bool tiered) {
  proto::TableDef def = SparseTableDef("ctr/emb", /*width=*/4, /*num_buckets=*/64);
  def.set_initializer(proto::INIT_UNIFORM);
  def.set_init_low(-0.1f);
  def.set_init_high(0.1f);
  def.set_seed(7);
  def.set_optimizer(proto::OPT_ADAGRAD);
  def.set_learning_rate(0.05f);
  def.set_initial_accumulator(0.1f);
  def.set_epsilon(1e-8f);
  if (tiered) {
    def.set_storage(proto::STORAGE_TIERED);
    def.set_cache_mb(1);
  }
  return def;
}

std::unique_ptr<SparseTable> Make(const proto::TableDef& def, MemoryBudget* budget,
                                  std::unique_ptr<RowStore> tier) {
  auto optimizer = MakeOptimizer(def);
  EXPECT_TRUE(optimizer.ok()) << optimizer.status();
  return std::make_unique<SparseTable>(def, *std::move(optimizer), 0, Placement(1), budget,
                                       Clock::Real(), std::move(tier));
}

std::unique_ptr<RowStore> OpenLog(const proto::TableDef& def, const std::string& name) {
  RowStoreOptions options;
  options.dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/", name);
  auto optimizer = MakeOptimizer(def);
  options.row_bytes = SparseTable::StoreRowBytes(def, **optimizer);
  options.name = name;
  auto store = LogRowStore::Open(options);
  EXPECT_TRUE(store.ok()) << store.status();
  return store.ok() ? std::unique_ptr<RowStore>(*std::move(store)) : nullptr;
}

absl::StatusOr<bool> Admitted() { return true; }

std::vector<float> ReadAll(const SparseTable& t, const std::vector<uint64_t>& keys) {
  std::vector<float> out(keys.size() * t.def().width());
  absl::Status s = t.Read(keys, reinterpret_cast<char*>(out.data()));
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

TEST(SparseTableTierTest, TieredTableHoldsWhatAnInMemoryOneDoes) {
  MemoryBudget budget(~uint64_t{0});
  auto memory = Make(Def(false), &budget, nullptr);
  auto tiered = Make(Def(true), &budget, OpenLog(Def(true), "same"));
  const uint64_t cache = tiered->cache_rows();
  ASSERT_GT(cache, 1000u);
  const uint64_t kKeys = 6 * cache;
  std::mt19937_64 rng(3);
  // Pushes of 2,000 keys, most of them from a popular tenth (as CTR
  // features are), then the rest; the same gradients to both tables.
  std::vector<uint64_t> keys;
  std::vector<float> grads;
  for (int step = 0; step < 60; ++step) {
    keys.clear();
    for (int k = 0; k < 2000; ++k) {
      const uint64_t r = rng() % 10 < 7 ? rng() % (kKeys / 10) : rng() % kKeys;
      keys.push_back(r * 0x9e3779b97f4a7c15ULL);
    }
    grads.resize(keys.size() * 4);
    for (float& g : grads) g = static_cast<float>(static_cast<int64_t>(rng() % 2001) - 1000) / 1000;
    std::vector<float> back_memory(grads.size()), back_tiered(grads.size());
    ASSERT_TRUE(
        memory->Push(keys, grads, step, Admitted, reinterpret_cast<char*>(back_memory.data()))
            .ok());
    absl::StatusOr<bool> pushed =
        tiered->Push(keys, grads, step, Admitted, reinterpret_cast<char*>(back_tiered.data()));
    ASSERT_TRUE(pushed.ok()) << pushed.status();
    // What a push reads back is the same, bit for bit.
    ASSERT_EQ(0, std::memcmp(back_memory.data(), back_tiered.data(), grads.size() * 4))
        << "step " << step;
    if (step % 10 == 9) {
      ASSERT_TRUE(tiered->Demote().ok());
    }
  }
  ASSERT_TRUE(tiered->Demote().ok());
  EXPECT_LE(tiered->rows(), cache) << "the cache holds more rows than cache_mb's";
  EXPECT_GT(tiered->demoted(), 0u);
  EXPECT_GT(tiered->cache_misses(), 0u);
  EXPECT_GT(tiered->tier_stats().rows, tiered->rows());
  // Every key ever pushed, and keys never pushed (their initial values).
  std::vector<uint64_t> all;
  for (uint64_t r = 0; r < kKeys + 100; ++r) all.push_back(r * 0x9e3779b97f4a7c15ULL);
  const std::vector<float> want = ReadAll(*memory, all), got = ReadAll(*tiered, all);
  ASSERT_EQ(want.size(), got.size());
  EXPECT_EQ(0, std::memcmp(want.data(), got.data(), want.size() * 4));
  // The optimizer state came back with the rows: the next push is the same.
  keys.assign(all.begin(), all.begin() + 3000);
  grads.assign(keys.size() * 4, 0.5f);
  std::vector<float> a(grads.size()), b(grads.size());
  ASSERT_TRUE(memory->Push(keys, grads, 99, Admitted, reinterpret_cast<char*>(a.data())).ok());
  ASSERT_TRUE(tiered->Push(keys, grads, 99, Admitted, reinterpret_cast<char*>(b.data())).ok());
  EXPECT_EQ(0, std::memcmp(a.data(), b.data(), a.size() * 4));
}

// A store whose reads or writes fail on demand, over a real one.
class FailingStore final : public RowStore {
 public:
  explicit FailingStore(std::unique_ptr<RowStore> inner)
      : RowStore(inner->row_bytes()), inner_(std::move(inner)) {}
  std::atomic<bool> fail_reads{false}, fail_writes{false};  // the demoter reads them too
  absl::Status Write(const Batch& batch) override {
    if (fail_writes) return absl::UnavailableError("disk /dev/test failed a write");
    return inner_->Write(batch);
  }
  absl::Status Read(uint32_t slice, absl::Span<const uint64_t> keys, char* dst,
                    bool* found) const override {
    if (fail_reads) return absl::DataLossError("disk /dev/test failed a read");
    return inner_->Read(slice, keys, dst, found);
  }
  absl::Status ForEach(uint32_t slice, RowFn fn) const override {
    return inner_->ForEach(slice, fn);
  }
  absl::Status Snapshot(const std::string& dir) const override { return inner_->Snapshot(dir); }
  std::string meta() const override { return inner_->meta(); }
  RowStoreStats stats() const override { return inner_->stats(); }

 private:
  std::unique_ptr<RowStore> inner_;
};

// A push that takes the cache past its size (but not 1.25x past) leaves the
// demotion to the table's demoter thread, which brings it back under.
TEST(SparseTableTierTest, TheDemoterKeepsTheCacheUnderItsSize) {
  MemoryBudget budget(~uint64_t{0});
  auto tiered = Make(Def(true), &budget, OpenLog(Def(true), "demoter"));
  const uint64_t n = tiered->cache_rows() + tiered->cache_rows() / 5;
  std::vector<uint64_t> keys(n);
  for (uint64_t k = 0; k < n; ++k) keys[k] = k * 0x9e3779b97f4a7c15ULL;
  std::vector<float> ones(n * 4, 1.0f);
  ASSERT_TRUE(tiered->Push(keys, ones, 1, Admitted, nullptr).ok());
  const std::vector<float> before = ReadAll(*tiered, keys);
  // Waits for the demoter (bounded: 20 s).
  for (int i = 0; i < 2000 && tiered->rows() > tiered->cache_rows(); ++i) {
    absl::SleepFor(absl::Milliseconds(10));
  }
  EXPECT_LE(tiered->rows(), tiered->cache_rows());
  EXPECT_GT(tiered->demoted(), 0u);
  EXPECT_EQ(ReadAll(*tiered, keys), before);
  EXPECT_TRUE(tiered->TakeDemoteError().ok());
}

// LFU: rows pushed often stay in memory while twice the cache's rows of
// keys pushed once go through it (a cache of the most recent rows would
// have lost them all).
TEST(SparseTableTierTest, PopularRowsOutlastAPassOfColdOnes) {
  MemoryBudget budget(~uint64_t{0});
  auto tiered = Make(Def(true), &budget, OpenLog(Def(true), "lfu"));
  const uint64_t cache = tiered->cache_rows();
  std::vector<uint64_t> hot(cache / 4);
  for (uint64_t k = 0; k < hot.size(); ++k) hot[k] = k * 0x9e3779b97f4a7c15ULL;
  std::vector<float> grads(std::max<size_t>(hot.size(), 1000) * 4, 0.5f);
  for (int i = 0; i < 20; ++i) ASSERT_TRUE(tiered->Push(hot, grads, i, Admitted, nullptr).ok());
  std::vector<uint64_t> cold(1000);
  for (uint64_t b = 0; b < 2 * cache; b += cold.size()) {
    for (uint64_t k = 0; k < cold.size(); ++k)
      cold[k] = (hot.size() + b + k) * 0x9e3779b97f4a7c15ULL;
    ASSERT_TRUE(tiered->Push(cold, grads, 30, Admitted, nullptr).ok());
    ASSERT_TRUE(tiered->Demote().ok());
  }
  ASSERT_GT(tiered->demoted(), cache);
  const uint64_t misses = tiered->cache_misses();
  ReadAll(*tiered, hot);
  EXPECT_EQ(tiered->cache_misses() - misses, 0u) << "popular rows were moved to disk";
}

TEST(SparseTableTierTest, AFailingStoreChangesNothing) {
  MemoryBudget budget(~uint64_t{0});
  auto owned = std::make_unique<FailingStore>(OpenLog(Def(true), "failing"));
  FailingStore* store = owned.get();
  auto tiered = Make(Def(true), &budget, std::move(owned));
  const uint64_t n = tiered->cache_rows() * 2;
  std::vector<uint64_t> keys(n);
  for (uint64_t k = 0; k < n; ++k) keys[k] = k;
  std::vector<float> ones(n * 4, 1.0f);
  ASSERT_TRUE(tiered->Push(keys, ones, 1, Admitted, nullptr).ok());
  ASSERT_TRUE(tiered->Demote().ok());  // more than half to disk (the demoter may be at it too)
  ASSERT_GT(tiered->demoted(), 0u);
  const std::vector<float> before = ReadAll(*tiered, keys);
  // Reads fail: the push of rows on disk is refused before it is admitted.
  store->fail_reads = true;
  int admitted = 0;
  auto admit = [&]() -> absl::StatusOr<bool> {
    ++admitted;
    return true;
  };
  absl::StatusOr<bool> pushed = tiered->Push(keys, ones, 2, admit, nullptr);
  ASSERT_FALSE(pushed.ok());
  EXPECT_THAT(std::string(pushed.status().message()), HasSubstr("ctr/emb"));
  EXPECT_THAT(std::string(pushed.status().message()), HasSubstr("/dev/test"));
  EXPECT_EQ(admitted, 0) << "a push that could not read its rows was admitted";
  std::vector<float> out(n * 4);
  EXPECT_FALSE(tiered->Read(keys, reinterpret_cast<char*>(out.data())).ok());
  store->fail_reads = false;
  EXPECT_EQ(ReadAll(*tiered, keys), before);
  // Writes fail: demotion keeps every row in the cache.
  store->fail_writes = true;
  const uint64_t held = tiered->rows();
  std::vector<uint64_t> more(n);
  for (uint64_t k = 0; k < n; ++k) more[k] = n + k;
  ASSERT_TRUE(tiered->Push(more, ones, 3, Admitted, nullptr).ok());
  absl::StatusOr<uint64_t> demoted = tiered->Demote();
  ASSERT_FALSE(demoted.ok());
  EXPECT_THAT(std::string(demoted.status().message()), HasSubstr("ctr/emb"));
  EXPECT_EQ(tiered->rows(), held + n);
  // The cache is now past 1.25x its rows: the next push must move rows to
  // disk first, and is refused with the disk's error, nothing applied.
  const std::vector<float> more_before = ReadAll(*tiered, more);
  admitted = 0;
  pushed = tiered->Push(more, ones, 4, admit, nullptr);
  ASSERT_FALSE(pushed.ok());
  EXPECT_THAT(std::string(pushed.status().message()), HasSubstr("ctr/emb"));
  EXPECT_THAT(std::string(pushed.status().message()), HasSubstr("/dev/test"));
  EXPECT_EQ(admitted, 0);
  EXPECT_EQ(ReadAll(*tiered, more), more_before);
  store->fail_writes = false;
  EXPECT_EQ(ReadAll(*tiered, keys), before);
  ASSERT_TRUE(tiered->Demote().ok());
  EXPECT_LE(tiered->rows(), tiered->cache_rows());
  EXPECT_EQ(ReadAll(*tiered, keys), before);
}

}  // namespace
}  // namespace ps

namespace ps {
namespace {

// Every worker of a job creates its tables: creators of one tiered table at
// once, on a directory of an earlier run (reopening it takes a while), all
// succeed, one of them creating it (the others found it).
TEST(SparseTableTierTest, ConcurrentCreatorsOfATieredTableAllSucceed) {
  StoreLimits limits;
  limits.table_dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/creators");
  std::vector<uint64_t> keys(60000);
  for (uint64_t k = 0; k < keys.size(); ++k) keys[k] = k * 0x9e3779b97f4a7c15ULL + 9;
  {
    ShardStore first(0, Placement(1), limits);
    ASSERT_TRUE(first.CreateTable(Def(true)).ok());
    ASSERT_TRUE(
        first.Push("ctr/emb", KeySpec::List(keys), std::vector<float>(keys.size() * 4, 1.0f)).ok());
  }
  ShardStore store(0, Placement(1), limits);
  std::vector<absl::StatusOr<bool>> results(8, absl::UnknownError("not run"));
  std::vector<std::thread> creators;
  for (size_t t = 0; t < results.size(); ++t) {
    creators.emplace_back([&, t] { results[t] = store.CreateTable(Def(true)); });
  }
  for (std::thread& t : creators) t.join();
  int created = 0;
  for (const absl::StatusOr<bool>& r : results) {
    ASSERT_TRUE(r.ok()) << r.status();
    created += *r;
  }
  EXPECT_EQ(created, 1);
}

// --disk_budget_mb is the server's, over all its tiered tables: once one
// table's files took it, another table's push that must move rows to disk
// is refused, naming the budget; each table's rows stay readable.
TEST(SparseTableTierTest, TheDiskBudgetIsSharedByEveryTieredTable) {
  StoreLimits limits;
  limits.table_dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/budget");
  limits.disk_budget_bytes = 4 << 20;
  ShardStore store(0, Placement(1), limits);
  proto::TableDef a = Def(true), b = Def(true);
  a.set_name("a");
  b.set_name("b");
  ASSERT_TRUE(store.CreateTable(a).ok());
  ASSERT_TRUE(store.CreateTable(b).ok());
  const std::vector<float> grads(20000 * 4, 0.5f);
  std::vector<uint64_t> keys(20000);
  auto push = [&](const std::string& table, uint64_t round) {
    for (uint64_t k = 0; k < keys.size(); ++k) keys[k] = (round * keys.size() + k) * 7919 + 1;
    return store.Push(table, KeySpec::List(keys), grads).status();
  };
  // Table a's rows until the budget refuses them (bounded: 4 MiB is about
  // 70,000 of its rows on disk).
  absl::Status refused;
  uint64_t round = 0;
  for (; round < 50 && refused.ok(); ++round) refused = push("a", round);
  ASSERT_EQ(refused.code(), absl::StatusCode::kResourceExhausted) << refused;
  EXPECT_THAT(std::string(refused.message()), HasSubstr("disk budget"));
  const std::vector<uint64_t> a_keys = keys;
  std::string before_a;
  ASSERT_TRUE(store.Pull("a", KeySpec::List(a_keys), &before_a).ok());
  // Table b's pushes: refused once its cache must move rows to disk.
  absl::Status b_refused;
  for (uint64_t r = 0; r < 10 && b_refused.ok(); ++r) b_refused = push("b", 1000 + r);
  ASSERT_EQ(b_refused.code(), absl::StatusCode::kResourceExhausted) << b_refused;
  EXPECT_THAT(std::string(b_refused.message()), HasSubstr("table 'b'"));
  EXPECT_THAT(std::string(b_refused.message()), HasSubstr("--disk_budget_mb"));
  std::string after_a;
  ASSERT_TRUE(store.Pull("a", KeySpec::List(a_keys), &after_a).ok());
  EXPECT_TRUE(before_a == after_a);
}

// Through the shard store, as ps_server uses it: --table_dir is needed; a
// tiered table takes pushes and pulls like any other; a table closed
// cleanly is served again from its directory by the next store (the next
// run), and a directory left open (a crash) or of another definition is
// refused.
TEST(SparseTableTierTest, ShardStoreServesACleanlyClosedDirectoryAgain) {
  StoreLimits no_dir;
  ShardStore without(0, Placement(1), no_dir);
  absl::StatusOr<bool> refused = without.CreateTable(Def(true));
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("--table_dir"));

  StoreLimits limits;
  limits.table_dir = absl::StrCat(std::getenv("TEST_TMPDIR"), "/tables");
  // Three times the cache's rows: most on disk, the rest in the cache at
  // close.
  std::vector<uint64_t> keys(50000);
  for (uint64_t k = 0; k < keys.size(); ++k) keys[k] = k * 0x9e3779b97f4a7c15ULL + 5;
  const std::vector<float> grads(keys.size() * 4, 0.25f);
  std::string want;
  {
    ShardStore memory(0, Placement(1));
    ASSERT_TRUE(memory.CreateTable(Def(false)).ok());
    ASSERT_TRUE(memory.Push("ctr/emb", KeySpec::List(keys), grads).ok());
    ASSERT_TRUE(memory.Push("ctr/emb", KeySpec::List(keys), grads).ok());
    ASSERT_TRUE(memory.Pull("ctr/emb", KeySpec::List(keys), &want).ok());
  }
  {
    ShardStore store(0, Placement(1), limits);
    ASSERT_TRUE(store.CreateTable(Def(true)).ok());
    ASSERT_TRUE(store.Push("ctr/emb", KeySpec::List(keys), grads).ok());
  }
  {
    // The next run: the rows of the first, then a second push.
    ShardStore again(0, Placement(1), limits);
    proto::TableDef bigger_cache = Def(true);
    bigger_cache.set_cache_mb(2);
    ASSERT_TRUE(again.CreateTable(bigger_cache).ok());
    ASSERT_TRUE(again.Push("ctr/emb", KeySpec::List(keys), grads).ok());
    std::string got;
    ASSERT_TRUE(again.Pull("ctr/emb", KeySpec::List(keys), &got).ok());
    EXPECT_TRUE(got == want) << "the restarted table's values differ from the in-memory table's";
  }
  // Another definition: refused, both named; rows of another size: the
  // store refuses the files.
  {
    ShardStore other(0, Placement(1), limits);
    proto::TableDef faster = Def(true);
    faster.set_learning_rate(0.1f);
    absl::StatusOr<bool> wrong = other.CreateTable(faster);
    ASSERT_EQ(wrong.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(wrong.status().message()), HasSubstr("another definition"));
    proto::TableDef sgd = Def(true);
    sgd.set_optimizer(proto::OPT_SGD);
    wrong = other.CreateTable(sgd);
    ASSERT_FALSE(wrong.ok());
    EXPECT_THAT(std::string(wrong.status().message()), HasSubstr("holds rows of"));
  }
  // As a crash leaves it: the directory marked open (what opening it
  // writes), its cache never written.
  {
    auto optimizer = MakeOptimizer(Def(true));
    RowStoreOptions options;
    options.dir = absl::StrCat(limits.table_dir, "/ctr_emb.server0");
    options.row_bytes = SparseTable::StoreRowBytes(Def(true), **optimizer);
    auto store = LogRowStore::Open(options);
    ASSERT_TRUE(store.ok()) << store.status();
    RowStore::Batch mark;
    mark.meta = "open\n" + Def(true).SerializeAsString();
    ASSERT_TRUE((*store)->Write(mark).ok());
  }
  ShardStore crashed(0, Placement(1), limits);
  absl::StatusOr<bool> held = crashed.CreateTable(Def(true));
  ASSERT_EQ(held.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(held.status().message()), HasSubstr("did not stop cleanly"));
}

}  // namespace
}  // namespace ps
