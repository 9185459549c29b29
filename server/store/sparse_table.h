// SparseTable: one server's part of a sparse table (TableDef kind
// TABLE_SPARSE): keys are any uint64 (hashed feature ids), slice =
// hash(key) mod num_buckets, and a row is created by the first push of its
// key, initialized from (table seed, key), so whichever server creates it
// gets the same values. A read of a key without a row returns those initial
// values without creating the row.
//
// Each owned slice is a SparseRows (flat hash map, rows in chunks: value
// floats then optimizer state) under its own reader/writer lock. Memory is
// charged to the server's MemoryBudget as slices grow, before rows are
// created.
//
// Incremental checkpoints (server/cut_state.h): each row carries a change
// tag, a uint32 kept by SparseRows right after the row's floats (4 bytes a
// row; a tag past 2^32 - 1 is stored as that, which only overstates; a
// write on top of a cut >= 2^32 - 1 writes whole slices). A push stores
// each touched row's tag once, under the slice lock it already holds: no
// extra lookup. A row created while its slice is copied for a cut is
// tagged as a change outside the cut, even by a push inside it: it may
// replace an evicted row that the copy still holds.
// Each slice also remembers the keys it erased (evictions) with the
// erasure's tag, until no checkpoint they could be missing from can be a
// base any more (WriteCut's prune_upto); re-creating a key drops it, except
// while the slice has a copy for a cut (the copy may lack the key: the
// entry stays, and a write skips entries whose key it holds). The list is
// capped at max(kMinErasedCap, live rows) keys a slice (a flat hash map of
// 16-byte slots: ~20-40 bytes a key; not charged to the memory budget);
// past the cap it is dropped whole, and every write on top of a cut before
// the drop writes that slice whole (erased_lost).
//
// Tiered tables (storage STORAGE_TIERED, docs/design/tiered_tables.md):
// every row that is not in memory is in a RowStore on disk; the slices'
// SparseRows are a cache of at most cache_mb of rows, so a push or pull of a
// cached row takes the path above. A push reads its keys missing from the
// cache from the store first (one read a slice, before any row changes, so a
// failed read leaves the table as it was) and keeps them in the cache; a
// pull reads them without keeping them. Demote() moves the least pushed rows
// (a count kept with each row, halved as pushes go by: AgedCount) to the store, in
// one batch, and drops them from the cache once it is durable; a thread of
// the table's own runs it whenever a push takes the cache past cache_mb.
// A cut (checkpoint, replication snapshot) of a tiered table is the cache's
// rows as for any table, completed by the disk's rows the cache lacks, or
// by a snapshot of the store; a record loaded (restore) goes to the disk.
//
// Thread-safe. Knows nothing of gRPC, clocks of workers or de-duplication:
// the store's caller decides whether a push is applied (Admit).
#ifndef PS_SERVER_STORE_SPARSE_TABLE_H_
#define PS_SERVER_STORE_SPARSE_TABLE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "absl/types/span.h"
#include "common/clock.h"
#include "common/optimizer/optimizer.h"
#include "common/placement.h"
#include "common/prefetch.h"
#include "proto/ps.pb.h"
#include "server/checkpoint/checkpoint_records.h"
#include "server/store/cut_state.h"
#include "server/store/memory_budget.h"
#include "server/store/row_store.h"
#include "server/store/sparse_rows.h"

namespace ps {

class SparseTable {
 public:
  // The slices `placement` gives server `server_index`, empty. `budget`
  // and `clock` (the time of evict_after_seconds) must outlive the table.
  // A tiered table needs its `tier` (the store of this server's rows,
  // empty or not: a table is created empty either way, rows on disk are
  // found by their keys).
  SparseTable(const proto::TableDef& def, std::unique_ptr<Optimizer> optimizer, int server_index,
              const Placement& placement, MemoryBudget* budget, Clock* clock = Clock::Real(),
              std::unique_ptr<RowStore> tier = nullptr);
  // Returns the table's bytes to the budget.
  ~SparseTable();

