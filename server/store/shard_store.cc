#include "server/store/shard_store.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "Eigen/Core"
#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/table_def.h"
#include "common/table_layout.h"
#include "server/store/initializer.h"
#include "server/store/shard_store_table.h"

namespace ps {

namespace {

// Calls fn(slice_index, b, e) for each maximal group of consecutive keys
// keys[b, e) of a key list that lie in one slice.
// (ForEachListGroup, below.)
//
// Calls fn(slice_index, runs) for each group of keys of the request that
// lie in one slice, in request order; runs(f) calls f(first_key, num_keys,
// value_offset) for each run of consecutive keys of the group. A dense range
// gives one group per slice it crosses, with one run. Consecutive keys of a
// key list that lie in one slice form one group (PsClient sends key lists
// grouped by slice), each key a run of its own: the slice is locked and its
// ownership checked once per group, not once per key.
template <typename Fn>
void ForEachListGroup(absl::Span<const uint64_t> keys, uint64_t slice_size, Fn fn) {
  size_t b = 0;
  while (b < keys.size()) {
    const uint64_t s = keys[b] / slice_size;
    const uint64_t lo = s * slice_size, hi = lo + slice_size;
    size_t e = b + 1;
    while (e < keys.size() && keys[e] >= lo && keys[e] < hi) ++e;
    fn(s, b, e);
    b = e;
  }
}

template <typename Fn>
void ForEachSliceGroup(const KeySpec& keys, uint64_t slice_size, Fn fn) {
  if (keys.is_list) {
    const absl::Span<const uint64_t> k = keys.keys;
    ForEachListGroup(k, slice_size, [&](uint64_t s, size_t b, size_t e) {
      fn(s, [k, b, e](auto f) {
        for (size_t i = b; i < e; ++i) f(k[i], uint64_t{1}, uint64_t{i});
      });
    });
    return;
  }
  uint64_t offset = 0;
  for (const KeySpec::Range& r : keys.ranges) {
    uint64_t k = r.begin;
    while (k < r.end) {
      const uint64_t s = k / slice_size;
      const uint64_t run_end = std::min(r.end, (s + 1) * slice_size);
      fn(s, [k, n = run_end - k, offset](auto f) { f(k, n, offset); });
      offset += run_end - k;
      k = run_end;
    }
  }
}

// Copies n floats (a single one without a library call: rows of key lists).
void CopyRun(char* dst, const float* src, uint64_t n) {
  if (n == 1) {
    std::memcpy(dst, src, sizeof(float));
  } else {
    std::memcpy(dst, src, n * sizeof(float));
  }
}

// Index of the first NaN or Inf in v, or v.size(). Checks blocks with a
// vectorized reduction and looks for the culprit only in a bad block.
size_t FirstNonFinite(absl::Span<const float> v) {
  constexpr size_t kBlock = 4096;
  for (size_t b = 0; b < v.size(); b += kBlock) {
    const size_t m = std::min(kBlock, v.size() - b);
    // A float is NaN or Inf exactly when its exponent bits are all ones;
    // this loop has no branch and vectorizes (Eigen's allFinite did not).
    uint32_t bad = 0;
    for (size_t i = b; i < b + m; ++i) {
      uint32_t bits;
      std::memcpy(&bits, &v[i], sizeof bits);
      bad |= static_cast<uint32_t>((bits & 0x7f800000u) == 0x7f800000u);
    }
    if (bad == 0) continue;
    for (size_t i = b; i < b + m; ++i) {
      if (!std::isfinite(v[i])) return i;
    }
  }
  return v.size();
}

// The key whose values start at value index `i` / width.
uint64_t KeyAtValue(const KeySpec& keys, uint64_t value_index, uint64_t width) {
  uint64_t index = value_index / width;
  if (keys.is_list) return keys.keys[index];
  for (const KeySpec::Range& r : keys.ranges) {
    if (index < r.end - r.begin) return r.begin + index;
    index -= r.end - r.begin;
  }
  return 0;
}

}  // namespace

ShardStore::ShardStore(int server_index, const Placement& placement, StoreLimits limits,
                       Clock* clock)
    : server_index_(server_index),
      placement_(placement),
      limits_(limits),
      clock_(clock),
      budget_(limits.memory_budget_bytes, limits.process_budget) {}

ShardStore::~ShardStore() = default;

namespace {

absl::Status Conflict(const proto::TableDef& existing, const proto::TableDef& requested) {
  return absl::AlreadyExistsError(absl::StrCat(
      "table '", requested.name(), "' already exists with a different definition: existing ",
      TableDefSummary(existing), ", requested ", TableDefSummary(requested)));
}

// Bookkeeping per slice besides its floats (mutex, vectors, pointer).
constexpr uint64_t kSliceOverheadBytes = 128;

}  // namespace

absl::StatusOr<uint64_t> ShardStore::TableBytes(const proto::TableDef& def) const {
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(def);
  if (!optimizer.ok()) return optimizer.status();
  if (def.kind() == proto::TABLE_SPARSE) {
    // Empty at creation: slice pointers, and the owned slices' locks and
    // maps; rows are charged as pushes create them.
    const uint64_t buckets = LayoutOf(def).num_buckets;
    // Admission counters: every bucket's are counted, owned or not (an upper
    // bound; a fraction of them are this server's).
    const uint64_t sketch = def.admit_after_pushes() > 1 ? SparseTable::kSketchBytes : 0;
    return buckets * (sizeof(void*) + kSliceOverheadBytes + sketch);
  }
  const uint64_t slice_size = placement_.config().slice_size;
  const uint64_t num_slices = def.num_keys() / slice_size + (def.num_keys() % slice_size != 0);
  const uint64_t floats_per_key = uint64_t{def.width()} * (1 + (*optimizer)->state_per_value());
  // Owned slices are counted one by one up to kExactSlices; past that, the
  // owned fraction of the first kExactSlices (a hash, so representative)
  // is scaled up. Full slices only: the last one may be shorter.
  constexpr uint64_t kExactSlices = uint64_t{1} << 22;
  const uint64_t counted = std::min(num_slices, kExactSlices);
  uint64_t owned = 0;
  bool owns_last = false;
  for (uint64_t s = 0; s < counted; ++s) {
    if (placement_.OwnerOfSlice(def.name(), s) == server_index_) {
      ++owned;
      owns_last = s + 1 == num_slices;
    }
  }
  if (counted < num_slices) {
    owned = static_cast<uint64_t>(static_cast<long double>(owned) * num_slices / counted);
  }
  const uint64_t last_keys = def.num_keys() - (num_slices - 1) * slice_size;
  const uint64_t keys = owned * slice_size - (owns_last ? slice_size - last_keys : 0);
  const long double bytes = static_cast<long double>(keys) * floats_per_key * sizeof(float) +
                            owned * kSliceOverheadBytes +
                            num_slices * sizeof(std::unique_ptr<Slice>);
  return bytes >= 0x1p63L ? uint64_t{1} << 63 : static_cast<uint64_t>(bytes);
}

uint64_t ShardStore::bytes_used() const { return budget_.used(); }

absl::StatusOr<bool> ShardStore::CreateTable(const proto::TableDef& def) {
  if (absl::Status s = ValidateTableDef(def); !s.ok()) return s;
  absl::StatusOr<uint64_t> bytes = TableBytes(def);
  if (!bytes.ok()) return bytes.status();
  {
    // Charge the budget before allocating anything.
    absl::MutexLock lock(&tables_mu_);
    auto it = tables_.find(def.name());
    if (it != tables_.end()) {
      if (SameTableDef(it->second->def(), def)) return false;
      return Conflict(it->second->def(), def);
    }
    if (tables_.size() + tables_pending_ >= limits_.max_tables) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "table '", def.name(), "' would be table ", tables_.size() + tables_pending_ + 1,
          " on server ", server_index_, ", over the limit of ", limits_.max_tables,
          " tables (ps_server --max_tables)"));
    }
    if (!budget_.TryCharge(*bytes)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "table '", def.name(), "' needs ", *bytes, " bytes on server ", server_index_,
          " (its slices here with optimizer state), but only ", budget_.left(),
          " of the memory budget of ", budget_.limit(),
          " bytes are left (ps_server --memory_budget_mb); use fewer keys or more servers"));
    }
    ++tables_pending_;
  }
  absl::StatusOr<std::unique_ptr<Optimizer>> optimizer = MakeOptimizer(def);
  // Build outside the lock (initialization touches every value), then insert;
  // a concurrent creator of the same table may win the race.
  auto table = std::make_shared<Table>(def, *std::move(optimizer), server_index_, placement_,
                                       &budget_, clock_, &cut_state_);
  std::shared_ptr<Table> created = table;
  {
    absl::MutexLock lock(&tables_mu_);
    --tables_pending_;
    auto [it, inserted] = tables_.try_emplace(def.name(), std::move(table));
    if (!inserted) {
      budget_.Release(*bytes);
      if (SameTableDef(it->second->def(), def)) return false;
      return Conflict(it->second->def(), def);
    }
  }
  // A table created while a cut is marked joins it, so that its pushes
  // below the cut are in that checkpoint (cut_mu_ is taken before
  // tables_mu_, as in MarkCut).
  absl::MutexLock cut_lock(&cut_mu_);
  if (cut_ != 0 &&
      std::find(cut_tables_.begin(), cut_tables_.end(), created) == cut_tables_.end()) {
    created->SetCut(cut_, budget_);
    cut_tables_.push_back(created);
  }
  return true;
}

