// KvStore: the small consistent key-value store that cluster membership is
// built on (etcd in production, common/etcd_kv_store.h; an in-memory fake in
// tests, common/memory_kv_store.h). It follows etcd's v3 model: every write
// that changes something bumps one global revision, each key remembers the
// revision of its last write (mod_revision), keys may be attached to a lease
// that must be kept alive or the keys are deleted, and transactions compare
// mod_revisions before applying.
//
// Implementations are thread-safe. Errors shared by every method:
//   UNAVAILABLE       the store cannot be reached; the message names the
//                     endpoint and says what to check ("is etcd running?
//                     see --etcd"). A write that fails this way may or may
//                     not have been applied.
//   INVALID_ARGUMENT  a bad argument (empty key, non-positive ttl, a key
//                     written twice in one transaction).
#ifndef PS_COMMON_KV_STORE_H_
#define PS_COMMON_KV_STORE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"

namespace ps {

struct KvEntry {
  std::string key;
  std::string value;
  int64_t mod_revision = 0;  // revision of the key's last write
  int64_t lease = 0;         // 0: not attached to a lease
};

// The result of a read: entries sorted by key; `revision` is the store's
// revision at the read (pass it to WaitForChange to wait for what follows).
struct KvRange {
  std::vector<KvEntry> entries;
  int64_t revision = 0;
};

// Holds iff `key`'s mod_revision equals `mod_revision`; 0 means "key absent".
struct KvCompare {
  std::string key;
  int64_t mod_revision = 0;
};

struct KvOp {
  enum Kind { kPut, kDelete };
  Kind kind = kPut;
  std::string key;
  std::string value;  // kPut only
  int64_t lease = 0;  // kPut only; 0: no lease
};

class KvStore {
 public:
  virtual ~KvStore() = default;

  // Grants a lease that lives `ttl` past its grant and each KeepAlive, and
  // returns its id (never 0). Stores may round ttl up (etcd: to whole
  // seconds, and to at least its minimum TTL, about 2 s by default).
  // INVALID_ARGUMENT when ttl <= 0.
  virtual absl::StatusOr<int64_t> GrantLease(absl::Duration ttl) = 0;

  // Restarts the lease's ttl. NOT_FOUND when it has expired or was revoked
  // (its keys are gone: grant a new lease and write them again).
  virtual absl::Status KeepAlive(int64_t lease) = 0;

  // Ends the lease now and deletes its keys (one revision). NOT_FOUND when
  // it has expired or was revoked already.
  virtual absl::Status RevokeLease(int64_t lease) = 0;

  // The entry of `key`; entries is empty when the key is absent.
  virtual absl::StatusOr<KvRange> Get(std::string_view key) = 0;

  // Every entry whose key starts with `prefix` ("" means every key). A
  // prefix is plain bytes: "a/" matches "a/x" but not "ab".
  virtual absl::StatusOr<KvRange> GetPrefix(std::string_view prefix) = 0;

  // Sets `key` (attached to `lease` unless 0) and returns the new revision.
  // NOT_FOUND when `lease` has expired or was revoked.
  virtual absl::StatusOr<int64_t> Put(std::string_view key, std::string_view value,
                                      int64_t lease = 0) = 0;

  // Deletes `key`; OK (and no new revision) when it is absent.
  virtual absl::Status Delete(std::string_view key) = 0;

  // Atomically: if every compare holds, applies every op (all at one new
  // revision, if any op changes something) and returns true; otherwise
  // changes nothing and returns false. A key may be put at most once per
  // transaction and not both put and deleted (INVALID_ARGUMENT, as in etcd).
  // NOT_FOUND when the compares hold but a put names an expired lease.
  virtual absl::StatusOr<bool> Txn(const std::vector<KvCompare>& compares,
                                   const std::vector<KvOp>& ops) = 0;

  // Blocks until a key under `prefix` is created, changed or deleted at a
  // revision > after_revision (returns true), or until `deadline` (returns
  // false). Returns at once (true) if such a change already happened and is
  // still known; also true when that history is no longer known (etcd
  // compacted it), so the caller re-reads. Spurious true is never returned
  // otherwise. The deadline is on the store's clock (MemoryKvStore: its
  // Clock; etcd: real time).
  virtual absl::StatusOr<bool> WaitForChange(std::string_view prefix, int64_t after_revision,
                                             absl::Time deadline) = 0;
};

// Debian's Abseil has its own absl::string_view (not an alias of
// std::string_view): this passes the interface's std::string_view to absl.
inline absl::string_view ToAbsl(std::string_view s) {
  return absl::string_view(s.data(), s.size());
}

// Argument checks shared by the implementations, so that both reject the
// same calls with the same messages.
inline absl::Status CheckKvKey(std::string_view key, std::string_view method) {
  if (!key.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("KvStore::", ToAbsl(method), ": empty key"));
}

inline absl::Status CheckKvTtl(absl::Duration ttl) {
  if (ttl > absl::ZeroDuration()) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("KvStore::GrantLease: ttl must be positive, got ", absl::FormatDuration(ttl)));
}

inline absl::Status CheckKvTxn(const std::vector<KvCompare>& compares,
                               const std::vector<KvOp>& ops) {
  for (const KvCompare& c : compares) {
    if (absl::Status s = CheckKvKey(c.key, "Txn (compare)"); !s.ok()) return s;
  }
  for (size_t i = 0; i < ops.size(); ++i) {
    if (absl::Status s = CheckKvKey(ops[i].key, "Txn (op)"); !s.ok()) return s;
    for (size_t j = 0; j < i; ++j) {
      const bool any_put = ops[i].kind == KvOp::kPut || ops[j].kind == KvOp::kPut;
      if (any_put && ops[i].key == ops[j].key) {
        return absl::InvalidArgumentError(
            absl::StrCat("KvStore::Txn: key '", ops[i].key, "' is written by ops ", j, " and ", i,
                         "; a transaction may put a key only once and not also delete it"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace ps

#endif  // PS_COMMON_KV_STORE_H_
