#include "server/store/sparse_table.h"

#include <algorithm>
#include <cstring>

#include "absl/base/attributes.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/hash.h"
#include "common/table_layout.h"
#include "server/store/initializer.h"

namespace ps {
namespace {

// A reader lock on `mu`, or nothing when it is null (a table without a
// tier), until Release or the end of the scope.
class TierReadLock {
 public:
  explicit TierReadLock(absl::Mutex* mu) ABSL_NO_THREAD_SAFETY_ANALYSIS : mu_(mu) {
    if (mu_ != nullptr) mu_->ReaderLock();
  }
  ~TierReadLock() { Release(); }
  void Release() ABSL_NO_THREAD_SAFETY_ANALYSIS {
    if (mu_ != nullptr) mu_->ReaderUnlock();
    mu_ = nullptr;
  }

 private:
  absl::Mutex* mu_;
};

}  // namespace

SparseTable::SparseTable(const proto::TableDef& def, std::unique_ptr<Optimizer> optimizer,
                         int server_index, const Placement& placement, MemoryBudget* budget,
                         Clock* clock, std::unique_ptr<RowStore> tier)
    : def_(def),
      optimizer_(std::move(optimizer)),
      num_buckets_(LayoutOf(def).num_buckets),
      width_(def.width()),
      state_floats_(def.width() * optimizer_->state_per_value()),
      // A tiered table's rows count their pushes: Demote keeps the most pushed.
      meta_(def.evict_after_clocks() > 0 || def.evict_after_seconds() > 0 || def.max_rows() > 0 ||
            tier != nullptr),
      floats_per_row_(width_ + state_floats_ + (meta_ ? 2 : 0)),
      slice_cap_(def.max_rows() == 0 ? 0 : (def.max_rows() + num_buckets_ - 1) / num_buckets_),
      clock_(clock),
      created_(clock->Now()),
      server_index_(server_index),
      placement_(placement),
      budget_(budget),
      tier_(std::move(tier)) {
  slices_.resize(num_buckets_);
  slot_refs_.reset(new std::atomic<uint64_t>[num_buckets_]);
  for (uint64_t s = 0; s < num_buckets_; ++s) slot_refs_[s].store(0, std::memory_order_relaxed);
  for (uint64_t s = 0; s < num_buckets_; ++s) {
    if (placement_.OwnerOfSlice(def_.name(), s) == server_index_) {
      slices_[s] = std::make_unique<Slice>(floats_per_row_, HashCombine(def_.seed(), s));
      absl::MutexLock lock(&slices_[s]->mu);
      PublishShape(s, *slices_[s]);
      if (def_.admit_after_pushes() > 1) slices_[s]->sketch.assign(kSketchDepth * kSketchWidth, 0);
    }
  }
  if (tier_ != nullptr) {
    // The most rows whose cache fits cache_mb over the slices owned here.
    uint64_t owned = 0;
    for (const auto& slice : slices_) owned += slice != nullptr ? 1 : 0;
    cache_rows_ = CacheRows(def_, *optimizer_, std::max<uint64_t>(owned, 1));
    StartDemoter();
  }
}

void SparseTable::PublishShape(uint64_t s, Slice& slice) {
  const SparseRows::Shape shape = slice.rows.shape();
  slice.size.store(shape.size, std::memory_order_relaxed);
  slice.next_row.store(shape.next_row, std::memory_order_relaxed);
  slice.slots.store(shape.slots, std::memory_order_relaxed);
  slice.chunks.store(shape.chunks, std::memory_order_relaxed);
  slice.small_bound.store(SparseRows::BytesToInsert(floats_per_row_, shape, kSmallGroup),
                          std::memory_order_relaxed);
  // The slots' address and the log2 of their count, in one word.
  const uint64_t base = reinterpret_cast<uintptr_t>(slice.rows.slots_data());
  uint64_t ref = 0;
  if (base != 0 && base < (uint64_t{1} << kRefShift)) {
    const uint64_t log2 = 64 - __builtin_clzll(slice.rows.slots_mask() + 1) - 1;
    ref = base | (log2 << kRefShift);
  }
  slot_refs_[s].store(ref, std::memory_order_relaxed);
}

uint64_t SparseTable::NextRandom(uint64_t* state) {
  *state += 0x9e3779b97f4a7c15ULL;
  return Mix64(*state);
}

bool SparseTable::Admits(Slice& slice, uint64_t hash) {
  if (!slice.sketch.empty()) {
    // Count the push in each row of the sketch; the key's count is the
    // smallest of its counters (overstated by collisions, never less).
    uint32_t count = 255;
    for (int d = 0; d < kSketchDepth; ++d) {
      uint8_t& c = slice.sketch[d * kSketchWidth + (HashCombine(hash, d) & (kSketchWidth - 1))];
      if (c < 255) ++c;
      count = std::min<uint32_t>(count, c);
    }
    if (count < def_.admit_after_pushes()) return false;
  }
  const float p = def_.admit_probability();
  if (p > 0 && p < 1) {
    return static_cast<double>(NextRandom(&slice.rng) >> 11) * 0x1.0p-53 < p;
  }
  return true;
}

void SparseTable::Touch(float* row, uint64_t clock) const {
  const uint64_t now = def_.evict_after_seconds() > 0
                           ? static_cast<uint64_t>(absl::ToInt64Seconds(clock_->Now() - created_))
                           : clock;
  const uint32_t last = static_cast<uint32_t>(std::min<uint64_t>(now, ~uint32_t{0}));
  uint32_t count = TouchCount(row);
  if (tier_ != nullptr) {
    const uint32_t epoch = TierEpoch();
    count = (epoch << 16) | std::min<uint32_t>(AgedCount(row, epoch) + 1, 0xffff);
  } else if (count < ~uint32_t{0}) {
    ++count;
  }
  float* meta = row + width_ + state_floats_;
  std::memcpy(meta, &last, sizeof last);
  std::memcpy(meta + 1, &count, sizeof count);
}

uint32_t SparseTable::LastTouch(const float* row) const {
  uint32_t last;
  std::memcpy(&last, row + width_ + state_floats_, sizeof last);
  return last;
}

uint32_t SparseTable::TouchCount(const float* row) const {
  uint32_t count;
  std::memcpy(&count, row + width_ + state_floats_ + 1, sizeof count);
  return count;
}

uint32_t SparseTable::AgedCount(const float* row, uint32_t epoch) const {
  const uint32_t word = TouchCount(row);
  const uint32_t passed = (epoch - (word >> 16)) & 0xffff;
  return passed >= 16 ? 0 : (word & 0xffff) >> passed;
}

void SparseTable::ForEachRun(bool write, uint64_t clock, RunFn fn) {
  for (const auto& slice : slices_) {
    if (slice == nullptr) continue;
    if (!write) {
      absl::ReaderMutexLock lock(&slice->mu);
      slice->rows.ForEach([&](uint64_t, float* row) { fn(row, row + width_, width_, false); });
      continue;
    }
    absl::MutexLock lock(&slice->mu);
    uint64_t tag = 0;
    SparseRows* const also = PrepareCut(*slice, clock, &tag);
    // Taken under the lock (the analysis does not follow it into the lambda).
    SparseRows* const rows = &slice->rows;
    rows->ForEach([&](uint64_t, float* row) {
      fn(row, row + width_, width_, false);
      rows->RaiseTag(row, RowTag(tag));
    });
    if (also == nullptr) continue;
    also->ForEach([&](uint64_t, float* row) {
      fn(row, row + width_, width_, true);
      also->RaiseTag(row, RowTag(tag));
    });
  }
}

SparseTable::~SparseTable() {
  StopDemoter();
  budget_->Release(bytes());
}

absl::StatusOr<SparseTable::KeyPlan> SparseTable::Plan(absl::Span<const uint64_t> keys) const {
  KeyPlan plan;
  plan.hashes.reset(new uint64_t[keys.size()]);
  uint64_t* const hashes = plan.hashes.get();
  // The hashes first, eight keys at a time (SparseRows::Hash is Mix64).
  Mix64Many(keys.data(), hashes, keys.size());
  if (keys.empty()) return plan;
  plan.groups.reserve(std::min<uint64_t>(keys.size(), num_buckets_));
  // Key i starts a run of slice s: an error when another server owns it.
  const auto owned = [&](size_t i, uint64_t s) {
    if (slices_[s] != nullptr) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat(
        "table '", def_.name(), "': key ", keys[i], " (slice ", s, ") is owned by server ",
        placement_.OwnerOfSlice(def_.name(), s), ", not server ", server_index_,
        "; is the client's cluster spec the same as the servers'?"));
  };
  // The current run in locals (not through groups.back() for every key).
  uint64_t slice = Placement::SparseSliceOfHash(hashes[0], num_buckets_);
  if (absl::Status s = owned(0, slice); !s.ok()) return s;
  size_t begin = 0;
  for (size_t i = 1; i < keys.size(); ++i) {
    const uint64_t s = Placement::SparseSliceOfHash(hashes[i], num_buckets_);
    if (s == slice) continue;
    if (absl::Status status = owned(i, s); !status.ok()) return status;
    plan.groups.push_back({slice, begin, i});
    plan.max_group = std::max(plan.max_group, i - begin);
    slice = s;
    begin = i;
  }
  plan.groups.push_back({slice, begin, keys.size()});
  plan.max_group = std::max(plan.max_group, keys.size() - begin);
  return plan;
}

