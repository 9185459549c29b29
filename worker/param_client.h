// ParamClient: what training needs from a parameter store, whether remote
// (PsClient, over gRPC) or in this process (a local store, for measuring the
// cost of distribution). Implementations document their own thread safety.
#ifndef PS_WORKER_PARAM_CLIENT_H_
#define PS_WORKER_PARAM_CLIENT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "proto/ps.pb.h"

namespace ps {

// A dense run of keys [begin, end) of a table; values are key-major,
// (end - begin) * width floats.
struct PullRange {
  std::string table;
  uint64_t begin = 0;
  uint64_t end = 0;
  absl::Span<float> out;
};
struct PushRange {
  std::string table;
  uint64_t begin = 0;
  uint64_t end = 0;
  absl::Span<const float> grads;
};

// For each op i and server s, versions[i * num_servers + s] is the largest
// table version that server reported for the op's keys (0 where the op has
// no keys on s). For a pull: pushes applied before the read; for a push:
// pushes applied including this one.
using Versions = std::vector<uint64_t>;

class ParamClient {
 public:
  virtual ~ParamClient() = default;

  // Creates the table (a no-op if an identical one exists).
  virtual absl::Status CreateTable(const proto::TableDef& def) = 0;
  // Reads each op's range into its `out` span.
  virtual absl::Status Pull(absl::Span<const PullRange> ops, Versions* versions) = 0;
  // Applies each op's gradients with the table's optimizer; `clock` is the
  // worker's clock.
  virtual absl::Status Push(absl::Span<const PushRange> ops, uint64_t clock,
                            Versions* versions) = 0;
  // Number of shards the Versions are indexed by.
  virtual int num_servers() const = 0;
};

}  // namespace ps

#endif  // PS_WORKER_PARAM_CLIENT_H_
