// EtcdKvStore: a KvStore backed by an etcd v3 cluster member, spoken to over
// etcd's JSON gateway (HTTP POST of JSON to /v3/kv/..., /v3/lease/...,
// /v3/watch on the client URL; keys and values travel base64-encoded).
//
// Thread-safe: the store holds only its immutable options; each call opens
// its own HTTP connection (cheap on the loopback and LAN links etcd runs on),
// so concurrent callers never wait for one another. Unary calls give up
// after options.request_timeout; WaitForChange holds a watch stream open
// until its deadline.
//
// Errors: besides those of common/kv_store.h, etcd's own errors keep their
// gRPC code (e.g. NOT_FOUND for an unknown lease) and carry etcd's message,
// prefixed with the endpoint and the gateway path. An endpoint that cannot
// be parsed makes every call return INVALID_ARGUMENT.
#ifndef PS_COMMON_ETCD_KV_STORE_H_
#define PS_COMMON_ETCD_KV_STORE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/kv_store.h"
#include "nlohmann/json_fwd.hpp"

namespace ps {

struct EtcdOptions {
  // "host:port" or "http://host:port" (TLS is not supported).
  std::string endpoint;
  // Bounds connecting and each unary call.
  absl::Duration request_timeout = absl::Seconds(2);
};

class EtcdKvStore final : public KvStore {
 public:
  explicit EtcdKvStore(EtcdOptions options);

  // "host:port", as given (without "http://").
  const std::string& endpoint() const { return target_.endpoint; }

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
  // Watches [prefix, prefix end) from after_revision + 1 over one streaming
  // POST to /v3/watch; returns on the first event. etcd delivers history
  // (changes already made) up to ~100 ms after the watch starts, so a wait
  // lasts at least kMinWatchWindow even when the deadline is nearer.
  absl::StatusOr<bool> WaitForChange(std::string_view prefix, int64_t after_revision,
                                     absl::Time deadline) override;

  static constexpr absl::Duration kMinWatchWindow = absl::Milliseconds(250);

 private:
  struct Target {
    std::string endpoint;  // host:port
    std::string host;
    int port = 0;
    absl::Status status;  // INVALID_ARGUMENT when the endpoint is unparsable
  };
  static Target ParseEndpoint(std::string_view endpoint);

  // POSTs `request` to the gateway `path` (a unary call); returns the
  // parsed response, or the transport or etcd error mapped to a status.
  absl::StatusOr<nlohmann::json> Call(const char* path, const nlohmann::json& request) const;

  const EtcdOptions options_;
  const Target target_;
};

// The smallest key after every key that starts with `prefix` (the range_end
// of a prefix range); "\0" when there is none (every key >= prefix).
std::string EtcdPrefixEnd(std::string_view prefix);

}  // namespace ps

#endif  // PS_COMMON_ETCD_KV_STORE_H_
