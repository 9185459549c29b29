// Key-list caching, the server's half (PS paper, section 4.2): a worker that
// sends the same key list again (the same minibatch's keys for its push
// after its pull, or in the next epoch) sends only the list's signature, and
// the server uses the copy it kept. Lists are kept per worker (a worker
// only ever reuses its own lists), up to a byte capacity, least recently
// used first out. A list the server no longer has is a miss: the request
// fails with FAILED_PRECONDITION "key list not cached" before anything is
// applied, and the client sends the list again.
// Thread-safe.
#ifndef PS_SERVER_CORE_KEY_LIST_CACHE_H_
#define PS_SERVER_CORE_KEY_LIST_CACHE_H_

#include <cstdint>
#include <list>
#include <memory>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "absl/types/span.h"
#include "server/store/memory_budget.h"

namespace ps {

class KeyListCache {
 public:
  using List = std::shared_ptr<const std::vector<uint64_t>>;
  struct Stats {
    uint64_t lists = 0, bytes = 0, hits = 0, misses = 0;
  };

  // capacity_bytes 0: nothing is kept (every signature-only request misses).
  // `process` (not owned; may be null) is charged every list kept by every
  // cache of the process: a list is kept only while it has room (this
  // cache's own older lists are dropped to make it).
  explicit KeyListCache(uint64_t capacity_bytes, MemoryBudget* process = nullptr)
      : capacity_(capacity_bytes), process_(process) {}
  ~KeyListCache();

  // Keeps a copy of keys under (worker, signature), evicting the least
  // recently used lists past the capacity. A list over the capacity by
  // itself is not kept.
  void Put(uint32_t worker, uint64_t signature, absl::Span<const uint64_t> keys);
  // The list, or null (a miss). A hit makes the list the most recently used.
  List Get(uint32_t worker, uint64_t signature);
  Stats stats() const;

 private:
  using Key = std::pair<uint32_t, uint64_t>;
  struct Entry {
    Key key;
    List list;
  };
  static uint64_t BytesOf(const std::vector<uint64_t>& keys) {
    return keys.size() * sizeof(uint64_t) + 64;  // the list and its bookkeeping
  }

  // Drops the least recently used list.
  void DropOldestLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const uint64_t capacity_;
  MemoryBudget* const process_;
  mutable absl::Mutex mu_;
  std::list<Entry> lru_ ABSL_GUARDED_BY(mu_);  // most recently used first
  absl::flat_hash_map<Key, std::list<Entry>::iterator> index_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t hits_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t misses_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ps

#endif  // PS_SERVER_CORE_KEY_LIST_CACHE_H_