  // Bytes a table of `def` takes here when created (its slices' locks, maps
  // and admission counters), charged first; rows are charged as created.
  static uint64_t BytesToCreate(const proto::TableDef& def);
  // Bytes of a row of a tiered table of `def` in its store: its values,
  // optimizer state and push count, and its change tag.
  static size_t StoreRowBytes(const proto::TableDef& def, const Optimizer& optimizer) {
    return (def.width() * (1 + optimizer.state_per_value()) + 2 + 1) * sizeof(float);
  }
  // Bytes a tiered table's cache of `rows` rows spread over `slices`
  // slices takes at most: the maps and row chunks SparseRows allocates for
  // that many rows a slice, 1.25x over (what a cache reaches before pushes
  // demote rows themselves). A table's cache holds the most rows whose
  // bytes are within cache_mb.
  static uint64_t CacheBytes(const proto::TableDef& def, const Optimizer& optimizer, uint64_t rows,
                             uint64_t slices);
  // The most rows (at least 1) whose CacheBytes over `slices` fit cache_mb.
  static uint64_t CacheRows(const proto::TableDef& def, const Optimizer& optimizer,
                            uint64_t slices);

  const proto::TableDef& def() const { return def_; }
  uint64_t num_buckets() const { return num_buckets_; }
  uint64_t SliceOf(uint64_t key) const { return Placement::SparseSliceOf(key, num_buckets_); }
  // Keys [begin, end) of a request that lie in one slice.
  struct Group {
    uint64_t slice;
    size_t begin, end;
  };
  // A request's keys as this table sees them: each key's hash (computed
  // once: it chooses the slice and the map slot; an array not zero-filled
  // first), the maximal runs of consecutive keys in one slice (the client
  // sends keys grouped by slice, so normally one run per slice), and the
  // longest run's length.
  struct KeyPlan {
    std::unique_ptr<uint64_t[]> hashes;
    std::vector<Group> groups;
    size_t max_group = 0;
  };
  // The plan of `keys`, or FAILED_PRECONDITION naming the first key whose
  // slice another server owns (its slice and owner).
  absl::StatusOr<KeyPlan> Plan(absl::Span<const uint64_t> keys) const;
  // Plan's ownership check alone.
  absl::Status CheckOwned(absl::Span<const uint64_t> keys) const { return Plan(keys).status(); }

  // A push of `grads` (keys.size() * width floats, key-major) stamped with
  // the worker's `clock`, keys planned (`plan`) and values checked finite:
  //  1. charges the budget for the rows it may create (an upper bound from
  //     each slice's published shape; near the limit, exactly what the
  //     missing keys need); RESOURCE_EXHAUSTED naming the table and the
  //     bytes needed and left when they do not fit, with nothing changed;
  //  2. asks admit(): false skips the update (a retry that was applied);
  //     an error is returned as is;
  //  3. under each slice's lock once: creates the missing rows (initialized)
  //     and applies the table's optimizer to every row, in order (a key
  //     listed twice is updated twice); then gives back what was charged
  //     beyond what was allocated.
  // With `dst`, the rows' values after the push (or now, when skipped) are
  // copied there (keys.size() * width floats, any alignment). Returns
  // whether the update was applied. A tiered table's push first reads its
  // rows on disk (their errors fail it, nothing changed), and when the
  // cache is past 1.25x its rows first moves rows to disk (likewise).
  //
  // `decisions` (replication; null: decide here, keep nothing): what is not
  // deterministic, admission and eviction at the row cap, is decided by the
  // shard's primary and carried down the chain. replay false: decides, and
  // records the keys refused a row and the rows evicted; replay true:
  // applies the recorded ones instead of deciding (the admission sketch
  // still counts the push), so every copy holds the same rows.
  struct Decisions {
    bool replay = false;
    std::vector<uint64_t> refused;  // keys refused a row (admission), once a refusal
    std::vector<uint64_t> evicted;  // rows evicted at the row cap, in order
  };
  using Admit = absl::FunctionRef<absl::StatusOr<bool>()>;
  absl::StatusOr<bool> Push(absl::Span<const uint64_t> keys, const KeyPlan& plan,
                            absl::Span<const float> grads, uint64_t clock, Admit admit, char* dst,
                            Decisions* decisions = nullptr);
  // The same, planning the keys first (Plan's errors).
  absl::StatusOr<bool> Push(absl::Span<const uint64_t> keys, absl::Span<const float> grads,
                            uint64_t clock, Admit admit, char* dst);
  // Copies the keys' values to dst (keys.size() * width floats); a key
  // without a row reads as its initial values. Errors: a tiered table's
  // store's (its read failed).
  absl::Status Read(absl::Span<const uint64_t> keys, const KeyPlan& plan, char* dst) const;
  // The same, planning the keys first (Plan's errors).
  absl::Status Read(absl::Span<const uint64_t> keys, char* dst) const;