void SparseTable::InitRow(uint64_t key, float* row) const {
  InitializeValues(def_, key, 1, row);
  if (state_floats_ > 0) optimizer_->InitState(row + width_, state_floats_);
  if (meta_) std::memset(row + width_ + state_floats_, 0, 2 * sizeof(float));
}

uint64_t SparseTable::Reserve(const KeyPlan& plan, absl::Span<const uint64_t> keys,
                              absl::Status* status) {
  const std::vector<Group>& groups = plan.groups;
  // First without locks, as if every key were new, from each slice's
  // published shape.
  uint64_t bound = 0;
  for (const Group& g : groups) {
    const Slice& slice = *slices_[g.slice];
    const uint64_t n = g.end - g.begin;
    if (n <= kSmallGroup) {
      // BytesToInsert grows with n: its value for kSmallGroup, published
      // with the shape, bounds a smaller group's.
      bound += slice.small_bound.load(std::memory_order_relaxed);
      continue;
    }
    SparseRows::Shape shape;
    shape.size = slice.size.load(std::memory_order_relaxed);
    shape.next_row = slice.next_row.load(std::memory_order_relaxed);
    shape.slots = slice.slots.load(std::memory_order_relaxed);
    shape.chunks = slice.chunks.load(std::memory_order_relaxed);
    bound += SparseRows::BytesToInsert(floats_per_row_, shape, n);
  }
  if (budget_->TryCharge(bound)) return bound;
  // Near the limit: exactly what the missing keys need.
  // Counted per slice: a list not grouped by slice has several groups of
  // one slice, whose new rows share its growth.
  absl::flat_hash_map<uint64_t, size_t> missing_in;
  size_t missing = 0;
  for (const Group& g : groups) {
    const Slice& slice = *slices_[g.slice];
    absl::ReaderMutexLock lock(&slice.mu);
    size_t m = 0;
    for (size_t i = g.begin; i < g.end; ++i) {
      m += slice.rows.Find(keys[i], plan.hashes[i]) == nullptr;
    }
    missing_in[g.slice] += m;
    missing += m;
  }
  uint64_t exact = 0;
  for (const auto& [s, m] : missing_in) {
    const Slice& slice = *slices_[s];
    absl::ReaderMutexLock lock(&slice.mu);
    exact += slice.rows.BytesToInsert(m);
  }
  if (budget_->TryCharge(exact)) return exact;
  *status = absl::ResourceExhaustedError(absl::StrCat(
      "table '", def_.name(), "': ", missing, " new rows need ", exact, " bytes on server ",
      server_index_, ", but only ", budget_->left(), " of the memory budget of ", budget_->limit(),
      " bytes are left (ps_server --memory_budget_mb); nothing of this push was applied"));
  return 0;
}

