#include "server/sparse_rows.h"

#include <algorithm>

namespace ps {

namespace {

// Chunks of about 64 KiB, of 16 to 4096 rows (a power of two).
uint32_t ChunkShift(size_t floats_per_row) {
  const size_t row_bytes = std::max<size_t>(1, floats_per_row) * sizeof(float);
  uint32_t shift = 4;
  while (shift < 12 && (size_t{2} << shift) * row_bytes <= (size_t{64} << 10)) ++shift;
  return shift;
}

// Map capacity for n keys at most 7/8 full (a power of two, >= 16).
size_t CapacityFor(size_t n) {
  size_t cap = 16;
  while (n * 8 > cap * 7) cap *= 2;
  return cap;
}

}  // namespace

SparseRows::SparseRows(size_t floats_per_row)
    : floats_per_row_(floats_per_row),
      stride_(floats_per_row + kTagFloats),
      chunk_shift_(ChunkShift(stride_)),
      chunk_rows_(uint32_t{1} << chunk_shift_) {}

size_t SparseRows::Probe(uint64_t key, uint64_t hash) const {
  // The low bits of the hash: the slice was chosen by its high bits.
  const size_t mask = slots_.size() - 1;
  size_t i = hash & mask;
  while (slots_[i].row != kEmpty && slots_[i].key != key) i = (i + 1) & mask;
  return i;
}

float* SparseRows::Find(uint64_t key, uint64_t hash) const {
  if (size_ == 0) return nullptr;
  const Slot& slot = slots_[Probe(key, hash)];
  return slot.row == kEmpty ? nullptr : RowAt(slot.row);
}

float* SparseRows::Insert(uint64_t key, uint64_t hash, bool* created) {
  if ((size_ + 1) * 8 > slots_.size() * 7) Grow();
  Slot& slot = slots_[Probe(key, hash)];
  if (slot.row != kEmpty) {
    *created = false;
    return RowAt(slot.row);
  }
  uint32_t row;
  if (!free_rows_.empty()) {
    row = free_rows_.back();
    free_rows_.pop_back();
  } else {
    row = next_row_++;
  }
  if ((row >> chunk_shift_) >= chunks_.size()) {
    chunks_.push_back(std::make_unique<float[]>(size_t{chunk_rows_} * stride_));
  }
  slot.key = key;
  slot.row = row;
  ++size_;
  *created = true;
  float* const at = RowAt(row);
  set_tag(at, 0);
  return at;
}

std::unique_ptr<SparseRows> SparseRows::Clone() const {
  auto copy = std::make_unique<SparseRows>(floats_per_row_);
  copy->slots_ = slots_;
  copy->size_ = size_;
  copy->next_row_ = next_row_;
  copy->free_rows_ = free_rows_;
  const size_t chunk_floats = size_t{chunk_rows_} * stride_;
  for (const auto& chunk : chunks_) {
    copy->chunks_.push_back(std::make_unique<float[]>(chunk_floats));
    std::copy(chunk.get(), chunk.get() + chunk_floats, copy->chunks_.back().get());
  }
  return copy;
}

bool SparseRows::Erase(uint64_t key) {
  if (size_ == 0) return false;
  const size_t mask = slots_.size() - 1;
  size_t hole = Probe(key, Hash(key));
  if (slots_[hole].row == kEmpty) return false;
  free_rows_.push_back(slots_[hole].row);
  slots_[hole].row = kEmpty;
  --size_;
  // Backward shift: later keys of the cluster that may not sit past the
  // hole's position move into it, so every key stays reachable from home.
  for (size_t j = (hole + 1) & mask; slots_[j].row != kEmpty; j = (j + 1) & mask) {
    const size_t home = Hash(slots_[j].key) & mask;
    // Whether home lies cyclically in (hole, j]: then j's key stays.
    const bool stays = hole <= j ? (hole < home && home <= j) : (hole < home || home <= j);
    if (stays) continue;
    slots_[hole] = slots_[j];
    slots_[j].row = kEmpty;
    hole = j;
  }
  return true;
}

bool SparseRows::SampleKey(uint64_t r, uint64_t* key) const {
  if (size_ == 0) return false;
  const size_t mask = slots_.size() - 1;
  size_t i = r & mask;
  while (slots_[i].row == kEmpty) i = (i + 1) & mask;
  *key = slots_[i].key;
  return true;
}

void SparseRows::Grow() {
  std::vector<Slot> old = std::move(slots_);
  const size_t cap = std::max<size_t>(16, old.size() * 2);
  slots_.assign(cap, Slot{0, kEmpty});
  for (const Slot& slot : old) {
    if (slot.row == kEmpty) continue;
    slots_[Probe(slot.key, Hash(slot.key))] = slot;
  }
}

uint64_t SparseRows::bytes() const {
  return slots_.capacity() * sizeof(Slot) + free_rows_.capacity() * sizeof(uint32_t) +
         (chunks_.size() > 2 ? chunks_.capacity() * sizeof(chunks_[0]) : 0) +
         chunks_.size() * (uint64_t{chunk_rows_} * stride_ * sizeof(float));
}

uint64_t SparseRows::BytesToInsert(size_t floats_per_row, const Shape& shape, size_t n) {
  const size_t stride = floats_per_row + kTagFloats;
  uint64_t bytes = 0;
  const size_t cap = CapacityFor(shape.size + n);
  if (cap > shape.slots) bytes += cap * sizeof(Slot);
  const uint32_t shift = ChunkShift(stride);
  const uint64_t chunk_rows = uint64_t{1} << shift;
  const uint64_t chunks_needed = (shape.next_row + n + chunk_rows - 1) >> shift;
  if (chunks_needed > shape.chunks) {
    bytes += (chunks_needed - shape.chunks) *
             (chunk_rows * stride * sizeof(float) + 2 * sizeof(std::unique_ptr<float[]>));
  }
  return bytes;
}

}  // namespace ps
