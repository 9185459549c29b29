// ServerLimits: the resource limits one shard enforces, so that no request
// (or set of requests) can exhaust it. Each is set by a ps_server flag (named
// in the refusal message) and has a default fit for a production server.
// A plain struct; DefaultMemoryBudget reads the process's memory limits.
#ifndef PS_SERVER_CORE_SERVER_LIMITS_H_
#define PS_SERVER_CORE_SERVER_LIMITS_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ps {

struct ServerLimits {
  // Bytes of parameters and optimizer state this shard may hold
  // (--memory_budget_mb; 0 there means DefaultMemoryBudget()).
  uint64_t memory_budget_bytes = uint64_t{1} << 30;
  uint32_t max_tables = 1024;                  // --max_tables
  uint64_t max_keys_per_request = 1ull << 24;  // --max_keys_per_request
  uint64_t max_message_bytes = 64ull << 20;    // --max_message_mb: request and pull reply
  uint32_t max_table_name_bytes = 256;         // --max_table_name_bytes
  uint32_t max_parked_calls = 4096;  // --max_parked_calls: waiting pulls + held BSP pushes
  absl::Duration max_lease = absl::Minutes(5);  // --max_lease_seconds
  uint64_t max_clock = uint64_t{1} << 62;       // --max_clock: clocks at or above are refused
  // How long a push's request id is remembered, so that a retry arriving
  // within it is recognized (--dedup_retention_seconds). Must exceed the
  // clients' deadline times attempts.
  absl::Duration dedup_retention = absl::Minutes(2);
  // Key lists kept for key-list caching, all workers together
  // (--key_list_cache_mb; 0: none kept, workers must send every list).
  uint64_t key_list_cache_bytes = uint64_t{64} << 20;
  // Tiered tables: the directory their rows go under (--table_dir; "":
  // tiered tables are refused) and the bytes their files may take there,
  // all tables of the process together (--disk_budget_mb; 0: no limit).
  std::string table_dir;
  uint64_t disk_budget_bytes = 0;
};

// A large fraction (3/4) of the memory this process may use: the smallest of
// physical memory, the cgroup's limit (v2 memory.max or v1
// memory.limit_in_bytes) and RLIMIT_AS. `why` (optional) receives a phrase
// saying which limit it came from.
uint64_t DefaultMemoryBudget(std::string* why = nullptr);

// A request's size against the limits: INVALID_ARGUMENT when it names more
// than max_keys_per_request keys, RESOURCE_EXHAUSTED when its `bytes` exceed
// max_message_bytes; each message names the request (`what`: "push",
// "pull"), the table and the flag to change.
absl::Status CheckRequestSize(const char* what, const std::string& table, uint64_t keys,
                              uint64_t bytes, const ServerLimits& limits);

}  // namespace ps

#endif  // PS_SERVER_CORE_SERVER_LIMITS_H_
