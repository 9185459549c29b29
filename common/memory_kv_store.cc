#include "common/memory_kv_store.h"

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace ps {
namespace {

// How often a waiting WaitForChange re-checks lease expiry (clock time).
constexpr absl::Duration kWaitPoll = absl::Milliseconds(10);

absl::Status LeaseNotFound(int64_t lease) {
  return absl::NotFoundError(
      absl::StrCat("lease ", lease, " has expired or was revoked; grant a new one"));
}

}  // namespace

MemoryKvStore::MemoryKvStore(Clock* clock) : clock_(clock) {}

void MemoryKvStore::SetUnavailable(bool unavailable) {
  absl::MutexLock lock(&mu_);
  unavailable_ = unavailable;
}

absl::Status MemoryKvStore::BeginCallLocked(std::string_view method) {
  if (unavailable_) {
    return absl::UnavailableError(
        absl::StrCat("KvStore::", ToAbsl(method),
                     ": the in-memory store is marked unavailable "
                     "(MemoryKvStore::SetUnavailable); is etcd running? see --etcd"));
  }
  ReapExpiredLeasesLocked();
  return absl::OkStatus();
}

void MemoryKvStore::ReapExpiredLeasesLocked() {
  const absl::Time now = clock_->Now();
  std::vector<int64_t> expired;
  for (const auto& [id, lease] : leases_) {
    if (now > lease.expiry) expired.push_back(id);
  }
  for (int64_t id : expired) EndLeaseLocked(id);
}

void MemoryKvStore::EndLeaseLocked(int64_t lease) {
  leases_.erase(lease);
  std::vector<KvOp> deletes;
  for (const auto& [key, value] : data_) {
    if (value.lease == lease) deletes.push_back(KvOp{KvOp::kDelete, key, "", 0});
  }
  ApplyLocked(deletes);
}

absl::Status MemoryKvStore::CheckLeaseLocked(int64_t lease) const {
  if (lease == 0 || leases_.count(lease) > 0) return absl::OkStatus();
  return LeaseNotFound(lease);
}

void MemoryKvStore::ApplyLocked(const std::vector<KvOp>& ops) {
  const int64_t revision = revision_ + 1;
  bool changed = false;
  for (const KvOp& op : ops) {
    if (op.kind == KvOp::kPut) {
      data_[op.key] = Value{op.value, revision, op.lease};
    } else {
      auto it = data_.find(op.key);
      if (it == data_.end()) continue;
      data_.erase(it);
    }
    RecordChangeLocked(op.key, revision);
    changed = true;
  }
  if (changed) revision_ = revision;
}

void MemoryKvStore::RecordChangeLocked(const std::string& key, int64_t revision) {
  history_.push_back(Change{revision, key});
  while (history_.size() > kHistoryLimit) {
    forgotten_revision_ = history_.front().revision;
    history_.pop_front();
  }
}

bool MemoryKvStore::ChangedLocked(std::string_view prefix, int64_t after_revision) const {
  if (after_revision < forgotten_revision_) return true;  // history compacted
  for (auto it = history_.rbegin(); it != history_.rend() && it->revision > after_revision; ++it) {
    if (absl::StartsWith(it->key, ToAbsl(prefix))) return true;
  }
  return false;
}

KvRange MemoryKvStore::RangeLocked(std::string_view first, bool prefix) const {
  KvRange range;
  range.revision = revision_;
  for (auto it = data_.lower_bound(first); it != data_.end(); ++it) {
    if (prefix ? !absl::StartsWith(it->first, ToAbsl(first)) : it->first != first) break;
    range.entries.push_back(
        KvEntry{it->first, it->second.value, it->second.mod_revision, it->second.lease});
  }
  return range;
}

absl::StatusOr<int64_t> MemoryKvStore::GrantLease(absl::Duration ttl) {
  if (absl::Status s = CheckKvTtl(ttl); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (absl::Status s = BeginCallLocked("GrantLease"); !s.ok()) return s;
  const int64_t id = next_lease_++;
  leases_[id] = Lease{ttl, clock_->Now() + ttl};
  return id;
}

absl::Status MemoryKvStore::KeepAlive(int64_t lease) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = BeginCallLocked("KeepAlive"); !s.ok()) return s;
  auto it = leases_.find(lease);
  if (it == leases_.end()) return LeaseNotFound(lease);
  it->second.expiry = clock_->Now() + it->second.ttl;
  return absl::OkStatus();
}

absl::Status MemoryKvStore::RevokeLease(int64_t lease) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = BeginCallLocked("RevokeLease"); !s.ok()) return s;
  if (leases_.count(lease) == 0) return LeaseNotFound(lease);
  EndLeaseLocked(lease);
  return absl::OkStatus();
}

absl::StatusOr<KvRange> MemoryKvStore::Get(std::string_view key) {
  if (absl::Status s = CheckKvKey(key, "Get"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (absl::Status s = BeginCallLocked("Get"); !s.ok()) return s;
  return RangeLocked(key, /*prefix=*/false);
}

absl::StatusOr<KvRange> MemoryKvStore::GetPrefix(std::string_view prefix) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = BeginCallLocked("GetPrefix"); !s.ok()) return s;
  return RangeLocked(prefix, /*prefix=*/true);
}

absl::StatusOr<int64_t> MemoryKvStore::Put(std::string_view key, std::string_view value,
                                           int64_t lease) {
  if (absl::Status s = CheckKvKey(key, "Put"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (absl::Status s = BeginCallLocked("Put"); !s.ok()) return s;
  if (absl::Status s = CheckLeaseLocked(lease); !s.ok()) return s;
  ApplyLocked({KvOp{KvOp::kPut, std::string(key), std::string(value), lease}});
  return revision_;
}

absl::Status MemoryKvStore::Delete(std::string_view key) {
  if (absl::Status s = CheckKvKey(key, "Delete"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (absl::Status s = BeginCallLocked("Delete"); !s.ok()) return s;
  ApplyLocked({KvOp{KvOp::kDelete, std::string(key), "", 0}});
  return absl::OkStatus();
}

absl::StatusOr<bool> MemoryKvStore::Txn(const std::vector<KvCompare>& compares,
                                        const std::vector<KvOp>& ops) {
  if (absl::Status s = CheckKvTxn(compares, ops); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (absl::Status s = BeginCallLocked("Txn"); !s.ok()) return s;
  for (const KvCompare& c : compares) {
    auto it = data_.find(c.key);
    const int64_t mod_revision = it == data_.end() ? 0 : it->second.mod_revision;
    if (mod_revision != c.mod_revision) return false;
  }
  for (const KvOp& op : ops) {
    if (op.kind != KvOp::kPut) continue;
    if (absl::Status s = CheckLeaseLocked(op.lease); !s.ok()) return s;
  }
  ApplyLocked(ops);
  return true;
}

absl::StatusOr<bool> MemoryKvStore::WaitForChange(std::string_view prefix, int64_t after_revision,
                                                  absl::Time deadline) {
  absl::MutexLock lock(&mu_);
  while (true) {
    if (absl::Status s = BeginCallLocked("WaitForChange"); !s.ok()) return s;
    if (ChangedLocked(prefix, after_revision)) return true;
    const absl::Time now = clock_->Now();
    if (now >= deadline) return false;
    // Wake on any write or outage; otherwise re-check leases every kWaitPoll.
    const int64_t seen = revision_;
    auto woken = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      return revision_ != seen || unavailable_;
    };
    clock_->AwaitWithTimeout(&mu_, absl::Condition(&woken), std::min(deadline - now, kWaitPoll));
  }
}

}  // namespace ps
