// SparseRows: the rows of one slice of a sparse table, built for very many
// small rows.
//
// A flat open-addressing hash map (linear probing over 12-byte slots of key
// and row id, at most 7/8 full, so a lookup usually touches one cache
// line) points into rows kept in chunks: the first of 16 rows, each next one
// twice the last, up to about 64 KiB, then more of that size. A slice of a
// few rows thus takes a few hundred bytes, and the rows of many small
// slices share pages (fewer TLB misses), while a large slice's rows sit in
// 64 KiB chunks.
// A row is `floats_per_row` contiguous floats (a table's values for the key
// followed by their optimizer state), then a uint32 change tag (incremental
// checkpoints, server/cut_state.h) in the next 4 bytes, so a row costs its
// floats plus 4 bytes of tag plus 12 bytes per map slot, about 14-27 bytes
// with the map between 7/16 and 7/8 full, and nothing per key on the heap.
// The tag sits right after the row's floats (no lookup to find it, usually
// the row's own cache line); Clone copies it with the row. Rows never move once created (chunks are
// not reallocated), so a row's address stays valid until its key is erased
// (its row then goes to the next new key); growing the map only moves keys
// and row ids.
//
// Not thread-safe: the slice's lock guards it. Every allocation is reported
// to a byte counter the caller passes, so the store can charge its memory
// budget.
#ifndef PS_SERVER_STORE_SPARSE_ROWS_H_
#define PS_SERVER_STORE_SPARSE_ROWS_H_

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "common/hash.h"
#include "common/prefetch.h"

namespace ps {

class SparseRows {
 public:
  explicit SparseRows(size_t floats_per_row);
  SparseRows(const SparseRows&) = delete;
  SparseRows& operator=(const SparseRows&) = delete;

  // The hash the map (and the slice choice, Placement::SparseSliceOfHash)
  // uses; callers that look up many keys compute it once per key.
  static uint64_t Hash(uint64_t key) { return Mix64(key); }

  // The row of `key` (whose Hash is `hash`), or null.
  float* Find(uint64_t key, uint64_t hash) const {
    if (size_ == 0) return nullptr;
    const Slot& slot = slots_[Probe(key, hash)];
    return slot.row == kEmpty ? nullptr : RowAt(slot.row);
  }
  float* Find(uint64_t key) const { return Find(key, Hash(key)); }
  // The row of `key`; when absent, a new row (its floats unset: the caller
  // initializes them; its tag 0) and *created = true.
  float* Insert(uint64_t key, uint64_t hash, bool* created) {
    // Inline when the key has a row (a push's usual case).
    if (float* row = Find(key, hash)) {
      *created = false;
      return row;
    }
    return InsertSlow(key, hash, created);
  }
  float* Insert(uint64_t key, bool* created) { return Insert(key, Hash(key), created); }
  // Starts loading the map slot a key of this hash starts probing at.
  void Prefetch(uint64_t hash) const {
    // Unconditional (common/prefetch.h): an empty map's is of a null base.
    PrefetchAt(slots_.data(), (hash & (slots_.size() - 1)) * sizeof(Slot));
  }
  // Where the map's slots start and the mask of their count (capacity - 1),
  // for a caller that publishes them to prefetch without the lock (a stale
  // pair only makes a prefetch useless: prefetches do not fault).
  const void* slots_data() const { return slots_.data(); }
  uint64_t slots_mask() const { return slots_.empty() ? 0 : slots_.size() - 1; }
  static constexpr size_t kSlotBytes = 12;
  // A deep copy (a checkpoint's copy-on-write of a slice).
  std::unique_ptr<SparseRows> Clone() const;
  // Removes `key`; its row is reused by a later Insert. False when absent.
  bool Erase(uint64_t key);
  // A key with a row, from the map slot `r` picks (the first occupied one
  // from r mod capacity on): a cheap random pick for sampled eviction.
  // False when there are no rows.
  bool SampleKey(uint64_t r, uint64_t* key) const;

  // The change tag stored after `row` (a row of this map).
  uint32_t tag(const float* row) const {
    uint32_t t;
    std::memcpy(&t, row + floats_per_row_, sizeof t);
    return t;
  }
  void set_tag(float* row, uint32_t tag) { std::memcpy(row + floats_per_row_, &tag, sizeof tag); }
  // Sets the row's tag to `tag` if that is larger (tags only grow).
  void RaiseTag(float* row, uint32_t tag) {
    if (tag > this->tag(row)) set_tag(row, tag);
  }

  size_t size() const { return size_; }
  // Bytes held by the map and the chunks.
  uint64_t bytes() const;
  // What Insert of `n` new keys allocates at most (map and chunks; the
  // chunk table's own growth is approximated by two pointers a chunk).
  uint64_t BytesToInsert(size_t n) const { return BytesToInsert(floats_per_row_, shape(), n); }