absl::StatusOr<std::shared_ptr<ShardStore::Table>> ShardStore::FindTable(
    absl::string_view name) const {
  absl::ReaderMutexLock lock(&tables_mu_);
  auto it = tables_.find(name);
  if (it == tables_.end()) {
    return absl::NotFoundError(absl::StrCat("table '", name, "' not found on server ",
                                            server_index_, "; create it first"));
  }
  return it->second;
}

uint64_t ShardStore::EvictRows(absl::string_view table, absl::Span<const uint64_t> keys) {
  absl::StatusOr<std::shared_ptr<Table>> found = FindTable(table);
  if (!found.ok() || (*found)->sparse() == nullptr) return 0;
  return (*found)->sparse()->EvictKeys(keys);
}

uint64_t ShardStore::Sweep(
    std::vector<std::pair<std::string, std::vector<uint64_t>>>* evicted_keys) {
  const absl::Time now = clock_->Now();
  std::vector<std::shared_ptr<Table>> sparse;
  {
    absl::MutexLock lock(&tables_mu_);
    if (now - last_sweep_ < absl::Seconds(1)) return 0;
    last_sweep_ = now;
    for (const auto& [name, table] : tables_) {
      if (table->sparse() != nullptr) sparse.push_back(table);
    }
  }
  uint64_t evicted = 0;
  for (const auto& table : sparse) {
    if (evicted_keys == nullptr) {
      evicted += table->sparse()->Sweep();
      continue;
    }
    std::vector<uint64_t> keys;
    evicted += table->sparse()->Sweep(&keys);
    if (!keys.empty()) evicted_keys->emplace_back(table->def().name(), std::move(keys));
  }
  return evicted;
}

