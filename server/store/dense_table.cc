#include "server/store/dense_table.h"

#include <algorithm>
#include <cstring>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "server/store/initializer.h"

namespace ps {

namespace {

// Calls fn(slice_index, b, e) for each maximal group of consecutive keys
// keys[b, e) of a key list that lie in one slice.
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

// Calls fn(slice_index, runs) for each group of keys of the request that
// lie in one slice, in request order; runs(f) calls f(first_key, num_keys,
// value_offset) for each run of consecutive keys of the group. A dense range
// gives one group per slice it crosses, with one run. Consecutive keys of a
// key list that lie in one slice form one group (PsClient sends key lists
// grouped by slice), each key a run of its own: the slice is locked and its
// ownership checked once per group, not once per key.
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

// Bookkeeping per slice besides its floats (mutex, vectors, pointer).
constexpr uint64_t kSliceOverheadBytes = 128;

}  // namespace

DenseTable::DenseTable(const proto::TableDef& def, std::unique_ptr<Optimizer> optimizer,
                       int server_index, const Placement& placement, MemoryBudget* budget,
                       CutState* cut_state)
    : def_(def),
      optimizer_(std::move(optimizer)),
      width_(def.width()),
      state_per_value_(optimizer_->state_per_value()),
      slice_size_(placement.config().slice_size),
      server_index_(server_index),
      placement_(placement),
      budget_(budget),
      cut_state_(cut_state) {
  const uint64_t num_slices = (def.num_keys() + slice_size_ - 1) / slice_size_;
  slices_.resize(num_slices);
  for (uint64_t s = 0; s < num_slices; ++s) {
    if (placement.OwnerOfSlice(def.name(), s) != server_index) continue;
    const uint64_t first = s * slice_size_;
    const uint64_t keys = std::min(def.num_keys(), first + slice_size_) - first;
    auto slice = std::make_unique<Slice>();
    absl::MutexLock lock(&slice->mu);
    slice->tag = cut_state_->ChangeTag();
    slice->values.resize(keys * width_);
    InitializeValues(def, first, keys, slice->values.data());
    slice->state.resize(slice->values.size() * state_per_value_);
    optimizer_->InitState(slice->state.data(), slice->state.size());
    slices_[s] = std::move(slice);
  }
}

uint64_t DenseTable::BytesToCreate(const proto::TableDef& def, int state_per_value,
                                   const Placement& placement, int server_index) {
  const uint64_t slice_size = placement.config().slice_size;
  const uint64_t num_slices = def.num_keys() / slice_size + (def.num_keys() % slice_size != 0);
  const uint64_t floats_per_key = uint64_t{def.width()} * (1 + state_per_value);
  // Owned slices are counted one by one up to kExactSlices; past that, the
  // owned fraction of the first kExactSlices (a hash, so representative)
  // is scaled up. Full slices only: the last one may be shorter.
  constexpr uint64_t kExactSlices = uint64_t{1} << 22;
  const uint64_t counted = std::min(num_slices, kExactSlices);
  uint64_t owned = 0;
  bool owns_last = false;
  for (uint64_t s = 0; s < counted; ++s) {
    if (placement.OwnerOfSlice(def.name(), s) == server_index) {
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

absl::Status DenseTable::CheckKeys(const KeySpec& keys) const {
  const uint64_t num_keys = def_.num_keys();
  for (const KeySpec::Range& r : keys.ranges) {
    if (r.end < r.begin) {
      return absl::InvalidArgumentError(absl::StrCat("table '", def_.name(), "': range [", r.begin,
                                                     ", ", r.end, ") is reversed"));
    }
    if (r.end > num_keys) {
      return absl::InvalidArgumentError(absl::StrCat("table '", def_.name(), "': range [", r.begin,
                                                     ", ", r.end, ") exceeds num_keys ", num_keys));
    }
  }
  absl::Status status;
  ForEachSliceGroup(keys, slice_size_, [&](uint64_t s, auto runs) {
    if (!status.ok()) return;
    uint64_t bad = num_keys;  // a key of the group out of the table, if any
    runs([&](uint64_t first, uint64_t, uint64_t) {
      if (first >= num_keys && bad == num_keys) bad = first;
    });
    if (bad != num_keys) {
      status = absl::InvalidArgumentError(
          absl::StrCat("table '", def_.name(), "': key ", bad, " >= num_keys ", num_keys));
      return;
    }
    if (slices_[s] == nullptr) {
      uint64_t first_key = 0;
      bool seen = false;
      runs([&](uint64_t first, uint64_t, uint64_t) {
        if (!seen) first_key = first;
        seen = true;
      });
      status = absl::FailedPreconditionError(absl::StrCat(
          "table '", def_.name(), "': key ", first_key, " (slice ", s, ") is owned by server ",
          placement_.OwnerOfSlice(def_.name(), s), ", not server ", server_index_,
          "; is the client's cluster spec the same as the servers'?"));
    }
  });
  return status;
}

DenseTable::Slice::Copy* DenseTable::PrepareChange(Slice& slice, uint64_t clock) {
  if (cut_state_->Inside(slice.cut, clock)) {
    // Inside the cut: the push is in the checkpoint at slice.cut.
    slice.tag = std::max(slice.tag, slice.cut);
    if (slice.copy != nullptr) slice.copy->tag = std::max(slice.copy->tag, slice.cut);
    return slice.copy.get();
  }
  const uint64_t tag = cut_state_->ChangeTag();
  if (slice.cut != 0 && slice.copy == nullptr) {
    // The first change outside the cut: the slice as of the cut is copied.
    const uint64_t bytes = (slice.values.size() + slice.state.size()) * sizeof(float);
    if (budget_->TryCharge(bytes)) {
      slice.copy = std::make_unique<Slice::Copy>();
      slice.copy->values = slice.values;
      slice.copy->state = slice.state;
      slice.copy->tag = slice.tag;
    } else {
      cut_state_->FailCopy(def_.name(), bytes, server_index_, *budget_);
      slice.cut = 0;
    }
  }
  slice.tag = std::max(slice.tag, tag);
  return nullptr;
}

void DenseTable::DropCopy(Slice& slice) {
  if (slice.copy == nullptr) return;
  budget_->Release((slice.copy->values.size() + slice.copy->state.size()) * sizeof(float));
  slice.copy.reset();
}

absl::StatusOr<bool> DenseTable::Push(const KeySpec& keys, absl::Span<const float> grads,
                                      uint64_t clock, float trust, Admit admit, char* dst,
                                      uint64_t* version) {
  // Last: once admitted, the push is recorded as applied.
  absl::StatusOr<bool> fresh = admit();
  if (!fresh.ok()) return fresh.status();
  if (!*fresh) {
    // A retry of an applied push: nothing to apply; read back if asked.
    if (dst != nullptr) Read(keys, dst);
    *version = version_.load();
    return false;
  }
  if (keys.is_list) {
    ApplyList(keys.keys, grads, clock, trust, dst);
  } else {
    ApplyRanges(keys, grads, clock, trust, dst);
  }
  *version = version_.fetch_add(1) + 1;
  return true;
}

void DenseTable::ApplyList(absl::Span<const uint64_t> keys, absl::Span<const float> grads,
                           uint64_t clock, float trust, char* dst) {
  const Optimizer& opt = *optimizer_;
  const uint64_t width = width_, slice_size = slice_size_;
  const int state_per_value = state_per_value_;
  // Rows of a key list, one slice's at a time, in one call.
  std::vector<float*> rows, row_states;
  ForEachListGroup(keys, slice_size, [&](uint64_t s, size_t b, size_t e) {
    Slice* slice = slices_[s].get();
    const uint64_t slice_first = s * slice_size;
    absl::MutexLock lock(&slice->mu);
    Slice::Copy* const also = PrepareChange(*slice, clock);
    rows.resize(e - b);
    row_states.resize(state_per_value ? e - b : 0);
    for (int pass = 0; pass < (also != nullptr ? 2 : 1); ++pass) {
      // Pass 1: an in-cut push to the slice's copy as well.
      float* const values = pass == 0 ? slice->values.data() : also->values.data();
      float* const states = pass == 0 ? slice->state.data() : also->state.data();
      for (size_t i = b; i < e; ++i) {
        const uint64_t at = (keys[i] - slice_first) * width;
        rows[i - b] = values + at;
        if (state_per_value) row_states[i - b] = states + at * state_per_value;
      }
      opt.ApplyRowsTrusted(rows.data(), state_per_value ? row_states.data() : nullptr,
                           grads.data() + b * width, e - b, width, clock,
                           dst != nullptr && pass == 0 ? dst + b * width * sizeof(float) : nullptr,
                           trust);
    }
  });
}

void DenseTable::ApplyRanges(const KeySpec& keys, absl::Span<const float> grads, uint64_t clock,
                             float trust, char* dst) {
  const Optimizer& opt = *optimizer_;
  const uint64_t width = width_, slice_size = slice_size_;
  const int state_per_value = state_per_value_;
  ForEachSliceGroup(keys, slice_size, [&](uint64_t s, auto runs) {
    Slice* slice = slices_[s].get();
    const uint64_t slice_first = s * slice_size;
    absl::MutexLock lock(&slice->mu);
    Slice::Copy* const also = PrepareChange(*slice, clock);
    // Taken under the lock (the analysis does not follow it into `runs`).
    float* const values = slice->values.data();
    float* const states = slice->state.data();
    runs([&](uint64_t first, uint64_t n, uint64_t offset) {
      const uint64_t at = (first - slice_first) * width;
      float* w = values + at;
      float* state = state_per_value ? states + at * state_per_value : nullptr;
      opt.ApplyTrusted(w, state, grads.data() + offset * width, n, width, clock, trust);
      // Read back while the slice is still locked: one lock for both.
      if (dst != nullptr) CopyRun(dst + offset * width * sizeof(float), w, n * width);
      if (also != nullptr) {  // an in-cut push to the slice's copy as well
        opt.ApplyTrusted(also->values.data() + at,
                         state_per_value ? also->state.data() + at * state_per_value : nullptr,
                         grads.data() + offset * width, n, width, clock, trust);
      }
    });
  });
}

void DenseTable::Read(const KeySpec& keys, char* dst) const {
  const uint64_t width = width_, slice_size = slice_size_;
  ForEachSliceGroup(keys, slice_size, [&](uint64_t s, auto runs) {
    Slice* slice = slices_[s].get();
    const uint64_t slice_first = s * slice_size;
    absl::ReaderMutexLock lock(&slice->mu);
    const float* const values = slice->values.data();
    runs([&](uint64_t first, uint64_t n, uint64_t offset) {
      CopyRun(dst + offset * width * sizeof(float), values + (first - slice_first) * width,
              n * width);
    });
  });
}

void DenseTable::ForEachRun(bool write, uint64_t clock, RunFn fn) {
  for (const auto& slice : slices_) {
    if (slice == nullptr) continue;
    if (!write) {
      absl::ReaderMutexLock lock(&slice->mu);
      fn(slice->values.data(), slice->state.data(), slice->values.size(), false);
      continue;
    }
    absl::MutexLock lock(&slice->mu);
    Slice::Copy* const also = PrepareChange(*slice, clock);
    fn(slice->values.data(), slice->state.data(), slice->values.size(), false);
    if (also != nullptr) fn(also->values.data(), also->state.data(), also->values.size(), true);
  }
}

void DenseTable::SetCut(uint64_t cut) {
  for (const auto& slice : slices_) {
    if (slice == nullptr) continue;
    absl::MutexLock lock(&slice->mu);
    DropCopy(*slice);
    slice->cut = cut;
  }
}

std::vector<std::string> DenseTable::RecordsOf(uint64_t s, const AlignedVector<float>& values,
                                               const AlignedVector<float>& state,
                                               size_t max_record_bytes) const {
  // Each record holds keys [first_key + r, first_key + r + n): their
  // values, then their state.
  const uint64_t first_key = s * slice_size_;
  const uint32_t floats_per_row = def_.width() * (1 + state_per_value_);
  const uint64_t rows = values.size() / width_;
  const uint64_t state_per_row = rows == 0 ? 0 : state.size() / rows;
  const uint64_t per_record =
      max_record_bytes == 0
          ? rows
          : std::max<uint64_t>(1, max_record_bytes / (uint64_t{floats_per_row} * sizeof(float)));
  std::vector<std::string> records;
  for (uint64_t r = 0; r < rows; r += per_record) {
    const uint64_t n = std::min(per_record, rows - r);
    proto::SliceHeader header;
    header.set_table(def_.name());
    header.set_slice(s);
    header.set_first_key(first_key + r);
    header.set_num_rows(n);
    header.set_width(def_.width());
    header.set_floats_per_row(floats_per_row);
    std::string out;
    AppendSliceHeader(header, &out);
    const size_t start = out.size();
    out.resize(start + n * (width_ + state_per_row) * sizeof(float));
    std::memcpy(&out[start], values.data() + r * width_, n * width_ * sizeof(float));
    std::memcpy(&out[start + n * width_ * sizeof(float)], state.data() + r * state_per_row,
                n * state_per_row * sizeof(float));
    records.push_back(std::move(out));
  }
  return records;
}

absl::Status DenseTable::WriteCut(absl::FunctionRef<absl::Status(std::string record)> sink,
                                  uint64_t since, size_t max_record_bytes) {
  for (uint64_t s = 0; s < slices_.size(); ++s) {
    Slice* slice = slices_[s].get();
    if (slice == nullptr) continue;
    std::vector<std::string> records;
    {
      absl::MutexLock lock(&slice->mu);
      if (slice->cut == 0) continue;  // failed: cut_state_ says why
      const bool copied = slice->copy != nullptr;
      // Unchanged since the base: nothing to write.
      if (since == 0 || (copied ? slice->copy->tag : slice->tag) > since) {
        records = RecordsOf(s, copied ? slice->copy->values : slice->values,
                            copied ? slice->copy->state : slice->state, max_record_bytes);
      }
      DropCopy(*slice);
      slice->cut = 0;
    }
    for (std::string& record : records) {
      if (absl::Status status = sink(std::move(record)); !status.ok()) return status;
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> DenseTable::LoadRecord(const SliceRecord& record) {
  const proto::SliceHeader& h = record.header;
  const uint64_t width = width_;
  const uint64_t state_per_key = width * state_per_value_;
  if (h.sparse() || h.width() != width || h.floats_per_row() != width + state_per_key) {
    return absl::FailedPreconditionError(absl::StrCat(
        "table '", def_.name(), "' slice ", h.slice(), ": the checkpoint's rows are ",
        h.sparse() ? "sparse" : "dense", " with width ", h.width(), " and ", h.floats_per_row(),
        " floats per key; this table's are dense with width ", width, " and ",
        width + state_per_key, " (same definition and optimizer expected)"));
  }
  if (h.first_key() > def_.num_keys() || h.num_rows() > def_.num_keys() - h.first_key()) {
    return absl::DataLossError(
        absl::StrCat("table '", def_.name(), "': checkpoint record of keys [", h.first_key(), ", ",
                     h.first_key() + h.num_rows(), ") exceeds num_keys ", def_.num_keys()));
  }
  // The record's keys, by this table's slices (the checkpoint may have been
  // taken with another slice size).
  const uint64_t end = h.first_key() + h.num_rows();
  uint64_t loaded = 0;
  for (uint64_t k = h.first_key(); k < end;) {
    const uint64_t s = k / slice_size_;
    const uint64_t run_end = std::min(end, (s + 1) * slice_size_);
    Slice* slice = slices_[s].get();
    if (slice != nullptr) {
      absl::MutexLock lock(&slice->mu);
      const uint64_t at = k - s * slice_size_;  // in the slice
      const uint64_t from = k - h.first_key();  // in the record
      const uint64_t n = run_end - k;
      slice->tag = 0;  // the restored checkpoint's, unchanged
      record.CopyFloats(from * width, n * width, slice->values.data() + at * width);
      if (state_per_key > 0) {
        record.CopyFloats(h.num_rows() * width + from * state_per_key, n * state_per_key,
                          slice->state.data() + at * state_per_key);
      }
      loaded += n;
    }
    k = run_end;
  }
  return loaded;
}

}  // namespace ps
