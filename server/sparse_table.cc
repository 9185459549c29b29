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

absl::Status SparseTable::CreateRows(const Group& g, absl::Span<const uint64_t> keys,
                                     absl::Span<const uint64_t> hashes, float** rows) {
  Slice& slice = *slices_[g.slice];
  absl::MutexLock lock(&slice.mu);
  // Charge before allocating: first as if every key were new (no lookups);
  // near the limit, exactly what the missing keys need.
  uint64_t reserved = slice.rows.BytesToInsert(g.end - g.begin);
  if (!budget_->TryCharge(reserved)) {
    size_t missing = 0;
    for (size_t i = g.begin; i < g.end; ++i) {
      missing += slice.rows.Find(keys[i], hashes[i]) == nullptr;
    }
    reserved = slice.rows.BytesToInsert(missing);
    if (!budget_->TryCharge(reserved)) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "table '", def_.name(), "': ", missing, " new rows need ", reserved, " bytes on server ",
          server_index_, ", but only ", budget_->left(), " of the memory budget of ",
          budget_->limit(),
          " bytes are left (ps_server --memory_budget_mb); nothing of this push was applied"));
    }
  }
  const uint64_t before = slice.rows.bytes();
  size_t created_rows = 0;
  // Map slots are scattered: each is requested a few keys ahead.
  constexpr size_t kAhead = 8;
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
  }
  const uint64_t grown = slice.rows.bytes() - before;
  // What was reserved beyond what was allocated goes back (and the rare
  // excess of a bound that proved low is charged: it is allocated).
  if (grown <= reserved) {
    budget_->Release(reserved - grown);
  } else {
    budget_->Charge(grown - reserved);
  }
  bytes_.fetch_add(grown, std::memory_order_relaxed);
  rows_.fetch_add(created_rows, std::memory_order_relaxed);
  return absl::OkStatus();
}

absl::StatusOr<bool> SparseTable::Push(absl::Span<const uint64_t> keys,
                                       absl::Span<const float> grads, uint64_t clock, Admit admit,
                                       char* dst) {
  std::vector<uint64_t> hashes;
  const std::vector<Group> groups = GroupsOf(keys, &hashes);
  // Rows never move once created (SparseRows), so their addresses stay
  // valid from step 1 to step 3.
  std::vector<float*> rows(keys.size());
  for (const Group& g : groups) {
    if (absl::Status s = CreateRows(g, keys, hashes, rows.data()); !s.ok()) return s;
  }
  absl::StatusOr<bool> fresh = admit();
  if (!fresh.ok()) return fresh.status();
  if (!*fresh) {
    if (dst != nullptr) Read(keys, dst);
    return false;
  }
  std::vector<float*> states;
  if (floats_per_row_ > width_) {
    states.resize(rows.size());
    for (size_t i = 0; i < rows.size(); ++i) states[i] = rows[i] + width_;
  }
  for (const Group& g : groups) {
    Slice& slice = *slices_[g.slice];
    absl::MutexLock lock(&slice.mu);
    optimizer_->ApplyRows(rows.data() + g.begin, states.empty() ? nullptr : states.data() + g.begin,
                          grads.data() + g.begin * width_, g.end - g.begin, width_, clock,
                          dst != nullptr ? dst + g.begin * width_ * sizeof(float) : nullptr);
  }
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