bool ShardStore::FillSparseStats(proto::TableStats* stats) const {
  absl::StatusOr<std::shared_ptr<Table>> table = FindTable(stats->table());
  if (!table.ok() || (*table)->sparse() == nullptr) return false;
  const SparseTable& sparse = *(*table)->sparse();
  stats->set_rows(sparse.rows());
  stats->set_admitted(sparse.admitted());
  stats->set_refused(sparse.refused());
  stats->set_evicted(sparse.evicted());
  return true;
}

std::vector<std::string> ShardStore::SparseTableNames() const {
  std::vector<std::string> names;
  absl::ReaderMutexLock lock(&tables_mu_);
  for (const auto& [name, table] : tables_) {
    if (table->sparse() != nullptr) names.push_back(name);
  }
  return names;
}

absl::StatusOr<proto::TableDef> ShardStore::GetTableDef(absl::string_view table) const {
  absl::StatusOr<std::shared_ptr<Table>> t = FindTable(table);
  if (!t.ok()) return t.status();
  return (*t)->def();
}

namespace {

// Checks that every key exists in the table and is owned by this server
// (owned(slice) says whether this server holds the slice).
template <typename Owned>
absl::Status CheckKeys(const proto::TableDef& def, const KeySpec& keys, const Placement& placement,
                       int server_index, Owned owned) {
  for (const KeySpec::Range& r : keys.ranges) {
    if (r.end < r.begin) {
      return absl::InvalidArgumentError(
          absl::StrCat("table '", def.name(), "': range [", r.begin, ", ", r.end, ") is reversed"));
    }
    if (r.end > def.num_keys()) {
      return absl::InvalidArgumentError(absl::StrCat("table '", def.name(), "': range [", r.begin,
                                                     ", ", r.end, ") exceeds num_keys ",
                                                     def.num_keys()));
    }
  }
  absl::Status status;
  const uint64_t slice_size = placement.config().slice_size;
  const uint64_t num_keys = def.num_keys();
  ForEachSliceGroup(keys, slice_size, [&](uint64_t s, auto runs) {
    if (!status.ok()) return;
    uint64_t bad = num_keys;  // a key of the group out of the table, if any
    runs([&](uint64_t first, uint64_t, uint64_t) {
      if (first >= num_keys && bad == num_keys) bad = first;
    });
    if (bad != num_keys) {
      status = absl::InvalidArgumentError(
          absl::StrCat("table '", def.name(), "': key ", bad, " >= num_keys ", num_keys));
      return;
    }
    if (!owned(s)) {
      uint64_t first_key = 0;
      bool seen = false;
      runs([&](uint64_t first, uint64_t, uint64_t) {
        if (!seen) first_key = first;
        seen = true;
      });
      status = absl::FailedPreconditionError(absl::StrCat(
          "table '", def.name(), "': key ", first_key, " (slice ", s, ") is owned by server ",
          placement.OwnerOfSlice(def.name(), s), ", not server ", server_index,
          "; is the client's cluster spec the same as the servers'?"));
    }
  });
  return status;
}

}  // namespace

