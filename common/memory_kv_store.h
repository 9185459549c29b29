// MemoryKvStore: a KvStore held in memory, for tests. Revisions, leases and
// transactions behave like etcd's (see common/kv_store.h); time comes from an
// injected Clock, so a FakeClock drives lease expiry. Expired leases are
// reaped lazily, at the start of every call and on each poll of a waiting
// WaitForChange (every 10 ms of the clock's time). SetUnavailable(true)
// simulates the store being down: every call fails with UNAVAILABLE.
//
// Thread-safe: one mutex guards all state. The clock must outlive the store.
#ifndef PS_COMMON_MEMORY_KV_STORE_H_
#define PS_COMMON_MEMORY_KV_STORE_H_

#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/kv_store.h"

namespace ps {

class MemoryKvStore final : public KvStore {
 public:
  // How many changes WaitForChange remembers; older history counts as
  // compacted (WaitForChange returns true for it, as etcd's store would).
  static constexpr size_t kHistoryLimit = 10000;

  explicit MemoryKvStore(Clock* clock = Clock::Real());

  // While set, every call (including a blocked WaitForChange) returns
  // UNAVAILABLE and changes nothing. Lease time keeps running, as in a real
  // outage: a lease that could not be kept alive meanwhile has expired when
  // the store comes back.
  void SetUnavailable(bool unavailable);

  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl) override;
  absl::Status KeepAlive(int64_t lease) override;
  absl::Status RevokeLease(int64_t lease) override;
  absl::StatusOr<KvRange> Get(std::string_view key) override;
  absl::StatusOr<KvRange> GetPrefix(std::string_view prefix) override;
  absl::StatusOr<int64_t> Put(std::string_view key, std::string_view value,
                              int64_t lease = 0) override;
  absl::Status Delete(std::string_view key) override;
  absl::StatusOr<bool> Txn(const std::vector<KvCompare>& compares,
                           const std::vector<KvOp>& ops) override;
  absl::StatusOr<bool> WaitForChange(std::string_view prefix, int64_t after_revision,
                                     absl::Time deadline) override;

 private:
  struct Value {
    std::string value;
    int64_t mod_revision = 0;
    int64_t lease = 0;
  };
  struct Lease {
    absl::Duration ttl;
    absl::Time expiry;  // expired once the clock passes it
  };
  struct Change {
    int64_t revision;
    std::string key;
  };

  // UNAVAILABLE while SetUnavailable(true); otherwise reaps expired leases.
  absl::Status BeginCallLocked(std::string_view method) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ReapExpiredLeasesLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Deletes the lease and its keys (one new revision if it had keys).
  void EndLeaseLocked(int64_t lease) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckLeaseLocked(int64_t lease) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Applies the ops at revision_ + 1 and bumps revision_ if any changed
  // something. The ops have been validated.
  void ApplyLocked(const std::vector<KvOp>& ops) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RecordChangeLocked(const std::string& key, int64_t revision)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool ChangedLocked(std::string_view prefix, int64_t after_revision) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  KvRange RangeLocked(std::string_view first, bool prefix) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Clock* const clock_;

  mutable absl::Mutex mu_;
  bool unavailable_ ABSL_GUARDED_BY(mu_) = false;
  int64_t revision_ ABSL_GUARDED_BY(mu_) = 1;  // etcd's empty store is at 1
  int64_t next_lease_ ABSL_GUARDED_BY(mu_) = 7001;
  std::map<std::string, Value, std::less<>> data_ ABSL_GUARDED_BY(mu_);
  std::map<int64_t, Lease> leases_ ABSL_GUARDED_BY(mu_);
  // Recent changes in revision order, at most kHistoryLimit; changes at or
  // below forgotten_revision_ were dropped.
  std::deque<Change> history_ ABSL_GUARDED_BY(mu_);
  int64_t forgotten_revision_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ps

#endif  // PS_COMMON_MEMORY_KV_STORE_H_