  // Every value held here, for whole-table vector work (Sandblaster
  // L-BFGS's VectorOps): fn(values, state, n, copy) for each row of each owned
  // slice, under its lock, with its n = width values and their optimizer state.
  // With `write`, a change at `clock` (the slice's tag raised; a slice in a
  // cut copied first when the change is outside it) that fn makes, and
  // again on the slice's copy (copy true) when the change is inside a cut
  // that copied it. Without it, under the reader lock: fn must not write.
  using RunFn = absl::FunctionRef<void(float* values, float* state, size_t n, bool copy)>;
  void ForEachRun(bool write, uint64_t clock, RunFn fn);

  // Evicts the rows not updated for evict_after_clocks (behind the largest
  // clock pushed here) or evict_after_seconds (on the clock); a no-op when
  // neither is set. Returns the rows evicted; with `keys`, appends their
  // keys (for the copies of a replicated shard, EvictKeys).
  uint64_t Sweep(std::vector<uint64_t>* keys = nullptr);
  // Evicts the rows of `keys` that exist here (a primary's Sweep, replayed
  // on a copy). Returns the rows evicted.
  uint64_t EvictKeys(absl::Span<const uint64_t> keys);

  // Tiered tables: moves the least pushed rows to the store until the cache
  // holds at most 90% of cache_mb's rows, when it holds more than them;
  // returns the rows moved (0 on other tables). Errors: the store's (nothing
  // is dropped from the cache then).
  absl::StatusOr<uint64_t> Demote();
  bool tiered() const { return tier_ != nullptr; }
  // Rows the cache holds at most (0: not tiered).
  uint64_t cache_rows() const { return cache_rows_; }
  // Keys of pushes and pulls found in the cache and read from the store,
  // rows demoted, and the store's figures (zeros when not tiered).
  uint64_t cache_hits() const { return cache_hits_.load(std::memory_order_relaxed); }
  uint64_t cache_misses() const { return cache_misses_.load(std::memory_order_relaxed); }
  uint64_t demoted() const { return demoted_.load(std::memory_order_relaxed); }
  RowStoreStats tier_stats() const { return tier_ != nullptr ? tier_->stats() : RowStoreStats{}; }

  // Admission and eviction counts (proto::TableStats fields).
  uint64_t admitted() const { return admitted_.load(std::memory_order_relaxed); }
  uint64_t refused() const { return refused_.load(std::memory_order_relaxed); }
  uint64_t evicted() const { return evicted_.load(std::memory_order_relaxed); }

  // Admission counters of one slice (admit_after_pushes > 1).
  static constexpr uint64_t kSketchBytes = 4 * 2048;

