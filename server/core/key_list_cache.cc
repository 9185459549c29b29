#include "server/core/key_list_cache.h"

namespace ps {

void KeyListCache::Put(uint32_t worker, uint64_t signature, absl::Span<const uint64_t> keys) {
  if (keys.size() * sizeof(uint64_t) + 64 > capacity_) return;
  // Copied outside the lock.
  auto list = std::make_shared<const std::vector<uint64_t>>(keys.begin(), keys.end());
  const uint64_t bytes = BytesOf(*list);
  const Key key{worker, signature};
  absl::MutexLock lock(&mu_);
  auto found = index_.find(key);
  if (found != index_.end()) {
    // Already kept (the same signature is the same list): refresh it.
    lru_.splice(lru_.begin(), lru_, found->second);
    return;
  }
  while (bytes_ + bytes > capacity_ && !lru_.empty()) DropOldestLocked();
  if (process_ != nullptr) {
    while (!process_->TryCharge(bytes)) {
      if (lru_.empty()) return;  // the other shards' lists fill the process's share
      DropOldestLocked();
    }
  }
  lru_.push_front(Entry{key, std::move(list)});
  index_[key] = lru_.begin();
  bytes_ += bytes;
}

KeyListCache::~KeyListCache() {
  absl::MutexLock lock(&mu_);
  if (process_ != nullptr) process_->Release(bytes_);
}

void KeyListCache::DropOldestLocked() {
  const uint64_t bytes = BytesOf(*lru_.back().list);
  bytes_ -= bytes;
  if (process_ != nullptr) process_->Release(bytes);
  index_.erase(lru_.back().key);
  lru_.pop_back();
}

KeyListCache::List KeyListCache::Get(uint32_t worker, uint64_t signature) {
  absl::MutexLock lock(&mu_);
  auto found = index_.find(Key{worker, signature});
  if (found == index_.end()) {
    ++misses_;
    return nullptr;
  }
  ++hits_;
  lru_.splice(lru_.begin(), lru_, found->second);
  return found->second->list;
}

KeyListCache::Stats KeyListCache::stats() const {
  absl::MutexLock lock(&mu_);
  return Stats{index_.size(), bytes_, hits_, misses_};
}

}  // namespace ps
