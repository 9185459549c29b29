// DiskAccount: a store's files counted against a disk budget shared with
// other stores (a server's --disk_budget_mb, over all its tiered tables).
// The store brings what it charged to its files' bytes after each change
// (Sync), asks how far its files may grow (Limit), and reserves a batch's
// bytes while it writes it (Reserve), since other stores write meanwhile.
// Not thread-safe: the store's writer uses it.
#ifndef PS_SERVER_STORE_DISK_ACCOUNT_H_
#define PS_SERVER_STORE_DISK_ACCOUNT_H_

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "server/store/memory_budget.h"

namespace ps {

class DiskAccount {
 public:
  explicit DiskAccount(MemoryBudget* shared) : shared_(shared) {}  // null: none
  ~DiskAccount() {
    if (shared_ != nullptr) shared_->Release(charged_);
  }
  DiskAccount(const DiskAccount&) = delete;
  DiskAccount& operator=(const DiskAccount&) = delete;

  // Charges or releases the difference to `disk`, the files' bytes now.
  void Sync(uint64_t disk) {
    if (shared_ == nullptr) return;
    if (disk > charged_) shared_->Charge(disk - charged_);
    if (disk < charged_) shared_->Release(charged_ - disk);
    charged_ = disk;
  }
  // The most the files may take: the store's own limit (0: none) and what
  // the shared budget leaves them (their `disk` bytes now and its room);
  // 0: no limit.
  uint64_t Limit(uint64_t own_limit, uint64_t disk) const {
    if (shared_ == nullptr || shared_->limit() == ~uint64_t{0}) return own_limit;
    const uint64_t room = disk + shared_->left();
    return own_limit == 0 ? room : std::min(own_limit, room);
  }
  // The budget `limit` (from Limit) came from, for errors.
  std::string Describe(uint64_t limit, uint64_t own_limit) const {
    if (shared_ == nullptr || limit == own_limit) {
      return absl::StrCat("the store's disk budget of ", limit, " bytes");
    }
    return DescribeShared();
  }
  std::string DescribeShared() const {
    return absl::StrCat("the server's disk budget (ps_server --disk_budget_mb) of ",
                        shared_->limit(), " bytes for every tiered table, ", shared_->used(),
                        " of them used");
  }

  // `bytes` of the shared budget, given back when it goes.
  class Reservation {
   public:
    Reservation(MemoryBudget* budget, uint64_t bytes) : budget_(budget), bytes_(bytes) {}
    Reservation(Reservation&& other) noexcept
        : budget_(std::exchange(other.budget_, nullptr)), bytes_(other.bytes_) {}
    Reservation(const Reservation&) = delete;
    Reservation& operator=(const Reservation&) = delete;
    Reservation& operator=(Reservation&&) = delete;
    ~Reservation() {
      if (budget_ != nullptr) budget_->Release(bytes_);
    }

   private:
    MemoryBudget* budget_;
    uint64_t bytes_;
  };
  // The shared budget's `bytes` while a batch is written; nullopt when it
  // lacks them (always a reservation without a shared budget).
  std::optional<Reservation> Reserve(uint64_t bytes) {
    if (shared_ == nullptr) return Reservation(nullptr, 0);
    if (!shared_->TryCharge(bytes)) return std::nullopt;
    return Reservation(shared_, bytes);
  }

 private:
  MemoryBudget* const shared_;
  uint64_t charged_ = 0;
};

}  // namespace ps

#endif  // PS_SERVER_STORE_DISK_ACCOUNT_H_
