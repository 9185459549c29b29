// LogRowIndex: the keys of one slice of a LogRowStore
// (server/store/log_row_store.h) and where each key's row lies in the log,
// in 12 bytes a slot.
//
// Robin-hood open addressing over packed slots of (key, place), any
// capacity (a key's home slot is the high half of HomeHash(key) * capacity:
// not of Mix64(key), whose high bits chose the key's slice, so that all of
// a slice's keys would share a few home slots),
// at most 0.9 full, grown by 1/8 (by 1/2 while a store replays its log,
// then fitted) and shrunk when below 0.76 full, so a row costs 13.3-15.8
// bytes (12 / load). Deletion shifts the next slots back,
// so there are no tombstones and probes stay short (a few slots on average
// at 0.9). Not thread-safe: the store's lock guards it.
#ifndef PS_SERVER_STORE_LOG_ROW_INDEX_H_
#define PS_SERVER_STORE_LOG_ROW_INDEX_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "common/hash.h"
#include "common/prefetch.h"

namespace ps {

class LogRowIndex {
 public:
  static constexpr uint32_t kNone = ~uint32_t{0};  // no place

  size_t size() const { return size_; }
  uint64_t bytes() const { return sizeof(*this) + cap_ * sizeof(Slot); }

  // The place of key, or kNone.
  uint32_t Find(uint64_t key) const {
    const size_t i = Locate(key);
    return i == cap_ ? kNone : slots_[i].loc;
  }
  // Starts loading key's home slot (a Find soon after misses less).
  void Prefetch(uint64_t key) const {
    PrefetchAt(slots_.get(), Home(key) * sizeof(Slot));  // unconditional: common/prefetch.h
  }
  // Sets key's place (not kNone); returns the one it had, or kNone. Full,
  // the slots grow by 1/8, or by 1/2 with `bulk` (a replay: fewer moves,
  // then Fit).
  uint32_t Insert(uint64_t key, uint32_t loc, bool bulk = false) {
    const size_t i = Locate(key);
    if (i != cap_) {
      const uint32_t old = slots_[i].loc;
      slots_[i].loc = loc;
      return old;
    }
    if ((size_ + 1) * 10 > cap_ * 9)
      Rehash(std::max(cap_ + kMinSlots, cap_ + cap_ / (bulk ? 2 : 8)));
    Place(Slot{key, loc});
    ++size_;
    return kNone;
  }
  // Removes key; returns its place, or kNone.
  uint32_t Erase(uint64_t key) {
    size_t i = Locate(key);
    if (i == cap_) return kNone;
    const uint32_t old = slots_[i].loc;
    for (size_t j = Next(i); slots_[j].loc != kNone && Distance(j, slots_[j].key) > 0;
         i = j, j = Next(j)) {
      slots_[i] = slots_[j];
    }
    slots_[i].loc = kNone;
    --size_;
    Fit();
    return old;
  }
  // Shrinks the slots to about 0.84 full when they are under 0.76 full.
  void Fit() {
    if (size_ * 100 < cap_ * 76 && cap_ > kMinSlots) {
      Rehash(std::max(kMinSlots, size_ * 100 / 84 + 1));
    }
  }
  // How far the farthest key lies from its home slot (tests: probes stay
  // short whatever slice the keys come from).
  size_t MaxDisplacement() const {
    size_t most = 0;
    for (size_t i = 0; i < cap_; ++i) {
      if (slots_[i].loc != kNone) most = std::max(most, Distance(i, slots_[i].key));
    }
    return most;
  }
  // Calls f(key, place) for every key, in no particular order.
  template <typename F>
  void ForEach(F f) const {
    for (size_t i = 0; i < cap_; ++i) {
      if (slots_[i].loc != kNone) f(uint64_t{slots_[i].key}, uint32_t{slots_[i].loc});
    }
  }

 private:
  struct Slot {
    uint64_t key;
    uint32_t loc;  // kNone: empty
  } __attribute__((packed));
  static_assert(sizeof(Slot) == 12, "slots are packed");
  static constexpr size_t kMinSlots = 8;