absl::StatusOr<std::shared_ptr<ShardStore::Table>> ShardStore::FindTableForKeys(
    absl::string_view table_name, const KeySpec& keys, SparseTable::KeyPlan* plan) const {
  absl::StatusOr<std::shared_ptr<Table>> table = FindTable(table_name);
  if (!table.ok()) return table.status();
  const Table* t = table->get();
  if (t->sparse() != nullptr) {
    if (!keys.is_list) {
      return absl::InvalidArgumentError(
          absl::StrCat("table '", table_name, "' is sparse: it takes key lists, not ranges"));
    }
    absl::StatusOr<SparseTable::KeyPlan> planned = t->sparse()->Plan(keys.keys);
    if (!planned.ok()) return planned.status();
    *plan = *std::move(planned);
    return table;
  }
  absl::Status s = CheckKeys(t->def(), keys, placement_, server_index_,
                             [t](uint64_t slice) { return t->slice(slice) != nullptr; });
  if (!s.ok()) return s;
  return table;
}

absl::StatusOr<ShardStore::PushResult> ShardStore::Push(absl::string_view table,
                                                        const KeySpec& keys,
                                                        absl::Span<const float> grads) {
  return Push(table, keys, grads, 0, [] { return absl::StatusOr<bool>(true); });
}

absl::StatusOr<ShardStore::PushResult> ShardStore::Push(absl::string_view table_name,
                                                        const KeySpec& keys,
                                                        absl::Span<const float> grads,
                                                        uint64_t clock, Admit admit,
                                                        SparseTable::Decisions* decisions) {
  return PushImpl(table_name, keys, grads, clock, admit, nullptr, decisions);
}