absl::StatusOr<bool> SparseTable::Push(absl::Span<const uint64_t> keys,
                                       absl::Span<const float> grads, uint64_t clock, Admit admit,
                                       char* dst) {
  absl::StatusOr<KeyPlan> plan = Plan(keys);
  if (!plan.ok()) return plan.status();
  return Push(keys, *plan, grads, clock, admit, dst);
}

// What Push's steps share. The counts are added to the table's at the end.
struct SparseTable::PushState {
  absl::Span<const uint64_t> keys;
  const uint64_t* hashes;  // the plan's
  absl::Span<const float> grads;
  uint64_t clock;
  char* dst;  // null: no read back
  Decisions* decisions;
  // Admission is on (admit_after_pushes, admit_probability): every key is
  // looked up before its row may be created.
  bool admission;
  bool replay;  // decisions->replay
  // A copy replays its primary's admission: how often it refused each key
  // (a key listed twice may be refused, then admitted).
  absl::flat_hash_map<uint64_t, uint32_t> refusals;
  std::vector<float> initial;  // a refused key's initial values, read back
  uint64_t grown = 0, created_rows = 0, refused = 0;
};

absl::StatusOr<bool> SparseTable::Push(absl::Span<const uint64_t> keys, const KeyPlan& plan,
                                       absl::Span<const float> grads, uint64_t clock, Admit admit,
                                       char* dst, Decisions* decisions) {
  // A tiered table's cache past 1.25x its rows: the demoter is behind, or
  // the disk refuses its writes. The push demotes first, and is refused with
  // the disk's error, nothing changed, when the disk refuses.
  if (tier_ != nullptr && rows_.load(std::memory_order_relaxed) > cache_rows_ + cache_rows_ / 4) {
    if (absl::StatusOr<uint64_t> demoted = Demote(); !demoted.ok()) return demoted.status();
  }
  // Memory for the rows this push may create is charged before anything
  // changes, so that once admitted the push is applied whole.
  absl::Status status;
  const uint64_t reserved = Reserve(plan, keys, &status);
  if (!status.ok()) return status;
  // A tiered table's rows on disk come into the cache first, before the
  // push is admitted (a failed read changes nothing the push is about), and
  // stay there until it is applied (Demote waits for tier_mu_).
  TierReadLock tier_lock(tier_ != nullptr ? &tier_mu_ : nullptr);
  uint64_t promoted_bytes = 0, promoted = 0;
  if (tier_ != nullptr) {
    tier_pushed_.fetch_add(keys.size(), std::memory_order_relaxed);
    status = LoadFromTier(keys, plan, &promoted_bytes, &promoted);
    rows_.fetch_add(promoted, std::memory_order_relaxed);
  }
  absl::StatusOr<bool> fresh = status.ok() ? admit() : absl::StatusOr<bool>(status);
  if (!fresh.ok() || !*fresh) {
    // What promoted rows took stays charged; the rest goes back.
    Settle(reserved, promoted_bytes);
    if (!fresh.ok()) return fresh.status();
    if (dst != nullptr) {
      if (absl::Status s = Read(keys, plan, dst); !s.ok()) return s;
    }
    return false;
  }
  // One group's rows (entry i - g.begin for key i). Every entry is set
  // before it is read: no zero-filling.
  const std::unique_ptr<float*[]> rows(new float*[plan.max_group]);
  PushState push{keys, plan.hashes.get(), grads, clock, dst, decisions};
  push.grown = promoted_bytes;
  push.admission = def_.admit_after_pushes() > 1 ||
                   (def_.admit_probability() > 0 && def_.admit_probability() < 1);
  push.replay = decisions != nullptr && decisions->replay;
  if (push.replay) {
    for (uint64_t key : decisions->refused) ++push.refusals[key];
  }
  uint64_t max_clock = max_clock_.load(std::memory_order_relaxed);
  while (clock > max_clock && !max_clock_.compare_exchange_weak(max_clock, clock)) {
  }
  // Map slots are scattered: the next group's are requested while this
  // one is worked on (a group is ~10 keys with many buckets: too few to
  // prefetch within it), and the keys of a larger group kPrefetchAhead
  // ahead.
  const std::vector<Group>& groups = plan.groups;
  const uint64_t* const hashes = push.hashes;
  PrefetchGroup(groups[0], hashes, keys.size());
  for (size_t k = 0; k < groups.size(); ++k) {
    const Group& g = groups[k];
    if (k + 1 < groups.size()) PrefetchGroup(groups[k + 1], hashes, keys.size());
    Slice& slice = *slices_[g.slice];
    absl::MutexLock lock(&slice.mu);
    uint64_t tag;
    SparseRows* const also = PrepareCut(slice, clock, &tag);
    const uint32_t row_tag = RowTag(tag);
    float** const group_rows = rows.get() - g.begin;  // indexed by key
    size_t i = g.begin;
    if (!push.admission) {
      // The usual case first: keys that have rows, in a tight loop.
      for (; i < g.end; ++i) {
        if (i + kPrefetchAhead < g.end) slice.rows.Prefetch(hashes[i + kPrefetchAhead]);
        float* const row = slice.rows.Find(keys[i], hashes[i]);
        if (row == nullptr) break;
        __builtin_prefetch(row);
        group_rows[i] = row;
      }
    }
    // The slice's bytes and shape change only when it gets rows (or evicts
    // them): the usual push of keys that have rows skips their accounting.
    const bool may_grow = i < g.end || slice_cap_ > 0;
    const uint64_t before = may_grow ? slice.rows.bytes() : 0;
    // From the first key without a row (or every key, with admission on).
    const bool all_rows = FindOrCreateRows(slice, g, i, group_rows, push);
    ApplyGroup(slice, g, group_rows, all_rows, row_tag, push);
    if (also != nullptr) ApplyGroupToCopy(slice, *also, g, group_rows, row_tag, push);
    FinishGroup(g.slice, slice, may_grow, before, push);
  }
  FinishPush(reserved, push);
  tier_lock.Release();
  if (tier_ != nullptr && rows_.load(std::memory_order_relaxed) > cache_rows_) WakeDemoter();
  return true;
}

