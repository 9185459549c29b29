#include "server/sparse_table.h"

#include <algorithm>
#include <cstring>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "common/table_layout.h"
#include "server/initializer.h"

namespace ps {

SparseTable::SparseTable(const proto::TableDef& def, std::unique_ptr<Optimizer> optimizer,
                         int server_index, const Placement& placement, MemoryBudget* budget)
    : def_(def),
      optimizer_(std::move(optimizer)),
      num_buckets_(LayoutOf(def).num_buckets),
      width_(def.width()),
      floats_per_row_(def.width() * (1 + optimizer_->state_per_value())),
      server_index_(server_index),
      placement_(placement),
      budget_(budget) {
  slices_.resize(num_buckets_);
  for (uint64_t s = 0; s < num_buckets_; ++s) {
    if (placement_.OwnerOfSlice(def_.name(), s) == server_index_) {
      slices_[s] = std::make_unique<Slice>(floats_per_row_);
    }
  }
}

SparseTable::~SparseTable() { budget_->Release(bytes()); }

absl::Status SparseTable::CheckOwned(absl::Span<const uint64_t> keys) const {
  uint64_t last = ~uint64_t{0};
  for (uint64_t key : keys) {
    const uint64_t s = SliceOf(key);
    if (s == last) continue;
    last = s;
    if (slices_[s] == nullptr) {
      return absl::FailedPreconditionError(absl::StrCat(
          "table '", def_.name(), "': key ", key, " (slice ", s, ") is owned by server ",
          placement_.OwnerOfSlice(def_.name(), s), ", not server ", server_index_,
          "; is the client's cluster spec the same as the servers'?"));
    }
  }
  return absl::OkStatus();
}

std::vector<SparseTable::Group> SparseTable::GroupsOf(absl::Span<const uint64_t> keys,
                                                      std::vector<uint64_t>* hashes) const {
  hashes->resize(keys.size());
  std::vector<Group> groups;
  uint64_t last = ~uint64_t{0};
  for (size_t i = 0; i < keys.size(); ++i) {
    const uint64_t h = SparseRows::Hash(keys[i]);
    (*hashes)[i] = h;
    const uint64_t s = Placement::SparseSliceOfHash(h, num_buckets_);
    if (s != last) {
      groups.push_back({s, i, i + 1});
      last = s;
    } else {
      groups.back().end = i + 1;
    }
  }
  return groups;
}

void SparseTable::InitRow(uint64_t key, float* row) const {
  InitializeValues(def_, key, 1, row);
  if (floats_per_row_ > width_) optimizer_->InitState(row + width_, floats_per_row_ - width_);
}

uint64_t SparseTable::Reserve(absl::Span<const Group> groups, absl::Span<const uint64_t> keys,
                              absl::Span<const uint64_t> hashes, absl::Status* status) {
  // First without locks, as if every key were new, from each slice's
  // published shape.
  uint64_t bound = 0;
  for (const Group& g : groups) {
    const Slice& slice = *slices_[g.slice];
    SparseRows::Shape shape;
    shape.size = slice.size.load(std::memory_order_relaxed);
    shape.next_row = slice.next_row.load(std::memory_order_relaxed);
    shape.slots = slice.slots.load(std::memory_order_relaxed);
    shape.chunks = slice.chunks.load(std::memory_order_relaxed);
    bound += SparseRows::BytesToInsert(floats_per_row_, shape, g.end - g.begin);
  }
  if (budget_->TryCharge(bound)) return bound;
  // Near the limit: exactly what the missing keys need.
  uint64_t exact = 0;
  size_t missing = 0;
  for (const Group& g : groups) {
    const Slice& slice = *slices_[g.slice];
    absl::ReaderMutexLock lock(&slice.mu);
    size_t m = 0;
    for (size_t i = g.begin; i < g.end; ++i) m += slice.rows.Find(keys[i], hashes[i]) == nullptr;
    exact += slice.rows.BytesToInsert(m);
    missing += m;
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
  std::vector<uint64_t> hashes;
  const std::vector<Group> groups = GroupsOf(keys, &hashes);
  // Memory for the rows this push may create is charged before anything
  // changes, so that once admitted the push is applied whole.
  absl::Status status;
  const uint64_t reserved = Reserve(groups, keys, hashes, &status);
  if (!status.ok()) return status;
  absl::StatusOr<bool> fresh = admit();
  if (!fresh.ok() || !*fresh) {
    budget_->Release(reserved);
    if (!fresh.ok()) return fresh.status();
    if (dst != nullptr) Read(keys, dst);
    return false;
  }
  std::vector<float*> rows(keys.size()), states;
  if (floats_per_row_ > width_) states.resize(keys.size());
  uint64_t grown = 0, created_rows = 0;
  // Map slots are scattered: each is requested a few keys ahead.
  constexpr size_t kAhead = 8;
  for (const Group& g : groups) {
    Slice& slice = *slices_[g.slice];
    absl::MutexLock lock(&slice.mu);
    const uint64_t before = slice.rows.bytes();
    for (size_t i = g.begin; i < std::min(g.end, g.begin + kAhead); ++i) {
      slice.rows.Prefetch(hashes[i]);
    }
    for (size_t i = g.begin; i < g.end; ++i) {
      if (i + kAhead < g.end) slice.rows.Prefetch(hashes[i + kAhead]);
      bool created = false;
      rows[i] = slice.rows.Insert(keys[i], hashes[i], &created);
      if (created) {
        InitRow(keys[i], rows[i]);
        ++created_rows;
      }
      if (!states.empty()) states[i] = rows[i] + width_;
    }
    optimizer_->ApplyRows(rows.data() + g.begin, states.empty() ? nullptr : states.data() + g.begin,
                          grads.data() + g.begin * width_, g.end - g.begin, width_, clock,
                          dst != nullptr ? dst + g.begin * width_ * sizeof(float) : nullptr);
    grown += slice.rows.bytes() - before;
    const SparseRows::Shape shape = slice.rows.shape();
    slice.size.store(shape.size, std::memory_order_relaxed);
    slice.next_row.store(shape.next_row, std::memory_order_relaxed);
    slice.slots.store(shape.slots, std::memory_order_relaxed);
    slice.chunks.store(shape.chunks, std::memory_order_relaxed);
  }
  // What was reserved beyond what was allocated goes back. A bound read from
  // shapes that concurrent pushes then grew may prove low: the excess is
  // allocated, so it is charged.
  if (grown <= reserved) {
    budget_->Release(reserved - grown);
  } else {
    budget_->Charge(grown - reserved);
  }
  bytes_.fetch_add(grown, std::memory_order_relaxed);
  rows_.fetch_add(created_rows, std::memory_order_relaxed);
  version_.fetch_add(1, std::memory_order_relaxed);
  return true;
}

void SparseTable::Read(absl::Span<const uint64_t> keys, char* dst) const {
  const size_t row_bytes = width_ * sizeof(float);
  std::vector<float> initial(width_);
  std::vector<uint64_t> hashes;
  for (const Group& g : GroupsOf(keys, &hashes)) {
    const Slice& slice = *slices_[g.slice];
    absl::ReaderMutexLock lock(&slice.mu);
    for (size_t i = g.begin; i < g.end; ++i) {
      const float* row = slice.rows.Find(keys[i], hashes[i]);
      if (row == nullptr) {
        InitializeValues(def_, keys[i], 1, initial.data());
        row = initial.data();
      }
      std::memcpy(dst + i * row_bytes, row, row_bytes);
    }
  }
}

}  // namespace ps
