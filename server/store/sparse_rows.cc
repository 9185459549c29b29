#include "server/store/sparse_rows.h"

#include <algorithm>

namespace ps {

namespace {

// floor(log2(x)) and ceil(log2(x)), x >= 1.
uint32_t FloorLog2(uint64_t x) { return 63 - __builtin_clzll(x); }
uint32_t CeilLog2(uint64_t x) { return x <= 1 ? 0 : FloorLog2(x - 1) + 1; }

// The largest chunks: about 64 KiB (the most rows of a power of two that
// fit), of 16 to 4096 rows.
uint32_t ChunkShift(size_t floats_per_row) {
  const size_t row_bytes = std::max<size_t>(1, floats_per_row) * sizeof(float);
  const size_t fit = (size_t{64} << 10) / row_bytes;
  return fit < 16 ? 4 : std::min<uint32_t>(12, FloorLog2(fit));
}

// Map capacity for n keys at most 7/8 full (a power of two, >= 16).
size_t CapacityFor(size_t n) {
  return size_t{1} << std::max<uint32_t>(4, CeilLog2((n * 8 + 6) / 7));
}

}  // namespace

SparseRows::SparseRows(size_t floats_per_row)
    : floats_per_row_(floats_per_row),
      stride_(floats_per_row + kTagFloats),
      chunk_shift_(ChunkShift(stride_)),
      chunk_rows_(uint32_t{1} << chunk_shift_),
      growing_chunks_(chunk_shift_ - kFirstChunkShift + 1) {}

uint64_t SparseRows::RowsOfChunk(uint32_t shift, uint64_t j) {
  if (j == 0) return kFirstChunkRows;
  return j <= shift - kFirstChunkShift ? uint64_t{1} << (j + kFirstChunkShift - 1)
                                       : uint64_t{1} << shift;
}

uint64_t SparseRows::RowsInChunks(uint32_t shift, uint64_t n) {
  const uint64_t growing = shift - kFirstChunkShift + 1;
  if (n == 0) return 0;
  if (n <= growing) return uint64_t{1} << (n + kFirstChunkShift - 1);
  return (n - growing + 1) << shift;
}

uint64_t SparseRows::ChunksFor(uint32_t shift, uint64_t rows) {
  if (rows == 0) return 0;
  const uint64_t largest = uint64_t{1} << shift;
  if (rows > largest) return shift - kFirstChunkShift + 1 + (rows - 1 - largest) / largest + 1;
  // The first n chunks hold 2^(n+3) rows.
  return std::max<uint32_t>(kFirstChunkShift, CeilLog2(rows)) - (kFirstChunkShift - 1);
}

float* SparseRows::InsertSlow(uint64_t key, uint64_t hash, bool* created) {
  if ((size_ + 1) * 8 > slots_.size() * 7) Grow();
  Slot& slot = slots_[Probe(key, hash)];
  if (slot.row != kEmpty) {
    *created = false;
    return RowAt(slot.row);
  }
  uint32_t id;
  if (!free_rows_.empty()) {
    id = free_rows_.back();
    free_rows_.pop_back();
  } else {
    const uint32_t row = next_row_++;
    // Rows are handed out in order (or reused): at most one chunk is new.
    if (row >= RowsInChunks(chunk_shift_, chunks_.size())) {
      chunks_.push_back(
          std::make_unique<float[]>(RowsOfChunk(chunk_shift_, chunks_.size()) * stride_));
      chunk_data_ = chunks_.data();
    }
    id = IdOf(row);
  }
  slot.key = key;
  slot.row = id;
  ++size_;
  *created = true;
  float* const at = RowAt(id);
  set_tag(at, 0);
  return at;
}

std::unique_ptr<SparseRows> SparseRows::Clone() const {
  auto copy = std::make_unique<SparseRows>(floats_per_row_);
  copy->slots_ = slots_;
  copy->size_ = size_;
  copy->next_row_ = next_row_;
  copy->free_rows_ = free_rows_;
  for (size_t j = 0; j < chunks_.size(); ++j) {
    const size_t chunk_floats = RowsOfChunk(chunk_shift_, j) * stride_;
    copy->chunks_.push_back(std::make_unique<float[]>(chunk_floats));
    std::copy(chunks_[j].get(), chunks_[j].get() + chunk_floats, copy->chunks_.back().get());
  }
  copy->chunk_data_ = copy->chunks_.data();
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
         RowsInChunks(chunk_shift_, chunks_.size()) * stride_ * sizeof(float);
}

uint64_t SparseRows::BytesToInsert(size_t floats_per_row, const Shape& shape, size_t n) {
  const size_t stride = floats_per_row + kTagFloats;
  uint64_t bytes = 0;
  const size_t cap = CapacityFor(shape.size + n);
  if (cap > shape.slots) bytes += cap * sizeof(Slot);
  const uint32_t shift = ChunkShift(stride);
  const uint64_t chunks_needed = ChunksFor(shift, shape.next_row + n);
  if (chunks_needed > shape.chunks) {
    bytes += (RowsInChunks(shift, chunks_needed) - RowsInChunks(shift, shape.chunks)) * stride *
                 sizeof(float) +
             (chunks_needed - shape.chunks) * 2 * sizeof(std::unique_ptr<float[]>);
  }
  return bytes;
}

}  // namespace ps