absl::StatusOr<ShardStore::PushResult> ShardStore::PushAndRead(
    absl::string_view table, const KeySpec& keys, absl::Span<const float> grads, uint64_t clock,
    Admit admit, absl::FunctionRef<char*(size_t bytes)> allocate,
    SparseTable::Decisions* decisions) {
  return PushImpl(table, keys, grads, clock, admit, &allocate, decisions);
}

absl::StatusOr<ShardStore::PushResult> ShardStore::PushImpl(
    absl::string_view table_name, const KeySpec& keys, absl::Span<const float> grads,
    uint64_t clock, Admit admit, const absl::FunctionRef<char*(size_t bytes)>* allocate,
    SparseTable::Decisions* decisions) {
  SparseTable::KeyPlan plan;
  absl::StatusOr<std::shared_ptr<Table>> found = FindTableForKeys(table_name, keys, &plan);
  if (!found.ok()) return found.status();
  Table& table = **found;
  const proto::TableDef& def = table.def();
  const uint64_t width = def.width();
  if (grads.size() != keys.size() * width) {
    return absl::InvalidArgumentError(absl::StrCat(
        "table '", def.name(), "': push has ", grads.size(), " values for ", keys.size(),
        " keys of width ", width, " (expected ", keys.size() * width, ")"));
  }
  if (const size_t i = FirstNonFinite(grads); i < grads.size()) {
    const uint64_t key = KeyAtValue(keys, i, width);
    return absl::InvalidArgumentError(absl::StrCat("table '", def.name(), "': gradient for key ",
                                                   key, " column ", i % width, " is not finite (",
                                                   grads[i], "); nothing was applied"));
  }
  // Before any slice is locked: a cut marked from now on sees this clock
  // (MarkCut).
  uint64_t max_clock = max_clock_.load();
  while (clock > max_clock && !max_clock_.compare_exchange_weak(max_clock, clock)) {
  }
  char* dst = nullptr;
  if (allocate != nullptr) {
    dst = (*allocate)(grads.size() * sizeof(float));
    if (dst == nullptr && !grads.empty()) {
      return absl::InternalError(absl::StrCat("table '", def.name(), "': no buffer for the ",
                                              grads.size(), " values read back"));
    }
  }
  if (SparseTable* sparse = table.sparse()) {
    // Creates missing rows (charging the budget), then admits and applies.
    absl::StatusOr<bool> applied =
        sparse->Push(keys.keys, plan, grads, clock, admit, dst, decisions);
    if (!applied.ok()) return applied.status();
    return PushResult{!*applied, table.version().load()};
  }
  // Last: once admitted, the push is recorded as applied.
  absl::StatusOr<bool> fresh = admit();
  if (!fresh.ok()) return fresh.status();
  const uint64_t slice_size = placement_.config().slice_size;
  if (!*fresh) {
    // A retry of an applied push: nothing to apply; read back if asked.
    if (dst != nullptr) CopyValues(table, keys, plan, dst);
    return PushResult{true, table.version().load()};
  }
  const Optimizer& opt = table.optimizer();
  const int state_per_value = opt.state_per_value();
  if (keys.is_list) {
    // Rows of a key list, one slice's at a time, in one call.
    std::vector<float*> rows, row_states;
    ForEachListGroup(keys.keys, slice_size, [&](uint64_t s, size_t b, size_t e) {
      Slice* slice = table.slice(s);
      const uint64_t slice_first = s * slice_size;
      absl::MutexLock lock(&slice->mu);
      uint64_t tag;
      Slice::Copy* const also = PrepareCut(*slice, clock, def, cut_state_, budget_, &tag);
      slice->tag = std::max(slice->tag, tag);
      if (also != nullptr) also->tag = std::max(also->tag, tag);
      rows.resize(e - b);
      row_states.resize(state_per_value ? e - b : 0);
      for (int pass = 0; pass < (also != nullptr ? 2 : 1); ++pass) {
        // Pass 1: an in-cut push to the slice's copy as well.
        float* const values = pass == 0 ? slice->values.data() : also->values.data();
        float* const states = pass == 0 ? slice->state.data() : also->state.data();
        for (size_t i = b; i < e; ++i) {
          const uint64_t at = (keys.keys[i] - slice_first) * width;
          rows[i - b] = values + at;
          if (state_per_value) row_states[i - b] = states + at * state_per_value;
        }
        opt.ApplyRows(rows.data(), state_per_value ? row_states.data() : nullptr,
                      grads.data() + b * width, e - b, width, clock,
                      dst != nullptr && pass == 0 ? dst + b * width * sizeof(float) : nullptr);
      }
    });
    return PushResult{false, table.version().fetch_add(1) + 1};
  }
  ForEachSliceGroup(keys, slice_size, [&](uint64_t s, auto runs) {
    Slice* slice = table.slice(s);
    const uint64_t slice_first = s * slice_size;
    absl::MutexLock lock(&slice->mu);
    uint64_t tag;
    Slice::Copy* const also = PrepareCut(*slice, clock, def, cut_state_, budget_, &tag);
    slice->tag = std::max(slice->tag, tag);
    if (also != nullptr) also->tag = std::max(also->tag, tag);
    // Taken under the lock (the analysis does not follow it into `runs`).
    float* const values = slice->values.data();
    float* const states = slice->state.data();
    runs([&](uint64_t first, uint64_t n, uint64_t offset) {
      const uint64_t at = (first - slice_first) * width;
      float* w = values + at;
      float* state = state_per_value ? states + at * state_per_value : nullptr;
      opt.Apply(w, state, grads.data() + offset * width, n, width, clock);
      // Read back while the slice is still locked: one lock for both.
      if (dst != nullptr) CopyRun(dst + offset * width * sizeof(float), w, n * width);
      if (also != nullptr) {  // an in-cut push to the slice's copy as well
        opt.Apply(also->values.data() + at,
                  state_per_value ? also->state.data() + at * state_per_value : nullptr,
                  grads.data() + offset * width, n, width, clock);
      }
    });
  });
  return PushResult{false, table.version().fetch_add(1) + 1};
}