// The steps of a group are inlined into Push's loop, which they were part
// of: the data path keeps its code as it was.
ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool SparseTable::FindOrCreateRows(Slice& slice, const Group& g,
                                                                       size_t from, float** rows,
                                                                       PushState& push) {
  const uint64_t* const keys = push.keys.data();
  const uint64_t* const hashes = push.hashes;
  const bool admission = push.admission;
  bool all_rows = true;
  for (size_t i = from; i < g.end; ++i) {
    if (i + kPrefetchAhead < g.end) slice.rows.Prefetch(hashes[i + kPrefetchAhead]);
    const uint64_t hash = hashes[i];
    float*& row = rows[i];
    row = admission ? slice.rows.Find(keys[i], hash) : nullptr;
    if (row == nullptr) {
      if (admission && !AdmitsNewRow(slice, keys[i], hash, push)) {
        // Not admitted: no row, the gradient is dropped, and the read
        // back gives the initial values.
        ++push.refused;
        all_rows = false;
        if (push.dst != nullptr) {
          // dst may not be aligned for floats: through a row-sized buffer.
          push.initial.resize(width_);
          InitializeValues(def_, keys[i], 1, push.initial.data());
          std::memcpy(push.dst + i * width_ * sizeof(float), push.initial.data(),
                      width_ * sizeof(float));
        }
        continue;
      }
      row = CreateRow(slice, keys[i], hash, push);
    }
    // Its cache line is loaded while the next keys are probed.
    __builtin_prefetch(row);
  }
  return all_rows;
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline bool SparseTable::AdmitsNewRow(Slice& slice, uint64_t key,
                                                                   uint64_t hash, PushState& push) {
  bool admitted = Admits(slice, hash);  // counts the push either way
  if (push.replay) {
    auto it = push.refusals.find(key);
    admitted = it == push.refusals.end() || it->second == 0;
    if (!admitted) --it->second;
  } else if (!admitted && push.decisions != nullptr) {
    push.decisions->refused.push_back(key);
  }
  return admitted;
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline float* SparseTable::CreateRow(Slice& slice, uint64_t key,
                                                                  uint64_t hash, PushState& push) {
  bool created = false;
  float* const row = slice.rows.Insert(key, hash, &created);
  if (!created) return row;
  InitRow(key, row);
  ++push.created_rows;
  if (slice.copy == nullptr) {
    // Re-created: no longer erased.
    if (!slice.erased.empty()) slice.erased.erase(key);
  } else {
    // Created while the slice is copied for a cut: the copy may lack the
    // key (the erased entry stays, see the header) or hold an older row of
    // it, which this new row differs from whether the push is in the cut
    // or not: a change outside the cut.
    slice.rows.set_tag(row, RowTag(ChangeTag()));
  }
  return row;
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline void SparseTable::ApplyGroup(Slice& slice, const Group& g,
                                                                 float* const* rows, bool all_rows,
                                                                 uint32_t row_tag,
                                                                 const PushState& push) {
  // In runs without refused keys; each row's tag is raised to the push's
  // as it is updated.
  for (size_t b = g.begin; b < g.end;) {
    if (rows[b] == nullptr) {
      ++b;
      continue;
    }
    size_t e = b + 1;
    while (!all_rows && e < g.end && rows[e] != nullptr) ++e;
    if (all_rows) e = g.end;
    optimizer_->ApplySparseRows(
        rows + b, push.grads.data() + b * width_, e - b, width_, floats_per_row_, row_tag,
        push.clock, push.dst != nullptr ? push.dst + b * width_ * sizeof(float) : nullptr);
    if (meta_) {
      for (size_t i = b; i < e; ++i) Touch(rows[i], push.clock);
    }
    b = e;
  }
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline void SparseTable::ApplyGroupToCopy(
    Slice& slice, SparseRows& copy, const Group& g, float* const* rows, uint32_t row_tag,
    const PushState& push) {
  const uint64_t copy_before = copy.bytes();
  for (size_t i = g.begin; i < g.end; ++i) {
    if (rows[i] != nullptr) {
      ApplyToCopy(copy, push.keys[i], push.hashes[i], &push.grads[i * width_], push.clock, row_tag);
    }
  }
  // New rows of the copy: charged as they come (a bounded overshoot).
  const uint64_t copy_grown = copy.bytes() - copy_before;
  budget_->Charge(copy_grown);
  slice.copy_bytes += copy_grown;
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline void SparseTable::FinishGroup(uint64_t s, Slice& slice,
                                                                  bool may_grow, uint64_t before,
                                                                  PushState& push) {
  if (slice_cap_ > 0 && tier_ == nullptr) {  // a tiered table's cap: SweepTier
    // Evictions are outside any cut: the slice is copied first.
    if (slice.rows.size() > slice_cap_) CopyForCut(slice);
    EvictOverCap(s, slice, push.decisions);
  }
  if (may_grow) {
    push.grown += slice.rows.bytes() - before;
    PublishShape(s, slice);
  }
}

void SparseTable::Settle(uint64_t reserved, uint64_t grown) {
  // What was reserved beyond what was allocated goes back. A bound read from
  // shapes that concurrent pushes then grew may prove low: the excess is
  // allocated, so it is charged.
  if (grown <= reserved) {
    budget_->Release(reserved - grown);
  } else {
    budget_->Charge(grown - reserved);
  }
  bytes_.fetch_add(grown, std::memory_order_relaxed);
}

ABSL_ATTRIBUTE_ALWAYS_INLINE inline void SparseTable::FinishPush(uint64_t reserved,
                                                                 const PushState& push) {
  admitted_.fetch_add(push.created_rows, std::memory_order_relaxed);
  refused_.fetch_add(push.refused, std::memory_order_relaxed);
  Settle(reserved, push.grown);
  rows_.fetch_add(push.created_rows, std::memory_order_relaxed);
  version_.fetch_add(1, std::memory_order_relaxed);
}

absl::Status SparseTable::Read(absl::Span<const uint64_t> keys, char* dst) const {
  absl::StatusOr<KeyPlan> plan = Plan(keys);
  if (!plan.ok()) return plan.status();
  return Read(keys, *plan, dst);
}

absl::Status SparseTable::Read(absl::Span<const uint64_t> keys, const KeyPlan& plan,
                               char* dst) const {
  const size_t row_bytes = width_ * sizeof(float);
  std::vector<float> initial(width_);
  std::vector<size_t> missing;
  std::vector<RowStore::RowRef> refs;
  SplitByCache(keys, plan, &missing, &refs, [&](size_t i, const float* row) {
    std::memcpy(dst + i * row_bytes, row, row_bytes);
  });
  if (tier_ == nullptr) {
    // Keys without a row read as their initial values.
    for (size_t i : missing) {
      InitializeValues(def_, keys[i], 1, initial.data());
      std::memcpy(dst + i * row_bytes, initial.data(), row_bytes);
    }
    return absl::OkStatus();
  }
  if (missing.empty()) return absl::OkStatus();
  // The rows not in the cache, in one read with no slice locked: the disk
  // holds a row's last value whenever the cache lacks it (a row leaves the
  // cache only once written there).
  std::vector<char> rows;
  std::unique_ptr<bool[]> found;
  if (absl::Status s = ReadTier(refs, &rows, &found); !s.ok()) return s;
  for (size_t j = 0; j < missing.size(); ++j) {
    const size_t i = missing[j];
    const char* src = rows.data() + j * stride_bytes();
    if (!found[j]) {
      InitializeValues(def_, keys[i], 1, initial.data());
      src = reinterpret_cast<const char*>(initial.data());
    }
    std::memcpy(dst + i * row_bytes, src, row_bytes);
  }
  return absl::OkStatus();
}

uint64_t SparseTable::BytesToCreate(const proto::TableDef& def) {
  // Empty at creation: slice pointers, and the owned slices' locks and
  // maps; rows are charged as pushes create them.
  const uint64_t buckets = LayoutOf(def).num_buckets;
  // Admission counters: every bucket's are counted, owned or not (an upper
  // bound; a fraction of them are this server's).
  const uint64_t sketch = def.admit_after_pushes() > 1 ? kSketchBytes : 0;
  return buckets * (sizeof(void*) + kSliceOverheadBytes + sketch);
}

}  // namespace ps
