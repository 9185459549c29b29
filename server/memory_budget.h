// MemoryBudget: the bytes a server may hold for tables (ps_server
// --memory_budget_mb), charged before memory is allocated. Dense tables are
// charged whole at creation; sparse tables as their rows and maps grow.
// Lock-free; thread-safe.
#ifndef PS_SERVER_MEMORY_BUDGET_H_
#define PS_SERVER_MEMORY_BUDGET_H_

#include <atomic>
#include <cstdint>

namespace ps {

class MemoryBudget {
 public:
  explicit MemoryBudget(uint64_t limit) : limit_(limit) {}

  // Charges `bytes` if they fit under the limit; false (nothing charged)
  // otherwise.
  bool TryCharge(uint64_t bytes) {
    uint64_t used = used_.load(std::memory_order_relaxed);
    do {
      if (bytes > limit_ || used > limit_ - bytes) return false;
    } while (!used_.compare_exchange_weak(used, used + bytes, std::memory_order_relaxed));
    return true;
  }
  // Charges `bytes` even past the limit (memory already allocated).
  void Charge(uint64_t bytes) { used_.fetch_add(bytes, std::memory_order_relaxed); }
  void Release(uint64_t bytes) { used_.fetch_sub(bytes, std::memory_order_relaxed); }

  uint64_t used() const { return used_.load(std::memory_order_relaxed); }
  uint64_t limit() const { return limit_; }
  uint64_t left() const {
    const uint64_t u = used();
    return u >= limit_ ? 0 : limit_ - u;
  }

 private:
  const uint64_t limit_;
  std::atomic<uint64_t> used_{0};
};

}  // namespace ps

#endif  // PS_SERVER_MEMORY_BUDGET_H_