  // Checkpoints (server/cut_state.h). `cut_state` must outlive the table;
  // set before SetCut and before any push (without it, changes are tagged
  // as if no cut had been marked).
  void set_cut_state(CutState* cut_state) { cut_state_ = cut_state; }
  // Puts every owned slice in the cut at clock `cut` (0: out of any cut,
  // an abandoned or finished one), dropping the previous cut's copies.
  void SetCut(uint64_t cut);
  // Before the mark of `cut` (before any change is tagged after it): a
  // tiered table notes its store's position, so that a cut since `cut`
  // reads only the rows written to disk since (RowStore::ForEachSince).
  void NoteTierPosition(uint64_t cut);
  // For each owned slice in the cut: its record (SliceHeader and payload,
  // proto/checkpoint.proto) of the copy, or of the slice when it has none,
  // taken under its lock, then passed to sink after the lock is released;
  // the slice leaves the cut. Stops at sink's first error.
  // since = 0: every slice whole (a full checkpoint). since = B > 0 (the
  // caller vouches that B is the cut of a checkpoint this table's slices
  // were written to, or restored from, and that changes are tagged since):
  // a `delta` record of the rows tagged > B and of the erased keys tagged
  // > B that the written rows lack, and no record for a slice with neither;
  // a slice whose erased keys were dropped after B (the cap), and every
  // slice when B >= 2^32 - 1, is written whole (a record without delta,
  // which replaces the slice in a chain as well).
  // Erased keys tagged <= prune_upto are forgotten as their slice is
  // written: the caller guarantees no later write is on top of a cut below
  // it.
  // max_record_bytes > 0: a whole bucket whose record would be larger is
  // written as several, each of at most that many bytes of rows (at least
  // one row): the first replaces the bucket, the others are `delta` records
  // adding their rows (a replication snapshot's records must fit a message).
  // snapshot (a full cut of a tiered table): the disk's rows are not read
  // but left in a snapshot of the store in snapshot->dir() (new); the
  // records are the cache's rows, as `delta` records on top of it. Sets the
  // rest of *snapshot (table, buckets, row layout) when one was taken.
  absl::Status WriteCut(absl::FunctionRef<absl::Status(std::string record)> sink,
                        uint64_t since = 0, uint64_t prune_upto = 0, size_t max_record_bytes = 0,
                        proto::RowStoreSnapshot* snapshot = nullptr);
  // Restore: loads the rows of a record of this table whose bucket is owned
  // here (none when it is not). A record without `delta` replaces the
  // bucket's rows; with it, adds or replaces rows and erases its erased
  // keys. Loaded rows get tag 0: they are the restored checkpoint's, so an
  // incremental one on top of it does not repeat them. Errors:
  // FAILED_PRECONDITION (row layout differs from this table's), DATA_LOSS (a
  // key of another bucket), RESOURCE_EXHAUSTED (memory budget).
  // Returns the rows loaded.
  absl::StatusOr<uint64_t> LoadRecord(const SliceRecord& record);

  // Erased keys remembered for incremental checkpoints, over every slice.
  uint64_t erased_keys() const;
  // The fewest erased keys a slice may remember (see the cap above).
  static constexpr size_t kMinErasedCap = 64;

  // A tiered table's close: stops the demoter, writes every cached row to
  // the store (in batches), then `meta` with the last batch; the cache
  // keeps its rows. Errors: the store's (the meta is then not written).
  absl::Status CloseTier(const std::string& meta);

  // A tiered table's last failed demotion since the last call (the
  // demoter's, which retries every second), or OK.
  absl::Status TakeDemoteError();

  // Rows and bytes (maps and chunks) held here.
  uint64_t rows() const { return rows_.load(std::memory_order_relaxed); }
  uint64_t bytes() const { return bytes_.load(std::memory_order_relaxed); }
  std::atomic<uint64_t>& version() { return version_; }

