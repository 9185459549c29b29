// MemoryBudget: the bytes a server may hold for tables (ps_server
// --memory_budget_mb), charged before memory is allocated. Dense tables are
// charged whole at creation; sparse tables as their rows and maps grow.
//
// A server process that holds several shards (a replicated cluster) gives
// each shard's store a budget of its own whose parent is the process's:
// every charge is charged to both, so the process never holds more than
// its budget whatever the number of shards, and each shard's used() is its
// share. The parent must outlive the child. Lock-free; thread-safe.
#ifndef PS_SERVER_STORE_MEMORY_BUDGET_H_
#define PS_SERVER_STORE_MEMORY_BUDGET_H_

#include <algorithm>
#include <atomic>
#include <cstdint>

namespace ps {

class MemoryBudget {
 public:
  explicit MemoryBudget(uint64_t limit, MemoryBudget* parent = nullptr)
      : limit_(limit), parent_(parent) {}
  // A child gives back to its parent what is still charged to it: a shard's
  // store dropped (a copy replaced by a snapshot, a shard moved away)
  // returns its tables' bytes to the process.
  ~MemoryBudget() {
    if (parent_ != nullptr) parent_->Release(used());
  }
  MemoryBudget(const MemoryBudget&) = delete;
  MemoryBudget& operator=(const MemoryBudget&) = delete;

  // Charges `bytes` if they fit under the limit (and the parent's); false
  // (nothing charged) otherwise.
  bool TryCharge(uint64_t bytes) {
    uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (bytes > limit_ || used > limit_ - bytes) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    if (parent_ != nullptr && !parent_->TryCharge(bytes)) {
      used_.fetch_sub(bytes, std::memory_order_relaxed);
      return false;
    }
    return true;
  }
  // Charges `bytes` even past the limit (memory already allocated).
  void Charge(uint64_t bytes) {
    used_.fetch_add(bytes, std::memory_order_relaxed);
    if (parent_ != nullptr) parent_->Charge(bytes);
  }
  void Release(uint64_t bytes) {
    used_.fetch_sub(bytes, std::memory_order_relaxed);
    if (parent_ != nullptr) parent_->Release(bytes);
  }

  // Bytes charged here (a shard's share, with a parent).
  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  // The limit that binds: the parent's when there is one.
  uint64_t limit() const { return parent_ != nullptr ? parent_->limit() : limit_; }
  uint64_t left() const {
    const uint64_t u = used();
    const uint64_t own = u >= limit_ ? 0 : limit_ - u;
    return parent_ != nullptr ? std::min(own, parent_->left()) : own;
  }

 private:
  const uint64_t limit_;
  MemoryBudget* const parent_;
  std::atomic<uint64_t> used_{0};
};

}  // namespace ps

#endif  // PS_SERVER_STORE_MEMORY_BUDGET_H_