void ShardStore::CopyValues(Table& table, const KeySpec& keys, const SparseTable::KeyPlan& plan,
                            char* dst) const {
  if (const SparseTable* sparse = table.sparse()) return sparse->Read(keys.keys, plan, dst);
  const uint64_t width = table.def().width();
  const uint64_t slice_size = placement_.config().slice_size;
  ForEachSliceGroup(keys, slice_size, [&](uint64_t s, auto runs) {
    Slice* slice = table.slice(s);
    const uint64_t slice_first = s * slice_size;
    absl::ReaderMutexLock lock(&slice->mu);
    const float* const values = slice->values.data();
    runs([&](uint64_t first, uint64_t n, uint64_t offset) {
      CopyRun(dst + offset * width * sizeof(float), values + (first - slice_first) * width,
              n * width);
    });
  });
}

absl::StatusOr<uint64_t> ShardStore::Pull(absl::string_view table, const KeySpec& keys,
                                          std::string* out) {
  return Pull(table, keys, [out](size_t bytes) {
    out->resize(bytes);
    return bytes ? &(*out)[0] : nullptr;
  });
}

absl::StatusOr<uint64_t> ShardStore::Pull(absl::string_view table_name, const KeySpec& keys,
                                          absl::FunctionRef<char*(size_t bytes)> allocate) {
  SparseTable::KeyPlan plan;
  absl::StatusOr<std::shared_ptr<Table>> found = FindTableForKeys(table_name, keys, &plan);
  if (!found.ok()) return found.status();
  Table& table = **found;
  const proto::TableDef& def = table.def();
  const uint64_t width = def.width();
  const uint64_t version = table.version().load();
  char* dst = allocate(keys.size() * width * sizeof(float));
  if (dst == nullptr && keys.size() > 0) {
    return absl::InternalError(absl::StrCat("table '", def.name(), "': no buffer for the ",
                                            keys.size() * width, " values pulled"));
  }
  CopyValues(table, keys, plan, dst);
  return version;
}

}  // namespace ps