 private:
  struct Slice {
    explicit Slice(size_t floats_per_row, uint64_t seed) : rows(floats_per_row), rng(seed) {}
    mutable absl::Mutex mu;
    SparseRows rows ABSL_GUARDED_BY(mu);
    // Admission counts (admit_after_pushes): a count-min sketch of
    // kSketchDepth rows of kSketchWidth saturating counters; empty when off.
    std::vector<uint8_t> sketch ABSL_GUARDED_BY(mu);
    // State of the slice's random draws (admit_probability, eviction samples).
    uint64_t rng ABSL_GUARDED_BY(mu);
    // rows.shape(), published under mu by PublishShape whenever a push
    // created rows (or evicted), for the lock-free budget estimate of the
    // next ones; and BytesToInsert of kSmallGroup keys from that shape.
    std::atomic<uint64_t> size{0}, next_row{0}, slots{0}, chunks{0};
    std::atomic<uint64_t> small_bound{0};
    // The checkpoint cut this slice is in (0: none), and its copy as of the
    // cut once a push outside the cut changed the slice (cut_state.h).
    uint64_t cut ABSL_GUARDED_BY(mu) = 0;
    std::unique_ptr<SparseRows> copy ABSL_GUARDED_BY(mu);
    uint64_t copy_bytes ABSL_GUARDED_BY(mu) = 0;  // charged to the budget
    // Keys erased from `rows`, with the erasure's change tag; and the
    // largest tag of entries dropped by the cap (0: none).
    absl::flat_hash_map<uint64_t, uint64_t> erased ABSL_GUARDED_BY(mu);
    uint64_t erased_lost ABSL_GUARDED_BY(mu) = 0;
    // A tiered slice's rows on disk at its last eviction (erased's cap).
    uint64_t disk_rows ABSL_GUARDED_BY(mu) = 0;
  };
  // Before a push at `clock` changes the slice: the copy it is also applied
  // to (an in-cut push on a copied slice), or null; copies the slice first
  // when the push is outside the cut. Sets *tag to the push's change tag.
  // Inline: every push calls it for every slice it changes.
  SparseRows* PrepareCut(Slice& slice, uint64_t clock, uint64_t* tag)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu) {
    if (cut_state_ != nullptr && cut_state_->Inside(slice.cut, clock)) {
      *tag = slice.cut;
      return slice.copy.get();
    }
    *tag = ChangeTag();
    // Outside a cut, or copied already, there is nothing to copy.
    if (slice.cut != 0 && slice.copy == nullptr) CopyForCut(slice);
    return nullptr;
  }
  // Copies the slice for the cut (when it has no copy yet and is in one).
  void CopyForCut(Slice& slice) ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu);
  // Applies one key's gradient to the copy (creating its row there),
  // raising the row's tag to `tag`.
  void ApplyToCopy(SparseRows& copy, uint64_t key, uint64_t hash, const float* grad, uint64_t clock,
                   uint32_t tag);
  // Records of bucket `s` holding `rows` (floats_per_row_ floats each), of
  // at most max_record_bytes of rows each (0: one record, maybe empty): the
  // first replaces the bucket (`delta`: adds, erasing `gone`), others add.
  using KeyedRow = std::pair<uint64_t, const float*>;
  std::vector<std::string> RecordsOfRows(uint64_t s, const std::vector<KeyedRow>& rows,
                                         size_t max_record_bytes, bool delta,
                                         const std::vector<uint64_t>& gone) const;
  // The records of bucket `s` holding every row of `rows`.
  std::vector<std::string> RecordsOf(uint64_t s, const SparseRows& rows,
                                     size_t max_record_bytes) const;
  // The delta record of bucket `s` on top of cut `since`: the rows of `rows`
  // tagged > since, and the keys of `erased` tagged > since that `rows`
  // lacks; empty when there are none.
  std::string DeltaRecordOf(uint64_t s, const SparseRows& rows,
                            const absl::flat_hash_map<uint64_t, uint64_t>& erased,
                            uint64_t since) const;
  // Remembers that `key` was erased from the slice now (cap included).
  void NoteErased(Slice& slice, uint64_t key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu);
  // The tag of a change outside every cut.
  uint64_t ChangeTag() const { return cut_state_ != nullptr ? cut_state_->ChangeTag() : 1; }
  // A change tag as stored in a row (saturated).
  static constexpr uint64_t kMaxRowTag = ~uint32_t{0};
  static uint32_t RowTag(uint64_t tag) {
    return static_cast<uint32_t>(tag < kMaxRowTag ? tag : kMaxRowTag);
  }
  // Drops the slice's copy and gives its bytes back.
  void DropCopy(Slice& slice) ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu);
  // How far ahead a push requests map slots, in keys.
  static constexpr size_t kPrefetchAhead = 12;
  // Starts loading group g's slice (its lock) and the map slots (slot_refs_)
  // of its first kPrefetchAhead keys (hashes: the plan's; num_keys of them).
  void PrefetchGroup(const Group& g, const uint64_t* hashes, size_t num_keys) const {
    __builtin_prefetch(slices_[g.slice].get());
    const uint64_t ref = slot_refs_[g.slice].load(std::memory_order_relaxed);
    if (ref == 0) return;
    const auto slot = [&](size_t i) { PrefetchSlot(ref, hashes[i]); };
    if (g.begin + kPrefetchAhead <= num_keys) {
      // A fixed count (past the group: useless, harmless), so that the loop
      // is unrolled: one ending with the group mispredicts its exit.
      for (size_t j = 0; j < kPrefetchAhead; ++j) slot(g.begin + j);
    } else {
      for (size_t i = g.begin; i < g.end; ++i) slot(i);
    }
  }
  // Starts loading the map slot of the key of `hash` in the slice whose
  // slot_refs_ entry is ref (not 0).
  static void PrefetchSlot(uint64_t ref, uint64_t hash) {
    const uint64_t mask = (uint64_t{1} << (ref >> kRefShift)) - 1;
    const char* const base = reinterpret_cast<const char*>(ref & ((uint64_t{1} << kRefShift) - 1));
    PrefetchAt(base, (hash & mask) * SparseRows::kSlotBytes);
  }
  // Starts loading the slice of the key of `hash` (its lock) and its slot.
  void PrefetchKey(uint64_t hash) const;
  // Publishes the shape of slice s's rows, its small-group bound, and its
  // slots' address and capacity in slot_refs_ (under its lock).
  void PublishShape(uint64_t s, Slice& slice) ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu);
  // Groups of at most this many keys are bounded by Slice::small_bound.
  static constexpr uint64_t kSmallGroup = 16;
  static constexpr int kSketchDepth = 4;
  static constexpr int kSketchWidth = 2048;
  static_assert(kSketchBytes == kSketchDepth * kSketchWidth, "one byte per counter");
  static constexpr uint64_t kSliceOverheadBytes = 128;  // a slice's mutex, map, pointer
  // Rows sampled for one eviction at the row cap.
  static constexpr int kEvictionSamples = 8;

  // Whether a key without a row may have one now (counts the push in the
  // sketch; draws for admit_probability).
  bool Admits(Slice& slice, uint64_t hash) ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu);
  // Row metadata (when eviction is on: the last two floats of a row hold,
  // as uint32 bits, the last update's clock or second and the update count).
  void Touch(float* row, uint64_t clock) const;
  uint32_t LastTouch(const float* row) const;
  uint32_t TouchCount(const float* row) const;
  // Tiered tables' popularity (LFU with aging): the count word holds a push
  // count (low 16 bits, saturating) and the aging epoch it was last brought
  // to (high 16 bits); the count halves for each epoch since, lazily. An
  // epoch ends every kEpochCacheRows x cache_rows_ keys pushed. The count
  // travels with the row to disk and back, so a row keeps its history.
  static constexpr uint64_t kEpochCacheRows = 8;
  uint32_t TierEpoch() const {
    return static_cast<uint32_t>(tier_pushed_.load(std::memory_order_relaxed) /
                                 (kEpochCacheRows * cache_rows_)) &
           0xffff;
  }
  uint32_t AgedCount(const float* row, uint32_t epoch) const;
  // Evicts sampled rows of the slice until it is under its cap; with
  // decisions, records them, or (replay) evicts the recorded ones instead.
  void EvictOverCap(uint64_t s, Slice& slice, Decisions* decisions)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu);
  // Evicts the slice's rows of `keys`, outside any cut (free list charged).
  void EvictLocked(Slice& slice, absl::Span<const uint64_t> keys)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu);
  // The oldest last-update time (clock or second, as rows keep it) a row may
  // have and stay at `now` (evict_after_*), or 0 when none is too old.
  uint64_t OldestKept(absl::Time now) const;
  // A tiered table's eviction: Sweep's (every sweep the cache's expired
  // rows, from the cache and the disk; every kDiskSweep the rows only on
  // disk that are expired or, past max_rows, the least recently or often
  // updated), and EvictKeys' (a primary's evictions on a copy).
  uint64_t SweepTier(std::vector<uint64_t>* keys);
  uint64_t EvictTierKeys(absl::Span<const uint64_t> keys);
  static constexpr absl::Duration kDiskSweep = absl::Seconds(10);
  // Evicts `keys` of slice s from the disk, then from the cache (a row left
  // on disk would come back); a slice in a cut gets the rows into its copy
  // first. A failing disk evicts nothing (logged; the next sweep retries).
  uint64_t EvictTierSlice(uint64_t s, const std::vector<uint64_t>& keys)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(demote_mu_, tier_mu_);
  // Erases `key`'s row, counting it and its bytes.
  void EvictRow(Slice& slice, uint64_t key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu);
  static uint64_t NextRandom(uint64_t* state);

  // A tiered table's push, before any row changes: reads the keys missing
  // from the cache from the store (one read, no slice locked) and inserts
  // the rows found (their growth added to push.grown, their count to
  // *promoted). Errors: the store's.
  absl::Status LoadFromTier(absl::Span<const uint64_t> keys, const KeyPlan& plan, uint64_t* grown,
                            uint64_t* promoted);
  // Each slice of the plan under its reader lock (Read of every table):
  // calls cached(i, row) for each key i with a row in memory, lists the
  // others in *missing (indices) and *refs; counts a tier's hits, misses.
  void SplitByCache(absl::Span<const uint64_t> keys, const KeyPlan& plan,
                    std::vector<size_t>* missing, std::vector<RowStore::RowRef>* refs,
                    absl::FunctionRef<void(size_t, const float*)> cached) const;

  // Reads the rows of `refs` from the store into rows (stride_bytes() each)
  // and found, in one call.
  absl::Status ReadTier(absl::Span<const RowStore::RowRef> refs, std::vector<char>* rows,
                        std::unique_ptr<bool[]>* found) const;
  // The demoter: a thread of each tiered table that keeps the cache under
  // cache_rows_ (Demote), woken by pushes that take it past (WakeDemoter);
  // a push into a cache past 1.25x its rows demotes first on its own thread
  // (the demoter is behind, or the disk refuses it), and fails with the
  // disk's error. Started by the constructor, stopped by the destructor.
  void StartDemoter();
  void StopDemoter();
  void DemoteLoop();
  void WakeDemoter();
  bool DemoterCalled() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(demoter_mu_) {
    return demoter_stop_ || demoter_wake_;
  }
  bool DemoterStopped() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(demoter_mu_) { return demoter_stop_; }
  // A tiered table's cut of one slice: its cache's rows as of the cut (those
  // changed since `since` when > 0), completed from disk by TierCutRecords.
  struct TierCut {
    uint64_t since = 0;                    // 0: the whole slice
    absl::flat_hash_set<uint64_t> cached;  // every key the cache held (cached_keys)
    std::vector<uint64_t> keys;            // those written
    std::vector<float> rows;               // floats_per_row_ each
    absl::flat_hash_set<uint64_t> erased;  // since > 0: keys erased after it
  };
  TierCut CopyCutRows(const SparseRows& rows, const absl::flat_hash_map<uint64_t, uint64_t>& erased,
                      uint64_t since, bool cached_keys) const;
  // The slice's records: `cut`'s rows and the store's rows of keys it lacks
  // (tagged after cut->since when > 0); on_snapshot: `cut`'s rows, as deltas.
  absl::StatusOr<std::vector<std::string>> TierCutRecords(uint64_t s, TierCut* cut,
                                                          size_t max_record_bytes,
                                                          bool on_snapshot) const;
  // LoadRecord on a tiered table: the record's rows go to the store (in one
  // batch, replacing the bucket's rows unless it is a delta), and the
  // cache's copies of them (of the whole bucket when replaced) go.
  absl::StatusOr<uint64_t> LoadTierRecord(const SliceRecord& record, Slice& slice);
  // Bytes a row takes in the store: its floats and its change tag.
  size_t stride_bytes() const { return (floats_per_row_ + 1) * sizeof(float); }

  // Step 1 of Push: charges the budget for the rows the push may create;
  // returns the bytes charged, or sets *status to RESOURCE_EXHAUSTED.
  uint64_t Reserve(const KeyPlan& plan, absl::Span<const uint64_t> keys, absl::Status* status);
  // Step 3 of Push, under each group's slice lock: the rows that exist
  // (in Push's own loop), then the steps below, which share the push's
  // PushState (sparse_table.cc). Defined inline there, into Push's loop
  // (they were its body): used nowhere else.
  struct PushState;
  // The rows of keys [from, g.end) into rows[i], creating the missing ones
  // that admission lets in; a refused key gets null (and its initial values
  // read back). Returns whether every key got a row.
  inline bool FindOrCreateRows(Slice& slice, const Group& g, size_t from, float** rows,
                               PushState& push) ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu);
  // Whether a key without a row gets one: Admits, or the primary's decision
  // when replaying; records a refusal in the push's decisions.
  inline bool AdmitsNewRow(Slice& slice, uint64_t key, uint64_t hash, PushState& push)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu);
  // The row of `key`, inserted and initialized when it is new.
  inline float* CreateRow(Slice& slice, uint64_t key, uint64_t hash, PushState& push)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu);
  // Applies the group's gradients to its rows (rows[i], null: refused), in
  // runs of consecutive rows, reading them back to the push's dst.
  inline void ApplyGroup(Slice& slice, const Group& g, float* const* rows, bool all_rows,
                         uint32_t row_tag, const PushState& push)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu);
  // Applies the group's gradients of keys with rows to the slice's copy
  // (an in-cut push), charging what the copy grows.
  inline void ApplyGroupToCopy(Slice& slice, SparseRows& copy, const Group& g, float* const* rows,
                               uint32_t row_tag, const PushState& push)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu);
  // After a group's rows were updated: evictions over the row cap, and the
  // slice's new shape and bytes when it may have grown (`before`: its bytes
  // before the group).
  inline void FinishGroup(uint64_t s, Slice& slice, bool may_grow, uint64_t before, PushState& push)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(slice.mu);
  // Gives back what was reserved beyond the `grown` bytes allocated (or
  // charges the excess), and counts them in bytes_.
  void Settle(uint64_t reserved, uint64_t grown);
  // The end of Push (of step 3): gives back what was reserved beyond what
  // was allocated (or charges the excess) and counts the push.
  inline void FinishPush(uint64_t reserved, const PushState& push);
  void InitRow(uint64_t key, float* row) const;

  const proto::TableDef def_;
  const std::unique_ptr<Optimizer> optimizer_;
  const uint64_t num_buckets_;
  const size_t width_;
  const size_t state_floats_;    // width * state_per_value
  const bool meta_;              // rows end with 2 floats of metadata
  const size_t floats_per_row_;  // width * (1 + state_per_value), + 2 with meta_
  const uint64_t slice_cap_;     // rows per slice (max_rows), 0: none
  Clock* const clock_;
  const absl::Time created_;  // origin of evict_after_seconds' clock
  const int server_index_;
  const Placement placement_;
  MemoryBudget* const budget_;
  CutState* cut_state_ = nullptr;
  std::vector<std::unique_ptr<Slice>> slices_;  // null: owned by another server
  // Per slice, where its map's slots start (low kRefShift bits) and log2 of
  // their count (the bits above), or 0: so that a push prefetches the slots
  // of keys ahead of it, across slices (a table of many buckets gets ~10
  // keys of a request per slice, too few to prefetch within one). Kept in one
  // array, not in the slices, whose own lines would then be the misses. A
  // stale value only makes a prefetch useless: prefetches do not fault.
  static constexpr int kRefShift = 58;
  std::unique_ptr<std::atomic<uint64_t>[]> slot_refs_;
  std::atomic<uint64_t> max_clock_{0};  // largest clock pushed here
  std::atomic<uint64_t> admitted_{0}, refused_{0}, evicted_{0};
  std::atomic<uint64_t> rows_{0};
  std::atomic<uint64_t> bytes_{0};
  std::atomic<uint64_t> version_{0};

  // Tiered tables. A push holds tier_mu_ shared from reading its missing
  // rows to applying them, Demote exclusively while it drops rows from the
  // cache: a row a push read cannot leave the cache before it is applied.
  const std::unique_ptr<RowStore> tier_;
  uint64_t cache_rows_ = 0;  // set by the constructor
  mutable absl::Mutex tier_mu_;
  // Set under tier_mu_ while a cut's snapshot is written (Demote spares it).
  std::atomic<bool> tier_snapshot_{false};
  absl::Mutex demote_mu_;                                   // one Demote at a time
  uint64_t demote_cursor_ ABSL_GUARDED_BY(demote_mu_) = 0;  // the slice the next one starts at
  absl::Time last_disk_sweep_ ABSL_GUARDED_BY(demote_mu_) = absl::InfinitePast();
  // (cut, the store's position before its mark) of the last few cuts.
  mutable absl::Mutex tier_marks_mu_;
  std::vector<std::pair<uint64_t, uint64_t>> tier_marks_ ABSL_GUARDED_BY(tier_marks_mu_);
  mutable std::atomic<uint64_t> cache_hits_{0}, cache_misses_{0};  // counted by Read too
  std::atomic<uint64_t> demoted_{0};
  std::atomic<uint64_t> tier_pushed_{0};  // keys pushed: the aging epochs' clock
  absl::Mutex demoter_mu_;
  bool demoter_stop_ ABSL_GUARDED_BY(demoter_mu_) = false;
  bool demoter_wake_ ABSL_GUARDED_BY(demoter_mu_) = false;
  absl::Status demote_error_ ABSL_GUARDED_BY(demoter_mu_);
  std::atomic<bool> demote_wanted_{false};  // a wake is pending: pushes skip the lock
  std::thread demoter_;
};

}  // namespace ps

#endif  // PS_SERVER_STORE_SPARSE_TABLE_H_