  // What BytesToInsert depends on, so that an owner can publish it and
  // estimate without the lock (the estimate is then only as fresh as the
  // published shape).
  struct Shape {
    uint64_t size = 0;      // keys
    uint64_t next_row = 0;  // rows handed out
    uint64_t slots = 0;     // map capacity
    uint64_t chunks = 0;
  };
  Shape shape() const { return {size_, next_row_, slots_.size(), chunks_.size()}; }
  static uint64_t BytesToInsert(size_t floats_per_row, const Shape& shape, size_t n);

  // Calls f(key, row) for every row, in no particular order.
  template <typename F>
  void ForEach(F f) const {
    for (const Slot& slot : slots_) {
      if (slot.row != kEmpty) f(uint64_t{slot.key}, RowAt(slot.row));
    }
  }

  size_t floats_per_row() const { return floats_per_row_; }

 private:
  static constexpr uint32_t kEmpty = ~uint32_t{0};

  // Floats a row takes in a chunk: its floats, then one for the tag.
  static constexpr size_t kTagFloats = 1;
  static_assert(kTagFloats * sizeof(float) == sizeof(uint32_t), "the tag fills one float");

  // A map slot holds its row's id: the row's chunk times chunk_rows_ plus
  // its place in the chunk (every chunk has at most chunk_rows_ rows), so
  // that finding a row is a shift, a mask and one load. Row ids of erased
  // keys are reused; a slice holds at most about 2^32 rows either way.
  float* RowAt(uint32_t id) const {
    return chunk_data_[id >> chunk_shift_].get() + (id & (chunk_rows_ - 1)) * stride_;
  }
  // The id of the row-th row handed out (rows fill the chunks in order).
  uint32_t IdOf(uint32_t row) const {
    uint32_t chunk, offset;
    if (row < chunk_rows_) {
      // Chunk 0 holds rows [0, 16), chunk j >= 1 of the growing ones rows
      // [2^(j+3), 2^(j+4)).
      const uint32_t high = 31 - __builtin_clz(row | (kFirstChunkRows - 1));
      chunk = high - (kFirstChunkShift - 1);
      offset = row - ((uint32_t{1} << high) & ~(kFirstChunkRows - 1));
    } else {
      chunk = growing_chunks_ - 1 + (row >> chunk_shift_);
      offset = row & (chunk_rows_ - 1);
    }
    return (chunk << chunk_shift_) | offset;
  }
  // The chunk layout (see the header): rows in chunk j, and in the first n
  // chunks; the chunks holding the first `rows` rows. `shift`: log2 of the
  // largest chunk's rows.
  static constexpr uint32_t kFirstChunkShift = 4;
  static constexpr uint32_t kFirstChunkRows = uint32_t{1} << kFirstChunkShift;
  static uint64_t RowsOfChunk(uint32_t shift, uint64_t j);
  static uint64_t RowsInChunks(uint32_t shift, uint64_t n);
  static uint64_t ChunksFor(uint32_t shift, uint64_t rows);
  struct Slot {
    uint64_t key;
    uint32_t row;  // the row's id (RowAt), or kEmpty
  } __attribute__((packed));
  static_assert(sizeof(Slot) == kSlotBytes, "slots are packed");

  // Doubles the map (or creates it) and re-inserts every key.
  void Grow();
  // Index of key's slot, or of the empty slot where it would go.
  size_t Probe(uint64_t key, uint64_t hash) const {
    // The low bits of the hash: the slice was chosen by its high bits.
    const size_t mask = slots_.size() - 1;
    size_t i = hash & mask;
    while (slots_[i].row != kEmpty && slots_[i].key != key) i = (i + 1) & mask;
    return i;
  }
  // Insert of a key without a row (or with one, found again).
  float* InsertSlow(uint64_t key, uint64_t hash, bool* created);

  const size_t floats_per_row_;
  const size_t stride_;   // floats_per_row_ + kTagFloats
  uint32_t chunk_shift_;  // rows of the largest chunks = 1 << chunk_shift_
  uint32_t chunk_rows_;
  uint32_t growing_chunks_;  // chunks before the first of chunk_rows_
  std::vector<Slot> slots_;  // size a power of two, or empty
  size_t size_ = 0;
  uint32_t next_row_ = 0;            // rows handed out
  std::vector<uint32_t> free_rows_;  // row ids of erased keys, reused first
  // The first chunks' pointers sit in the object itself (most slices of a
  // table with many buckets have one or two chunks), so finding a row does
  // not load another cache line.
  absl::InlinedVector<std::unique_ptr<float[]>, 2> chunks_;
  // chunks_.data(), kept up to date as chunks are added (RowAt then does
  // not ask the vector whether its storage is inline).
  const std::unique_ptr<float[]>* chunk_data_ = nullptr;
};

}  // namespace ps

#endif  // PS_SERVER_STORE_SPARSE_ROWS_H_