  // A hash independent of Mix64(key): the keys of one slice share its high
  // bits (Placement::SparseSliceOf).
  static uint64_t HomeHash(uint64_t key) { return Mix64(key ^ 0x2545f4914f6cdd1dULL); }
  size_t Home(uint64_t key) const {
    return static_cast<size_t>((static_cast<unsigned __int128>(HomeHash(key)) * cap_) >> 64);
  }
  size_t Distance(size_t i, uint64_t key) const {
    const size_t home = Home(key);
    return i >= home ? i - home : i + cap_ - home;
  }
  size_t Next(size_t i) const { return i + 1 == cap_ ? 0 : i + 1; }
  // The slot of key, or cap_ when absent (a probe ends at an empty slot or
  // at one nearer its home than key would be).
  size_t Locate(uint64_t key) const {
    if (size_ == 0) return cap_;
    for (size_t i = Home(key), d = 0;; i = Next(i), ++d) {
      if (slots_[i].loc == kNone || Distance(i, slots_[i].key) < d) return cap_;
      if (slots_[i].key == key) return i;
    }
  }
  // Puts s (a key not present) in, displacing keys nearer their home.
  void Place(Slot s) {
    for (size_t i = Home(s.key), d = 0;; i = Next(i), ++d) {
      if (slots_[i].loc == kNone) {
        slots_[i] = s;
        return;
      }
      const size_t theirs = Distance(i, slots_[i].key);
      if (theirs < d) {
        const Slot t = slots_[i];
        slots_[i] = s, s = t, d = theirs;
      }
    }
  }
  void Rehash(size_t cap) {
    const std::unique_ptr<Slot[]> old = std::exchange(slots_, std::make_unique<Slot[]>(cap));
    const size_t old_cap = std::exchange(cap_, cap);
    for (size_t i = 0; i < cap; ++i) slots_[i].loc = kNone;
    for (size_t i = 0; i < old_cap; ++i) {
      if (old[i].loc != kNone) Place(old[i]);
    }
  }

  std::unique_ptr<Slot[]> slots_;
  size_t cap_ = 0;
  size_t size_ = 0;
};

// The indexes of every slice of a LogRowStore, and its row count: a
// slice's index exists while it has rows. Not thread-safe: the store's
// lock guards it.
class LogSliceIndexes {
 public:
  static constexpr uint32_t kNone = LogRowIndex::kNone;

  uint64_t rows() const { return rows_; }
  uint64_t bytes() const {
    uint64_t bytes = sizeof(*this) + slices_.capacity() * (sizeof(*slices_.begin()) + 1);
    for (const auto& entry : slices_) bytes += entry.second->bytes();
    return bytes;
  }
  // The slice's index: an empty one when the slice has no rows.
  const LogRowIndex& Of(uint32_t slice) const {
    static const LogRowIndex kEmpty;
    const auto it = slices_.find(slice);
    return it == slices_.end() ? kEmpty : *it->second;
  }
  uint32_t Find(uint32_t slice, uint64_t key) const { return Of(slice).Find(key); }
  // Unconditional (common/prefetch.h): a slice without rows prefetches
  // from a null base.
  void Prefetch(uint32_t slice, uint64_t key) const { Of(slice).Prefetch(key); }
  // The places of refs (each with .slice and .key; kNone: no row), every
  // home slot requested before any is probed, so that the probes' misses
  // overlap instead of following one another.
  template <typename Ref>
  void FindMany(const Ref* refs, size_t n, uint32_t* places) const {
    std::vector<const LogRowIndex*> of(n);
    for (size_t i = 0; i < n; ++i) {
      of[i] = i > 0 && refs[i].slice == refs[i - 1].slice ? of[i - 1] : &Of(refs[i].slice);
      of[i]->Prefetch(refs[i].key);
    }
    for (size_t i = 0; i < n; ++i) places[i] = of[i]->Find(refs[i].key);
  }
  // Sets key's place; returns the one it had, or kNone.
  uint32_t Put(uint32_t slice, uint64_t key, uint32_t place) {
    std::unique_ptr<LogRowIndex>& index = slices_[slice];
    if (index == nullptr) index = std::make_unique<LogRowIndex>();
    const uint32_t old = index->Insert(key, place, bulk_);
    if (old == kNone) ++rows_;
    return old;
  }
  // Removes key; returns its place, or kNone.
  uint32_t Erase(uint32_t slice, uint64_t key) {
    const auto it = slices_.find(slice);
    if (it == slices_.end()) return kNone;
    const uint32_t old = it->second->Erase(key);
    if (old != kNone) --rows_;
    if (it->second->size() == 0) slices_.erase(it);
    return old;
  }

  // A replay: until EndBulk, full indexes grow by half (LogRowIndex::Insert);
  // EndBulk fits each to its rows. About half a replay's time on 2M rows.
  void BeginBulk() { bulk_ = true; }
  void EndBulk() {
    bulk_ = false;
    for (auto& entry : slices_) entry.second->Fit();
  }

 private:
  absl::flat_hash_map<uint32_t, std::unique_ptr<LogRowIndex>> slices_;
  uint64_t rows_ = 0;
  bool bulk_ = false;
};

}  // namespace ps

#endif  // PS_SERVER_STORE_LOG_ROW_INDEX_H_
